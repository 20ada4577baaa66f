//! HTTP/1.1 chunked transfer coding (RFC 9112 §7.1), decoded in place.
//!
//! The decoder never copies data: it walks the framing and hands back where each run of data
//! lies in the bytes it was given, so the reader can pass those bytes on with the instant of the
//! read that brought them. It keeps its state between calls, so a size line, a CRLF or the
//! trailers may be split anywhere across reads. A bare LF is accepted where CRLF is due (as
//! common servers and clients do); anything else malformed is an error, never guessed around.

use std::ops::Range;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ChunkedError {
    #[error("invalid chunk size line (byte {0:#04x})")]
    BadSize(u8),
    #[error("chunk size too large")]
    SizeTooLarge,
    #[error("chunk data not followed by CRLF (byte {0:#04x})")]
    MissingCrlf(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of the size; `digits` seen so far.
    Size {
        value: u64,
        digits: u8,
    },
    /// After the size: optional whitespace, then `;extension` up to the line end.
    Extension {
        value: u64,
    },
    /// A CR ended the size line; its LF is due.
    SizeLf {
        value: u64,
    },
    Data {
        left: u64,
    },
    /// After a chunk's data: CR (or a bare LF).
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer field line, up to its end.
    TrailerLine,
    /// A CR ended a trailer line (`final`: the empty one).
    TrailerLf {
        last: bool,
    },
    Done,
}

/// Incremental chunked decoder.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
}

impl Default for ChunkedDecoder {
    fn default() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size {
                value: 0,
                digits: 0,
            },
        }
    }
}

/// What one call to [`ChunkedDecoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes of the input used (framing and data).
    pub consumed: usize,
    /// Where data lies in the input, when some was reached.
    pub data: Option<Range<usize>>,
}

impl ChunkedDecoder {
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder::default()
    }

    /// Whether the last chunk and the trailers have been read: the body is complete.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Walks `input` up to the end of the first run of data (returned as a range of `input`)
    /// or to the end of `input`, whichever comes first. Call again with the rest.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, ChunkedError> {
        let mut at = 0;
        while at < input.len() {
            let byte = input[at];
            match self.state {
                State::Done => break,
                State::Data { left } => {
                    let take = (input.len() - at).min(left.try_into().unwrap_or(usize::MAX));
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { left }
                    };
                    return Ok(Decoded {
                        consumed: at + take,
                        data: Some(at..at + take),
                    });
                }
                State::Size { value, digits } => {
                    if let Some(digit) = (byte as char).to_digit(16) {
                        if digits >= 15 {
                            return Err(ChunkedError::SizeTooLarge);
                        }
                        self.state = State::Size {
                            value: value * 16 + u64::from(digit),
                            digits: digits + 1,
                        };
                    } else if digits == 0 {
                        return Err(ChunkedError::BadSize(byte));
                    } else {
                        self.state = State::Extension { value };
                        continue; // look at this byte again as part of the extension
                    }
                }
                State::Extension { value } => match byte {
                    b'\r' => self.state = State::SizeLf { value },
                    b'\n' => self.state = after_size(value),
                    // Whitespace and `;name=value` extensions are ignored; a control byte is
                    // not part of either.
                    b'\t' | b' '..=b'~' | 0x80..=0xff => {}
                    _ => return Err(ChunkedError::BadSize(byte)),
                },
                State::SizeLf { value } => {
                    if byte != b'\n' {
                        return Err(ChunkedError::BadSize(byte));
                    }
                    self.state = after_size(value);
                }
                State::DataCr => match byte {
                    b'\r' => self.state = State::DataLf,
                    b'\n' => {
                        self.state = State::Size {
                            value: 0,
                            digits: 0,
                        }
                    }
                    _ => return Err(ChunkedError::MissingCrlf(byte)),
                },
                State::DataLf => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf(byte));
                    }
                    self.state = State::Size {
                        value: 0,
                        digits: 0,
                    };
                }
                State::TrailerStart => match byte {
                    b'\r' => self.state = State::TrailerLf { last: true },
                    b'\n' => self.state = State::Done,
                    _ => self.state = State::TrailerLine,
                },
                State::TrailerLine => match byte {
                    b'\r' => self.state = State::TrailerLf { last: false },
                    b'\n' => self.state = State::TrailerStart,
                    _ => {}
                },
                State::TrailerLf { last } => {
                    if byte != b'\n' {
                        return Err(ChunkedError::MissingCrlf(byte));
                    }
                    self.state = if last {
                        State::Done
                    } else {
                        State::TrailerStart
                    };
                }
            }
            at += 1;
        }
        Ok(Decoded {
            consumed: at,
            data: None,
        })
    }
}

