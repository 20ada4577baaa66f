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
//!
//! Events are pulled one at a time ([`SseDecoder::next_event`]) and lend their fields from the
//! decoder's own buffers, which keep their capacity: a probe decodes tens of thousands of events
//! a second, and an owned event per token (its `String`, the list it was pushed to) was memory
//! the client had to allocate, fill, free and fetch back into cache for every token.

use std::time::Instant;

/// One dispatched event, owned (see [`SseEventRef`] for the borrowed form the probe reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event type.
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
    /// When the read that brought this event's first byte completed.
    pub first_byte_at: Instant,
}

/// One dispatched event, lent by the decoder until it is asked for the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    pub event: Option<&'a str>,
    pub data: &'a str,
    pub id: Option<&'a str>,
    /// When the read that brought this event's first byte completed.
    pub first_byte_at: Instant,
}

impl SseEventRef<'_> {
    pub fn to_owned_event(&self) -> SseEvent {
        SseEvent {
            event: self.event.map(String::from),
            data: self.data.to_string(),
            id: self.id.map(String::from),
            first_byte_at: self.first_byte_at,
        }
    }
}

/// The UTF-8 byte-order mark a stream may start with.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Incremental decoder: give it reads, take events.
///
/// `repr(C)` so the fields every read touches come first and stay together (see the probe's
/// `StreamReader`, which holds one per stream).
#[derive(Debug, Default)]
#[repr(C)]
pub struct SseDecoder {
    /// The fields below belong to an event already handed out: cleared at the next call.
    handed_out: bool,
    /// The previous read ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    started: bool,
    /// Bytes of a leading byte-order mark matched so far, before the stream has started: a
    /// read may end inside it.
    bom_matched: u8,
    has_data: bool,
    /// When the current event's first byte arrived.
    first_byte_at: Option<Instant>,
    /// The current event's data lines, joined; meaningful only while `has_data`.
    data: String,
    /// Bytes of the current line when it started in an earlier read (a line that is whole
    /// within one read is parsed where it lies).
    line: Vec<u8>,
    event: Option<String>,
    id: Option<String>,
    /// Comment lines seen (keep-alives).
    pub comments: u64,
    /// Lines that were not UTF-8 or not a known field.
    pub invalid_lines: u64,
}

