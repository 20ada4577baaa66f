//! Predicted plans that lead a model's ranking further than their error allows.
//!
//! `solve` ranks by estimated cost at each plan's C*, and for a prediction that C* is the
//! model's best guess, not a promise: its band says where the measured C* is expected with
//! 80 % odds. A predicted plan ranked above the best plan with measured or imported evidence
//! is shown to be cheaper only if it stays cheaper at the low end of its band. When it would
//! cost more there, the ranking cannot tell the two apart and the buyer has to know: on a
//! fresh clone the leading rows are often cards predicted on the roofline alone, whose bands
//! span several times their C*.

use super::solve::NodePlan;
use crate::store::PointSource;

/// Predicted plans listed in one note at most; the rest are counted.
const LISTED: usize = 3;

/// Marks each prediction that ranks above its model's first measured or imported plan yet
/// would cost more than it at the low end of its band with that plan's rank, so the table
/// says so on the row itself, and returns one note per model with such rows giving both
/// costs.
pub fn flag(plans: &mut [NodePlan]) -> Vec<String> {
    let mut notes = Vec::new();
    let mut marks = Vec::new();
    let mut models: Vec<&str> = plans.iter().map(|p| p.model.as_str()).collect();
    models.dedup();
    for model in models {
        let mut ranked: Vec<&NodePlan> = plans.iter().filter(|p| p.model == model).collect();
        ranked.sort_by_key(|p| p.rank);
        let Some((proven, unproven)) = leads(&ranked) else {
            continue;
        };
        marks.extend(
            unproven
                .iter()
                .map(|(plan, _, _)| (plan.model.clone(), plan.rank, proven.rank)),
        );
        notes.extend(model_note(proven, &unproven));
    }
    for plan in plans.iter_mut() {
        plan.may_not_beat_rank = marks
            .iter()
            .find(|(model, rank, _)| *model == plan.model && *rank == plan.rank)
            .map(|(_, _, proven)| *proven);
    }
    notes
}

/// A prediction ranked ahead of the evidence, with its nodes and cost at its band's low end.
type Lead<'a> = (&'a NodePlan, u64, f64);

/// A model's first plan with measured or imported evidence, and the predictions ranked above
/// it that would cost more than it at the low end of their bands (none: `None`).
fn leads<'a>(ranked: &[&'a NodePlan]) -> Option<(&'a NodePlan, Vec<Lead<'a>>)> {
    let proven = *ranked
        .iter()
        .find(|p| p.source != PointSource::Predicted && p.capex_usd.is_some())?;
    let proven_capex = proven.capex_usd?;
    let unproven: Vec<Lead<'a>> = ranked
        .iter()
        .take_while(|p| p.rank < proven.rank)
        .filter(|p| p.source == PointSource::Predicted)
        .filter_map(|p| {
            let capex = p.capex_usd?;
            let low_nodes = p.nodes_at_band_low?;
            let low_capex = capex / p.nodes.max(1) as f64 * low_nodes as f64;
            (low_capex > proven_capex).then_some((*p, low_nodes, low_capex))
        })
        .collect();
    (!unproven.is_empty()).then_some((proven, unproven))
}

