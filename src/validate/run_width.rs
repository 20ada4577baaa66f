//! The cards a silicon row's run was made on, where its recorded layout says otherwise.
//!
//! AIConfigurator's later collections name each run by the cards it used and their expert
//! split (`…_c256_tp2_ep2_1390`, `…_tp4_0_ep4_0_…`). In 234 aggregated rows the layout
//! columns disagree with that name: they hold the square of the named width (`tp2_ep2` as
//! tp 2, attention dp 2, ep 4; `tp8_ep8` as tp 64 with the experts' tp 8 and ep 8). The
//! columns are wrong, not the name: wherever such a row's figures appear again, to the
//! millisecond, in a row whose columns agree with its name (81 such twins: SGLang,
//! TensorRT-LLM and vLLM), the twin's layout is the named width read as below, never the
//! square. Read as recorded, a two-card vLLM run of MiniMax-M2.5 was simulated on four cards
//! and predicted 34 % under its measured TPOT, and a one-node DeepSeek-R1 run on 64 cards.
//!
//! Rows that repeat such a row's measurement (`same_measurement_as`, either way), and the
//! other rows of its sweep with the same columns, carry the same mistake and are read the
//! same way. Rows with no name and no such link are read as recorded: nothing says what
//! they ran on.

use std::collections::HashMap;

/// The cards a run used and how many of them hold distinct experts, as its name states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunWidth {
    pub cards: u32,
    pub ep: u32,
}

impl RunWidth {
    /// The width a row's id names (`_tp{cards}[_0]_ep{ep}[_0]_`), if any.
    pub fn named(id: &str) -> Option<RunWidth> {
        let mut rest = id;
        while let Some(at) = rest.find("_tp") {
            rest = &rest[at + 3..];
            if let Some(width) = parse_tail(rest) {
                return Some(width);
            }
        }
        None
    }

    /// Whether recorded attention columns (`tp × dp` cards) hold the square of this width.
    pub fn squared_by(self, attention_cards: u32) -> bool {
        self.cards > 1 && attention_cards == self.cards * self.cards
    }
}

/// `{cards}[_0]_ep{ep}[_0]_…` after a `_tp`.
fn parse_tail(text: &str) -> Option<RunWidth> {
    let (cards, rest) = leading_number(text)?;
    let rest = rest.strip_prefix("_0").unwrap_or(rest);
    let rest = rest.strip_prefix("_ep")?;
    let (ep, rest) = leading_number(rest)?;
    let rest = rest.strip_prefix("_0").unwrap_or(rest);
    rest.starts_with('_').then_some(RunWidth { cards, ep })
}

fn leading_number(text: &str) -> Option<(u32, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let value = text[..digits].parse().ok()?;
    Some((value, &text[digits..]))
}

/// One row as the correction needs it.
pub struct RecordedRow<'a> {
    pub id: &'a str,
    /// The row whose measurement this one repeats (empty: none).
    pub same_measurement_as: &'a str,
    /// The sweep the row belongs to (its deployment, recorded columns included).
    pub sweep: String,
    /// The recorded attention cards, `tp × dp`.
    pub attention_cards: u32,
}

/// The run width of every row whose recorded columns square it: rows named so, the rows
/// linked to them by `same_measurement_as` with the same columns, and the rest of their
/// sweeps.
pub fn squared_rows(rows: &[RecordedRow]) -> HashMap<String, RunWidth> {
    let mut by_sweep: HashMap<&str, RunWidth> = HashMap::new();
    let sweep_of: HashMap<&str, &str> = rows.iter().map(|r| (r.id, r.sweep.as_str())).collect();
    for row in rows {
        let Some(width) = RunWidth::named(row.id).filter(|w| w.squared_by(row.attention_cards))
        else {
            continue;
        };
        by_sweep.insert(row.sweep.as_str(), width);
        // The row it repeats was recorded the same way when its sweep (columns included)
        // is the same deployment's.
        if let Some(&sweep) = sweep_of.get(row.same_measurement_as) {
            by_sweep.entry(sweep).or_insert(width);
        }
    }
    // Rows repeating a corrected row's measurement, in sweeps of their own.
    for row in rows {
        if let Some(&width) = sweep_of
            .get(row.same_measurement_as)
            .and_then(|sweep| by_sweep.get(sweep))
        {
            if width.squared_by(row.attention_cards) {
                by_sweep.entry(row.sweep.as_str()).or_insert(width);
            }
        }
    }
    rows.iter()
        .filter_map(|row| {
            let width = *by_sweep.get(row.sweep.as_str())?;
            width
                .squared_by(row.attention_cards)
                .then(|| (row.id.to_string(), width))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_named_by_its_cards_and_expert_split() {
        let named = |id| RunWidth::named(id);
        assert_eq!(
            named("2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c256_tp2_ep2_1390"),
            Some(RunWidth { cards: 2, ep: 2 })
        );
        assert_eq!(
            named("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c256_tp4_0_ep4_0_1075"),
            Some(RunWidth { cards: 4, ep: 4 })
        );
        assert_eq!(
            named("minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c256_cfg690"),
            None
        );
        assert_eq!(named("x_tp8_1"), None);
    }

    fn row<'a>(id: &'a str, same: &'a str, sweep: &str, cards: u32) -> RecordedRow<'a> {
        RecordedRow {
            id,
            same_measurement_as: same,
            sweep: sweep.into(),
            attention_cards: cards,
        }
    }

    #[test]
    fn a_squared_layout_is_read_at_its_named_width_with_its_repeats_and_sweep() {
        let rows = [
            // Named, squared: corrected.
            row("a_c256_tp2_ep2_1", "cfg690_c256", "s4", 4),
            // The row it repeats, and that row's sweep-mate: same columns, corrected.
            row("cfg690_c256", "", "s4-cfg", 4),
            row("cfg690_c512", "", "s4-cfg", 4),
            // Named and consistent: left alone.
            row("b_c256_tp2_0_ep2_0_2", "", "s2", 2),
            // No name and no link: read as recorded.
            row("cfg800_c64", "", "s4-other", 4),
        ];
        let widths = squared_rows(&rows);
        let two = Some(&RunWidth { cards: 2, ep: 2 });
        assert_eq!(widths.get("a_c256_tp2_ep2_1"), two);
        assert_eq!(widths.get("cfg690_c256"), two);
        assert_eq!(widths.get("cfg690_c512"), two);
        assert_eq!(widths.get("b_c256_tp2_0_ep2_0_2"), None);
        assert_eq!(widths.get("cfg800_c64"), None);
    }
}
