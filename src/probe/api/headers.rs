//! Timing headers some servers put on a response: TGI's `/generate` (`x-queue-time`,
//! `x-inference-time`, `x-time-per-token`, `x-total-time`, `x-validation-time` in whole
//! milliseconds, `x-prompt-tokens`, `x-generated-tokens`) and servers that copied them, some
//! adding `x-prefill-time` and `x-decode-time`. Read whatever API answered: the names say
//! what they are.

use reqwest::header::HeaderMap;

use super::ServerTimings;

/// The timings in `headers`, or `None` when there are none. Values are milliseconds (decimals
/// allowed); a value with an `s` or `ms` suffix is read in that unit.
pub fn timings_from_headers(headers: &HeaderMap) -> Option<ServerTimings> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let seconds = |name: &str| text(name).and_then(read_ms);
    let tokens = |name: &str| text(name).and_then(|v| v.trim().parse::<u32>().ok());
    let timings = ServerTimings {
        prompt_tokens: tokens("x-prompt-tokens"),
        prefill_s: seconds("x-prefill-time"),
        decode_tokens: tokens("x-generated-tokens"),
        decode_s: seconds("x-decode-time"),
        queue_s: seconds("x-queue-time"),
        inference_s: seconds("x-inference-time"),
        time_per_token_s: seconds("x-time-per-token"),
        total_s: seconds("x-total-time"),
    };
    (timings != ServerTimings::default()).then_some(timings)
}

/// `12`, `12.5`, `12ms` → seconds; `0.012s` → seconds.
fn read_ms(value: &str) -> Option<f64> {
    let value = value.trim();
    // Dividing (not multiplying by 1e-3) keeps 118 ms exactly 0.118 s.
    let (number, per_second) = if let Some(ms) = value.strip_suffix("ms") {
        (ms, 1e3)
    } else if let Some(s) = value.strip_suffix('s') {
        (s, 1.0)
    } else {
        (value, 1e3)
    };
    let number: f64 = number.trim().parse().ok()?;
    (number.is_finite() && number >= 0.0).then_some(number / per_second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        map
    }

    #[test]
    fn tgi_headers_are_milliseconds() {
        let t = timings_from_headers(&headers(&[
            ("x-queue-time", "120"),
            ("x-inference-time", "2300"),
            ("x-time-per-token", "23"),
            ("x-total-time", "2431"),
            ("x-prompt-tokens", "512"),
            ("x-generated-tokens", "100"),
            ("x-compute-time", "2.431"),
        ]))
        .unwrap();
        assert_eq!(t.queue_s, Some(0.12));
        assert_eq!(t.inference_s, Some(2.3));
        assert_eq!(t.time_per_token_s, Some(0.023));
        assert_eq!(t.total_s, Some(2.431));
        assert_eq!((t.prompt_tokens, t.decode_tokens), (Some(512), Some(100)));
        assert_eq!(t.compute_s(), Some(2.3));
    }

    #[test]
    fn prefill_and_decode_headers_with_units() {
        let t = timings_from_headers(&headers(&[
            ("x-prefill-time", "0.25s"),
            ("x-decode-time", "1500ms"),
        ]))
        .unwrap();
        assert_eq!((t.prefill_s, t.decode_s), (Some(0.25), Some(1.5)));
        assert_eq!(t.compute_s(), Some(1.75));
    }

    #[test]
    fn no_or_unreadable_headers_give_none() {
        assert_eq!(timings_from_headers(&headers(&[])), None);
        assert_eq!(
            timings_from_headers(&headers(&[
                ("x-queue-time", "soon"),
                ("x-total-time", "-3")
            ])),
            None
        );
    }
}
