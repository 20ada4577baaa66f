//! The knee of a batch-size sweep: the largest batch before latency per item jumps.
//!
//! Batching amortises fixed work (kernel launches, weight reads) over the items of a request,
//! so latency per item falls as the batch grows — until the device runs out of something
//! (cache, memory bandwidth, a kernel's tile size) and each item suddenly costs more. Past that
//! point a bigger batch buys nothing but latency; the report this grew from (an image
//! classifier on Paddle Serving, `paddle-p40-serving--batchsize-c1.csv`) shows per-item
//! latency falling to 11.9 ms at 40–46 images and stepping up to 12.8 ms at 48.
//!
//! A jump is judged against the lowest per-item latency seen so far, not the previous point,
//! so a slow creep is not a knee and one noisy point is not either: the point after the jump
//! must stay at least half the jump above that minimum.

use serde::Serialize;

/// One level of a sweep: items per request and the mean latency of a request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchPoint {
    pub batch: u32,
    pub latency_s: f64,
}

impl BatchPoint {
    pub fn per_item_s(&self) -> f64 {
        self.latency_s / f64::from(self.batch.max(1))
    }
}

/// What a sweep says about batch size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchKnee {
    /// The largest batch before per-item latency jumps; `None` when it never jumped.
    pub knee: Option<u32>,
    /// The first batch past the knee and how much more an item cost there than at the best
    /// batch so far (0.074 = 7.4 %).
    pub jumped_at: Option<u32>,
    pub jump: Option<f64>,
    /// Where an item was cheapest over the whole sweep.
    pub cheapest: u32,
    pub cheapest_per_item_s: f64,
    /// The threshold the jump was judged against.
    pub threshold: f64,
}

/// Finds the knee of `points` (any order; one per batch) with a jump threshold such as 0.05.
/// `None` without points.
pub fn find_knee(points: &[BatchPoint], threshold: f64) -> Option<BatchKnee> {
    let mut points: Vec<BatchPoint> = points
        .iter()
        .copied()
        .filter(|p| p.batch > 0 && p.latency_s.is_finite() && p.latency_s > 0.0)
        .collect();
    points.sort_by_key(|p| p.batch);
    let cheapest = points
        .iter()
        .min_by(|a, b| a.per_item_s().total_cmp(&b.per_item_s()))?;
    let mut found = BatchKnee {
        knee: None,
        jumped_at: None,
        jump: None,
        cheapest: cheapest.batch,
        cheapest_per_item_s: cheapest.per_item_s(),
        threshold,
    };
    let mut lowest = points[0].per_item_s();
    for i in 1..points.len() {
        let here = points[i].per_item_s();
        let rise = here / lowest - 1.0;
        let stays = points
            .get(i + 1)
            .is_none_or(|next| next.per_item_s() / lowest - 1.0 >= threshold / 2.0);
        if rise >= threshold && stays {
            found.knee = Some(points[i - 1].batch);
            found.jumped_at = Some(points[i].batch);
            found.jump = Some(rise);
            return Some(found);
        }
        lowest = lowest.min(here);
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(rows: &[(u32, f64)]) -> Vec<BatchPoint> {
        rows.iter()
            .map(|&(batch, ms)| BatchPoint {
                batch,
                latency_s: ms / 1e3,
            })
            .collect()
    }

    /// The published Paddle Serving sweep (concurrency 1, batch 1…200): per-item latency is
    /// lowest at 40–46 images and steps up 7 % at 48, where it stays.
    #[test]
    fn the_paddle_seed_knee_is_46() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/seeds/paddle-p40-serving--batchsize-c1.csv"
        ))
        .expect("the Paddle seed");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let headers = reader.headers().expect("header").clone();
        let at = |name: &str| headers.iter().position(|h| h == name).expect(name);
        let (batch, mean) = (at("batch_size"), at("latency_mean_ms"));
        let rows: Vec<(u32, f64)> = reader
            .records()
            .map(|row| {
                let row = row.expect("row");
                (
                    row[batch].parse().expect("batch"),
                    row[mean].parse().expect("latency"),
                )
            })
            .collect();
        let knee = find_knee(&points(&rows), 0.05).expect("points");
        assert_eq!(knee.knee, Some(46), "{knee:?}");
        assert_eq!(knee.jumped_at, Some(48));
        assert!((knee.jump.unwrap() - 0.075).abs() < 0.005, "{knee:?}");
        assert_eq!(knee.cheapest, 40);
    }

    #[test]
    fn a_creep_or_one_noisy_point_is_not_a_knee() {
        // Per item 10, 9, 8.8, 8.9 (creep), 9.3 (+5.7 % but the next falls back), 8.8.
        let rows = [
            (1, 10.0),
            (2, 18.0),
            (4, 35.2),
            (8, 71.2),
            (16, 148.8),
            (32, 281.6),
        ];
        let knee = find_knee(&points(&rows), 0.05).unwrap();
        assert_eq!(knee.knee, None, "{knee:?}");
        assert_eq!(knee.cheapest, 4);
        // A real step: from 8 items on each costs 30 % more.
        let rows = [(1, 10.0), (2, 16.0), (4, 28.0), (8, 72.8), (16, 145.6)];
        let knee = find_knee(&points(&rows), 0.05).unwrap();
        assert_eq!((knee.knee, knee.jumped_at), (Some(4), Some(8)));
        assert!(find_knee(&[], 0.05).is_none());
    }
}
