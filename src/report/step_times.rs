//! The step-time bases behind a plan's predicted rows, as one table: a basis a row, with the
//! cards that rest on it. A reader looking for their card scans one column instead of a
//! paragraph, and sees at once which cards have measured operator tables and which fall
//! back to the roofline (whose errors, `capplan validate` shows, are wider).

use super::Table;
use crate::plan::predicted::PredictionAssumptions;

/// Where the heading sends the reader for the step times: to the table when there is one.
/// A plan whose every row is measured or imported predicts nothing, and gets no table.
pub fn step_times_pointer(assumptions: &PredictionAssumptions) -> &'static str {
    if assumptions.step_times.is_empty() {
        "step times: none predicted"
    } else {
        "step times per card below"
    }
}

/// The table, or `None` when nothing was predicted.
pub fn step_time_table(assumptions: &PredictionAssumptions) -> Option<Table> {
    if assumptions.step_times.is_empty() {
        return None;
    }
    Some(Table {
        caption: Some("What the predicted rows' step times rest on, per card:".into()),
        headers: vec!["cards".into(), "step times".into()],
        rows: assumptions
            .step_times
            .iter()
            .map(|b| vec![b.cards.join(", "), b.basis.clone()])
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_without_tables_share_the_roofline_row() {
        let bases = [
            (
                "T4".to_string(),
                "roofline × efficiency (datasheet peaks): no measured operator timings".to_string(),
            ),
            (
                "H100-SXM".to_string(),
                "measured operator timings: h100_sxm under vllm".to_string(),
            ),
            (
                "L4".to_string(),
                "roofline × efficiency (datasheet peaks): no measured operator timings".to_string(),
            ),
        ];
        let assumptions = PredictionAssumptions::new("summary".into(), &bases);
        let table = step_time_table(&assumptions).expect("a table");
        assert_eq!(
            table.rows,
            vec![
                vec![
                    "T4, L4".to_string(),
                    "roofline × efficiency (datasheet peaks): no measured operator timings"
                        .to_string()
                ],
                vec![
                    "H100-SXM".to_string(),
                    "measured operator timings: h100_sxm under vllm".to_string()
                ],
            ]
        );
        assert_eq!(
            step_times_pointer(&assumptions),
            "step times per card below"
        );
        let nothing = PredictionAssumptions::new("summary".into(), &[]);
        assert!(step_time_table(&nothing).is_none());
        assert_eq!(step_times_pointer(&nothing), "step times: none predicted");
    }
}