fn model_note(proven: &NodePlan, unproven: &[Lead]) -> Option<String> {
    let proven_capex = proven.capex_usd?;
    let listed: Vec<String> = unproven
        .iter()
        .take(LISTED)
        .map(|(plan, low_nodes, low_capex)| {
            format!(
                "rank {} {} ({} nodes, {} at its predicted C*; {} nodes, {} at the low end \
                 of its band)",
                plan.rank,
                plan.node,
                plan.nodes,
                millions(plan.capex_usd.unwrap_or(0.0)),
                low_nodes,
                millions(*low_capex)
            )
        })
        .collect();
    let more = match unproven.len().saturating_sub(LISTED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let one = unproven.len() == 1;
    Some(format!(
        "{}: {} ranked above the first with {} evidence (rank {} {}, {} nodes, {}) {} that \
         would cost more than it at the low end of {}: {}{} — the ranking cannot tell them \
         apart; measure the card (`capplan probe`) or import a measurement before buying on a \
         prediction",
        proven.model,
        if one {
            "1 plan".to_string()
        } else {
            format!("{} plans", unproven.len())
        },
        proven.source,
        proven.rank,
        proven.node,
        proven.nodes,
        millions(proven_capex),
        if one {
            "is a prediction"
        } else {
            "are predictions"
        },
        if one { "its band" } else { "their bands" },
        listed.join(", "),
        more
    ))
}

fn millions(usd: f64) -> String {
    format!("US$ {:.2} M", usd / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::band::CStarRange;
    use crate::plan::NodeSplit;
    use crate::slo::{Percentile, Slo};
    use crate::workload::ThinkTime;

    /// A plan on `node` at `rank`: `nodes` nodes at US$ 100 000 each, and for a prediction
    /// `low` nodes at the low end of its band.
    fn plan(
        rank: usize,
        node: &str,
        source: PointSource,
        nodes: u64,
        low: Option<u64>,
    ) -> NodePlan {
        NodePlan {
            model: "llama-13b".into(),
            card: node.into(),
            node: node.into(),
            interconnect: String::new(),
            cards_per_node: 8,
            split: NodeSplit::all_for(8)[0],
            users_per_instance: 100.0,
            users_per_node: 100.0,
            conversion: None,
            evidence_c_star: 100.0,
            evidence_e2e_mean_s: None,
            evidence_output_tokens: None,
            nodes,
            cards: nodes * 8,
            source,
            evidence: String::new(),
            evidence_slo: Slo {
                ttft_s: 3.0,
                tpot_s: None,
                percentile: Percentile::Mean,
                e2e_s: None,
            },
            evidence_think_time: ThinkTime::NONE,
            evidence_note: String::new(),
            evidence_band: low.map(|_| CStarRange {
                low: 50.0,
                high: 300.0,
                basis: String::new(),
            }),
            nodes_at_band_low: low,
            may_not_beat_rank: None,
            capex_usd: Some(nodes as f64 * 1e5),
            rank,
            best_for_card: true,
            splits: Vec::new(),
        }
    }

    /// A prediction ranked first that would cost more than the first imported plan at the
    /// low end of its band is named, with both costs; one that stays cheaper is not.
    #[test]
    fn a_prediction_ahead_of_evidence_is_named_when_its_band_reaches_past_it() {
        let mut plans = vec![
            plan(1, "8xMI355X", PointSource::Predicted, 2, Some(6)),
            plan(2, "8xB300", PointSource::Predicted, 3, Some(4)),
            plan(3, "8xA40-PCIe", PointSource::Imported, 5, None),
            plan(4, "8xH200", PointSource::Predicted, 6, Some(12)),
        ];
        let notes = flag(&mut plans);
        assert_eq!(notes.len(), 1, "{notes:?}");
        let note = &notes[0];
        assert!(note.starts_with("llama-13b: 1 plan ranked above"), "{note}");
        assert!(
            note.contains("rank 3 8xA40-PCIe, 5 nodes, US$ 0.50 M"),
            "{note}"
        );
        assert!(
            note.contains(
                "rank 1 8xMI355X (2 nodes, US$ 0.20 M at its predicted C*; 6 nodes, US$ 0.60 M"
            ),
            "{note}"
        );
        assert!(
            !note.contains("8xB300") && !note.contains("8xH200"),
            "{note}"
        );
    }

    /// Without measured or imported evidence there is nothing to set the predictions against,
    /// and evidence ranked first leaves nothing ahead of it.
    #[test]
    fn no_note_without_evidence_or_with_evidence_first() {
        let mut predicted_only = vec![plan(1, "8xMI355X", PointSource::Predicted, 2, Some(60))];
        assert!(flag(&mut predicted_only).is_empty());
        let mut evidence_first = vec![
            plan(1, "8xA40-PCIe", PointSource::Measured, 5, None),
            plan(2, "8xMI355X", PointSource::Predicted, 6, Some(60)),
        ];
        assert!(flag(&mut evidence_first).is_empty());
    }

    /// The rows the note names carry the rank of the plan they may not beat; the others
    /// (a prediction that stays cheaper at its band's low end, one ranked below the evidence,
    /// the evidence itself) carry nothing.
    #[test]
    fn the_rows_the_note_names_are_marked_with_the_rank_they_may_not_beat() {
        let mut plans = vec![
            plan(1, "8xMI355X", PointSource::Predicted, 2, Some(6)),
            plan(2, "8xB300", PointSource::Predicted, 3, Some(4)),
            plan(3, "8xA40-PCIe", PointSource::Imported, 5, None),
            plan(4, "8xH200", PointSource::Predicted, 6, Some(12)),
        ];
        flag(&mut plans);
        let marks: Vec<Option<usize>> = plans.iter().map(|p| p.may_not_beat_rank).collect();
        assert_eq!(marks, vec![Some(3), None, None, None]);
    }
}