fn after_size(value: u64) -> State {
    if value == 0 {
        State::TrailerStart
    } else {
        State::Data { left: value }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Decodes `wire` fed in the given pieces; returns the data and whether it ended.
    fn decode_in(wire: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, bool, usize), ChunkedError> {
        let mut decoder = ChunkedDecoder::new();
        let mut data = Vec::new();
        let mut from = 0;
        let mut used = 0;
        for &to in cuts.iter().chain(std::iter::once(&wire.len())) {
            let mut piece = &wire[from..to];
            while !piece.is_empty() && !decoder.is_done() {
                let decoded = decoder.decode(piece)?;
                if let Some(range) = decoded.data {
                    data.extend_from_slice(&piece[range]);
                }
                used += decoded.consumed;
                piece = &piece[decoded.consumed..];
            }
            from = to;
        }
        Ok((data, decoder.is_done(), used))
    }

    const WIRE: &[u8] =
        b"5\r\nhello\r\n1a; name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\n";

    #[test]
    fn a_body_in_one_piece() {
        let (data, done, used) = decode_in(WIRE, &[]).unwrap();
        assert_eq!(data, b"helloabcdefghijklmnopqrstuvwxyz");
        assert!(done);
        assert_eq!(used, WIRE.len(), "nothing after the final CRLF is taken");
    }

    #[test]
    fn byte_by_byte_and_random_splits_give_the_same_data() {
        let every: Vec<usize> = (1..WIRE.len()).collect();
        assert_eq!(
            decode_in(WIRE, &every).unwrap(),
            decode_in(WIRE, &[]).unwrap()
        );
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..500 {
            let mut cuts: Vec<usize> = (0..rng.random_range(1..8))
                .map(|_| rng.random_range(0..WIRE.len()))
                .collect();
            cuts.sort_unstable();
            assert_eq!(
                decode_in(WIRE, &cuts).unwrap(),
                decode_in(WIRE, &[]).unwrap(),
                "{cuts:?}"
            );
        }
    }

    #[test]
    fn bytes_after_the_body_are_left_alone() {
        let mut wire = WIRE.to_vec();
        wire.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        let (_, done, used) = decode_in(&wire, &[]).unwrap();
        assert!(done);
        assert_eq!(used, WIRE.len());
    }

    #[test]
    fn bare_line_feeds_are_accepted() {
        let (data, done, _) = decode_in(b"3\nabc\n0\n\n", &[]).unwrap();
        assert_eq!((data.as_slice(), done), (&b"abc"[..], true));
    }

    #[test]
    fn a_cut_body_is_not_done() {
        let (data, done, _) = decode_in(&WIRE[..12], &[]).unwrap();
        assert_eq!((data.as_slice(), done), (&b"hello"[..], false));
    }

    #[test]
    fn malformed_framing_is_an_error() {
        assert_eq!(
            decode_in(b"zz\r\n", &[]).unwrap_err(),
            ChunkedError::BadSize(b'z')
        );
        assert_eq!(
            decode_in(b"3\r\nabcX", &[]).unwrap_err(),
            ChunkedError::MissingCrlf(b'X')
        );
        assert_eq!(
            decode_in(b"ffffffffffffffffff\r\n", &[]).unwrap_err(),
            ChunkedError::SizeTooLarge
        );
        assert!(decode_in(b"3\r\x01", &[]).is_err());
    }
}