impl SseDecoder {
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Decodes from the front of `bytes` (one read, completed at `at`) up to the end of the
    /// next event and returns it, leaving `bytes` at what follows; `None` once `bytes` is used
    /// up without finishing an event (its start is kept for the next read). Call again with
    /// the rest of the same read until it returns `None`.
    ///
    /// An event whose one `data` line lies whole in this read lends that line where it lies,
    /// in the read's buffer, which the socket read just filled: copying it into a buffer of the
    /// decoder's own would bring that buffer's cache line back from memory on every token.
    pub fn next_event<'r, 'b: 'r>(
        &'r mut self,
        bytes: &mut &'b [u8],
        at: Instant,
    ) -> Option<SseEventRef<'r>> {
        if std::mem::take(&mut self.handed_out) {
            self.clear_event();
        }
        // A UTF-8 byte-order mark may open the stream (and is not content), split over reads
        // like anything else.
        while !self.started && !bytes.is_empty() {
            let matched = usize::from(self.bom_matched);
            if bytes[0] == BOM[matched] {
                *bytes = &bytes[1..];
                self.bom_matched += 1;
                if usize::from(self.bom_matched) == BOM.len() {
                    self.started = true;
                }
            } else {
                // Not a mark after all: what matched of it is the first line's start.
                self.started = true;
                if matched > 0 {
                    self.first_byte_at.get_or_insert(at);
                    self.line.extend_from_slice(&BOM[..matched]);
                }
            }
        }
        // The current event's data while it is one line of this read (then `data` is empty).
        let mut lent: Option<&'b str> = None;
        while !bytes.is_empty() {
            if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                *bytes = &bytes[1..];
                continue;
            }
            // Found as one run, not byte by byte: this loop runs for every byte a probe reads.
            let end = bytes
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap_or(bytes.len());
            let Some(&terminator) = bytes.get(end) else {
                // An unfinished line: kept until a later read ends it.
                if self.line.is_empty() && self.first_byte_at.is_none() {
                    self.first_byte_at = Some(at);
                }
                self.line.extend_from_slice(bytes);
                *bytes = &[];
                break;
            };
            let whole: &'b [u8] = &bytes[..end];
            self.after_cr = terminator == b'\r';
            *bytes = &bytes[end + 1..];
            if !self.line.is_empty() {
                // Taken and put back (cleared) so the line buffer keeps its capacity.
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(whole);
                if let Some(value) = self.field(&line, at) {
                    self.add_data(&mut lent, value);
                }
                line.clear();
                self.line = line;
            } else if !whole.is_empty() {
                if let Some(value) = self.field(whole, at) {
                    if self.has_data {
                        self.add_data(&mut lent, value);
                    } else {
                        lent = Some(value);
                        self.has_data = true;
                    }
                }
            } else if self.dispatch() {
                return Some(self.handed(lent));
            }
        }
        // The event goes on in a later read: what this one lent is copied before it goes.
        if let Some(lent) = lent {
            self.data.push_str(lent);
        }
        None
    }

    /// Appends a further data line to the current event's data (which stops being lent).
    fn add_data(&mut self, lent: &mut Option<&str>, value: &str) {
        if let Some(first) = lent.take() {
            self.data.push_str(first);
        }
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
    }

    /// Decodes all of `bytes` (one read, completed at `at`), appending finished events to
    /// `out` as owned values.
    pub fn feed(&mut self, bytes: &[u8], at: Instant, out: &mut Vec<SseEvent>) {
        let mut rest = bytes;
        while let Some(event) = self.next_event(&mut rest, at) {
            out.push(event.to_owned_event());
        }
    }

    /// Whether bytes of an unfinished event are pending (the stream ended mid-event if so).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || (self.has_data && !self.handed_out)
    }

    /// At the end of the stream: an event without its closing blank line. Per the standard it
    /// is discarded; we return it so the caller can count a stream that was cut mid-event.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if std::mem::take(&mut self.handed_out) {
            self.clear_event();
        }
        if !self.line.is_empty() {
            let at = self.first_byte_at.unwrap_or_else(Instant::now);
            let line = std::mem::take(&mut self.line);
            if let Some(value) = self.field(&line, at) {
                self.add_data(&mut None, value);
            }
        }
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.id.take(),
            first_byte_at: self.first_byte_at.take().unwrap_or_else(Instant::now),
        })
    }

    fn clear_event(&mut self) {
        self.event = None;
        self.id = None;
        self.data.clear();
        self.has_data = false;
    }

    /// Reads one non-blank line; a `data` line's value is returned for the caller to add.
    fn field<'l>(&mut self, line: &'l [u8], at: Instant) -> Option<&'l str> {
        let Ok(text) = std::str::from_utf8(line) else {
            self.invalid_lines += 1;
            return None;
        };
        if self.first_byte_at.is_none() {
            self.first_byte_at = Some(at);
        }
        if text.starts_with(':') {
            self.comments += 1;
            // A comment alone is not an event: don't let it date the next one.
            if !self.has_data && self.event.is_none() {
                self.first_byte_at = None;
            }
            return None;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "data" => return Some(value),
            "event" => self.event = Some(value.to_string()),
            "id" => self.id = Some(value.to_string()),
            "retry" => {}
            _ => self.invalid_lines += 1,
        }
        None
    }

    /// A blank line: whether it completes an event to hand out (one with data); a blank line
    /// after fields without data ends them without an event.
    fn dispatch(&mut self) -> bool {
        let dated = self.first_byte_at.is_some();
        if self.has_data && dated {
            self.handed_out = true;
            return true;
        }
        self.first_byte_at = None;
        self.clear_event();
        false
    }

    /// The event [`Self::dispatch`] completed, lent until the next call; its data is `lent`
    /// where that is set.
    fn handed<'a>(&'a mut self, lent: Option<&'a str>) -> SseEventRef<'a> {
        let first_byte_at = self.first_byte_at.take().unwrap_or_else(Instant::now);
        SseEventRef {
            event: self.event.as_deref(),
            data: lent.unwrap_or(&self.data),
            id: self.id.as_deref(),
            first_byte_at,
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

    #[test]
    fn a_bom_split_across_reads_is_still_skipped() {
        // Found by tests/fuzz_parsers.rs: a read ending inside the mark lost the first event.
        let stream = b"\xEF\xBB\xBFdata: 1\n\n";
        for cut in 0..=stream.len() {
            let events = decode_all(&[&stream[..cut], &stream[cut..]]);
            assert_eq!(datas(&events), ["1"], "cut at {cut}");
        }
        // Bytes that only start like a mark are the first line's.
        let events = decode_all(&[b"\xEF", b"data: 1\n\ndata: 2\n\n"]);
        assert_eq!(datas(&events), ["2"]);
    }

    #[test]
    fn pulled_events_are_lent_one_at_a_time_and_match_the_owned_ones() {
        let t0 = Instant::now();
        let mut owned = Vec::new();
        SseDecoder::new().feed(STREAM.as_bytes(), t0, &mut owned);
        let mut decoder = SseDecoder::new();
        let mut rest = STREAM.as_bytes();
        let mut pulled = Vec::new();
        while let Some(event) = decoder.next_event(&mut rest, t0) {
            pulled.push(event.to_owned_event());
            // A handed-out event is finished: nothing of it is pending.
            assert!(!decoder.has_partial());
        }
        assert!(rest.is_empty());
        assert_eq!(pulled, owned);
        assert_eq!(pulled.len(), 5);

        // The rest of a read stays where the event ended; an unfinished tail is pending.
        let mut decoder = SseDecoder::new();
        let mut rest: &[u8] = b"data: 1\n\ndata: 2\n\ndata: 3";
        assert_eq!(decoder.next_event(&mut rest, t0).map(|e| e.data), Some("1"));
        assert_eq!(rest, b"data: 2\n\ndata: 3");
        assert_eq!(decoder.next_event(&mut rest, t0).map(|e| e.data), Some("2"));
        assert!(!decoder.has_partial());
        assert_eq!(decoder.next_event(&mut rest, t0), None);
        assert!(decoder.has_partial());
        assert_eq!(decoder.finish().map(|e| e.data), Some("3".to_string()));
    }

    #[test]
    fn a_whole_data_line_is_lent_from_the_read_and_anything_else_is_copied() {
        let t0 = Instant::now();
        let mut decoder = SseDecoder::new();
        let read: &[u8] = b"data: {\"a\":1}\n\n";
        let mut rest = read;
        let event = decoder.next_event(&mut rest, t0).unwrap();
        assert_eq!(event.data, "{\"a\":1}");
        let lent = read.as_ptr_range();
        assert!(lent.contains(&event.data.as_ptr()), "lent from the read");

        // Two data lines, and one split across reads, come joined from the decoder's copy.
        let mut rest: &[u8] = b"data: one\ndata: two\n\ndata: sp";
        assert_eq!(decoder.next_event(&mut rest, t0).unwrap().data, "one\ntwo");
        assert!(decoder.next_event(&mut rest, t0).is_none());
        let mut rest: &[u8] = b"lit\n";
        assert!(decoder.next_event(&mut rest, t0).is_none());
        let mut rest: &[u8] = b"data: more\n\n";
        assert_eq!(
            decoder.next_event(&mut rest, t0).unwrap().data,
            "split\nmore"
        );
        // A data line lent, then the event left open at the end of the read: kept.
        let mut rest: &[u8] = b"data: kept\n";
        assert!(decoder.next_event(&mut rest, t0).is_none());
        assert!(decoder.has_partial());
        let mut rest: &[u8] = b"\n";
        assert_eq!(decoder.next_event(&mut rest, t0).unwrap().data, "kept");
    }
}
