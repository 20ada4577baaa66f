//! Server-sent events, decoded incrementally from the bytes as they arrive.
//!
//! Written by hand rather than taken from a crate because timing needs byte-level control: each
//! event carries the instant of the read that brought its *first* byte, taken before any parsing,
//! so an event split over two reads is timed when it started to arrive, and several events in
//! one read share that read's instant. The framing follows the HTML living standard: lines end
//! in `\n`, `\r\n` or `\r`; a blank line dispatches; `data:` with or without a space, several
//! `data` lines joined by `\n`; `event:`, `id:`, `retry:`; lines starting with `:` are comments
//! (keep-alives); a UTF-8 BOM at the start is skipped; multi-byte characters may be split across
//! reads.

use std::time::Instant;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event type.
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
    /// When the read that brought this event's first byte completed.
    pub first_byte_at: Instant,
}

/// Incremental decoder: feed it reads, collect events.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous read ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    started: bool,
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
    /// When the current event's first byte arrived.
    first_byte_at: Option<Instant>,
    /// Comment lines seen (keep-alives).
    pub comments: u64,
    /// Lines that were not UTF-8 or not a known field.
    pub invalid_lines: u64,
}

impl SseDecoder {
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Decodes `bytes` (one read, completed at `at`), appending finished events to `out`.
    pub fn feed(&mut self, bytes: &[u8], at: Instant, out: &mut Vec<SseEvent>) {
        let mut bytes = bytes;
        if !self.started && !bytes.is_empty() {
            self.started = true;
            if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
                bytes = rest;
            }
        }
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            // A line's bytes are copied as one run, not byte by byte: this loop runs for every
            // byte a probe receives.
            let end = bytes
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap_or(bytes.len());
            if end > 0 {
                if self.line.is_empty() && self.first_byte_at.is_none() {
                    self.first_byte_at = Some(at);
                }
                self.line.extend_from_slice(&bytes[..end]);
            }
            let Some(&terminator) = bytes.get(end) else {
                break;
            };
            self.end_line(at, out);
            self.after_cr = terminator == b'\r';
            bytes = &bytes[end + 1..];
        }
    }

    /// Whether bytes of an unfinished event are pending (the stream ended mid-event if so).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.data.is_some()
    }

    /// At the end of the stream: an event without its closing blank line. Per the standard it
    /// is discarded; we return it so the caller can count a stream that was cut mid-event.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let at = self.first_byte_at.unwrap_or_else(Instant::now);
            let mut ignored = Vec::new();
            self.end_line(at, &mut ignored);
        }
        let data = self.data.take()?;
        Some(SseEvent {
            event: self.event.take(),
            data,
            id: self.id.take(),
            first_byte_at: self.first_byte_at.take().unwrap_or_else(Instant::now),
        })
    }

    fn end_line(&mut self, at: Instant, out: &mut Vec<SseEvent>) {
        if self.line.is_empty() {
            self.dispatch(out);
            return;
        }
        // Taken and put back (cleared) so the line buffer keeps its capacity.
        let mut line = std::mem::take(&mut self.line);
        self.field(&line, at);
        line.clear();
        self.line = line;
    }

    fn field(&mut self, line: &[u8], at: Instant) {
        let Ok(text) = std::str::from_utf8(line) else {
            self.invalid_lines += 1;
            return;
        };
        if self.first_byte_at.is_none() {
            self.first_byte_at = Some(at);
        }
        if text.starts_with(':') {
            self.comments += 1;
            // A comment alone is not an event: don't let it date the next one.
            if self.data.is_none() && self.event.is_none() {
                self.first_byte_at = None;
            }
            return;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = Some(value.to_string()),
            "id" => self.id = Some(value.to_string()),
            "retry" => {}
            _ => self.invalid_lines += 1,
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let first_byte_at = self.first_byte_at.take();
        let event = self.event.take();
        let id = self.id.take();
        if let (Some(data), Some(first_byte_at)) = (self.data.take(), first_byte_at) {
            out.push(SseEvent {
                event,
                data,
                id,
                first_byte_at,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    use std::time::Duration;

    fn decode_all(parts: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let t0 = Instant::now();
        for (i, part) in parts.iter().enumerate() {
            decoder.feed(part, t0 + Duration::from_millis(i as u64), &mut out);
        }
        out
    }

    fn datas(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    const STREAM: &str = "data: {\"a\":1}\n\ndata:{\"b\":2}\n\n: keep-alive\n\nevent: error\ndata: {\"error\":\"x\"}\n\ndata: line one\ndata: line two\n\nid: 7\ndata: [DONE]\n\n";

    #[test]
    fn frames_every_field_kind() {
        let events = decode_all(&[STREAM.as_bytes()]);
        assert_eq!(
            datas(&events),
            [
                "{\"a\":1}",
                "{\"b\":2}",
                "{\"error\":\"x\"}",
                "line one\nline two",
                "[DONE]"
            ]
        );
        assert_eq!(events[2].event.as_deref(), Some("error"));
        assert_eq!(events[4].id.as_deref(), Some("7"));
    }

    #[test]
    fn crlf_and_cr_line_endings() {
        let crlf = STREAM.replace('\n', "\r\n");
        let cr = STREAM.replace('\n', "\r");
        let expected = datas(&decode_all(&[STREAM.as_bytes()]))
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        for variant in [crlf, cr] {
            let events = decode_all(&[variant.as_bytes()]);
            assert_eq!(datas(&events), expected);
        }
    }

    #[test]
    fn byte_by_byte_and_random_splits_give_the_same_events() {
        let with_utf8 = format!("{STREAM}data: {{\"content\": \"héllo → 世界 🎉\"}}\n\n");
        let crlf = with_utf8.replace('\n', "\r\n");
        for text in [with_utf8.as_str(), crlf.as_str()] {
            let whole = decode_all(&[text.as_bytes()]);
            let bytes: Vec<&[u8]> = text.as_bytes().chunks(1).collect();
            assert_eq!(datas(&decode_all(&bytes)), datas(&whole), "byte by byte");
            let mut rng = StdRng::seed_from_u64(3);
            for _ in 0..200 {
                let mut parts = Vec::new();
                let mut rest = text.as_bytes();
                while !rest.is_empty() {
                    let n = rng.random_range(1..=rest.len().min(17));
                    parts.push(&rest[..n]);
                    rest = &rest[n..];
                }
                assert_eq!(datas(&decode_all(&parts)), datas(&whole));
            }
        }
    }

    #[test]
    fn an_event_is_timed_by_the_read_that_brought_its_first_byte() {
        let t0 = Instant::now();
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: {\"a\":", t0, &mut out);
        assert!(out.is_empty());
        decoder.feed(
            b"1}\n\ndata: x\n\n",
            t0 + Duration::from_millis(50),
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].first_byte_at, t0, "split event: its first read");
        assert_eq!(out[1].first_byte_at, t0 + Duration::from_millis(50));
    }

    #[test]
    fn keep_alive_comments_do_not_date_the_next_event() {
        let t0 = Instant::now();
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b": ping\n\n", t0, &mut out);
        decoder.feed(b"data: 1\n\n", t0 + Duration::from_secs(30), &mut out);
        assert_eq!(decoder.comments, 1);
        assert_eq!(out[0].first_byte_at, t0 + Duration::from_secs(30));
    }

    #[test]
    fn a_stream_cut_mid_event_is_visible() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: {\"a\":1}\n\ndata: {\"b\"", Instant::now(), &mut out);
        assert_eq!(out.len(), 1);
        assert!(decoder.has_partial());
        assert_eq!(decoder.finish().map(|e| e.data), Some("{\"b\"".to_string()));
    }

    #[test]
    fn bom_is_skipped_and_unknown_fields_counted() {
        let events = decode_all(&[b"\xEF\xBB\xBFdata: 1\n\nfoo: bar\ndata: 2\n\n"]);
        assert_eq!(datas(&events), ["1", "2"]);
    }
}
