//! A lean HTTP/1.1 client for plain `http://` endpoints, written for the probe's one job.
//!
//! Why not hyper through reqwest, as for HTTPS: a token stream arrives as one small TCP segment
//! per token, and at hundreds of streams the client's CPU per segment is what limits how many
//! streams one machine can time honestly. Through reqwest each segment woke hyper's connection
//! task, went through its body channel into a second task, and was allocated and freed on the
//! way: about three times the CPU of reading the socket. Here the task that sends the request
//! reads its own socket: each read is timed the moment it returns, and the chunked framing is
//! walked in place ([`super::chunked`]), so the bytes go to the SSE decoder without a copy.
//!
//! What it does: keep-alive connections in a LIFO pool (one per concurrent user at most),
//! `Content-Length`, chunked and close-delimited bodies, interim 1xx responses skipped, a
//! connection kept only when its response was read to the end with nothing left over. What it
//! leaves to reqwest: TLS, proxies, redirects, compression — the probe needs none of them on
//! plain HTTP, and an endpoint behind a proxy is sent through reqwest (see [`super::Transport`]).

use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::SendError;

/// Read buffer per connection: a token event is ~100–300 bytes, a whole response may be larger
/// (it is gathered elsewhere; this only bounds one read). It also bounds a response head: one
/// that does not fit fails in [`Connection::fill`].
const READ_BUFFER: usize = 16 * 1024;
const MAX_HEADERS: usize = 100;

/// One plain-HTTP origin (`host:port`) and its idle connections.
pub struct Http1Client {
    host: String,
    port: u16,
    /// The `Host` header: the URL's authority as typed.
    authority: String,
    connect_timeout: Duration,
    idle: Arc<Pool>,
}

struct Pool {
    connections: Mutex<Vec<Connection>>,
    max_idle: usize,
}

impl Pool {
    fn take(&self) -> Option<Connection> {
        self.connections.lock().ok()?.pop()
    }

    fn put(&self, connection: Connection) {
        if let Ok(mut idle) = self.connections.lock() {
            if idle.len() < self.max_idle {
                idle.push(connection);
            }
        }
    }
}

struct Connection {
    stream: TcpStream,
    buffer: Box<[u8]>,
    /// Unread bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
}

impl Connection {
    fn new(stream: TcpStream) -> Connection {
        Connection {
            stream,
            buffer: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Reads more bytes after those buffered; returns how many (0: the peer closed) and when
    /// the read returned.
    async fn fill(&mut self) -> std::io::Result<(usize, Instant)> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// Poll form of [`Self::fill`]: the read is timed the moment it returns.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<(usize, Instant)>> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buffer.len() {
            // Only framing or a head can be pending here (data is handed out as it arrives).
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buffer.len() {
            return Poll::Ready(Err(std::io::Error::other(
                "a response line is longer than the buffer",
            )));
        }
        let mut free = ReadBuf::new(&mut self.buffer[self.end..]);
        ready!(Pin::new(&mut self.stream).poll_read(cx, &mut free))?;
        let at = Instant::now();
        let read = free.filled().len();
        self.end += read;
        Poll::Ready(Ok((read, at)))
    }
}

impl Http1Client {
    /// A client for `url`'s origin; `url` must be `http://`.
    pub fn new(url: &reqwest::Url, connect_timeout: Duration, max_idle: usize) -> Option<Self> {
        if url.scheme() != "http" {
            return None;
        }
        let host = url
            .host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str()?),
            None => url.host_str()?.to_string(),
        };
        Some(Http1Client {
            host: host.to_string(),
            port,
            authority,
            connect_timeout,
            idle: Arc::new(Pool {
                connections: Mutex::new(Vec::new()),
                max_idle: max_idle.max(1),
            }),
        })
    }

    /// Host, port and the `Host` header it sends.
    pub fn origin(&self) -> (String, u16, String) {
        (self.host.clone(), self.port, self.authority.clone())
    }

    async fn connect(&self) -> Result<Connection, SendError> {
        let connecting = TcpStream::connect((self.host.as_str(), self.port));
        let stream = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Err(_) => return Err(SendError::Failed("cannot connect: timed out".into())),
            Ok(Err(err)) => return Err(SendError::Failed(format!("cannot connect: {err}"))),
            Ok(Ok(stream)) => stream,
        };
        // Each request is one write; without this a short body could wait for an ACK.
        let _ = stream.set_nodelay(true);
        Ok(Connection::new(stream))
    }

    /// Sends `POST target` with a JSON `body` and reads the response head. `authorization` is
    /// the whole header value; it is written to the socket and nowhere else.
    pub async fn post(
        &self,
        target: &str,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<Http1Response, SendError> {
        let (mut connection, reused) = match self.idle.take() {
            Some(connection) => (connection, true),
            None => (self.connect().await?, false),
        };
        let mut request = Vec::with_capacity(256 + body.len());
        request.extend_from_slice(b"POST ");
        request.extend_from_slice(target.as_bytes());
        request.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        request.extend_from_slice(self.authority.as_bytes());
        request.extend_from_slice(b"\r\nUser-Agent: capplan/");
        request.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        request.extend_from_slice(b"\r\nAccept: */*\r\nContent-Type: application/json\r\n");
        if let Some(value) = authorization {
            request.extend_from_slice(b"Authorization: ");
            request.extend_from_slice(value.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        request.extend_from_slice(body);
        if let Err(err) = connection.stream.write_all(&request).await {
            return Err(if reused {
                SendError::Stale
            } else {
                SendError::Failed(format!("request failed: {err}"))
            });
        }
        read_head(connection, reused, self.idle.clone()).await
    }
}

/// Reads the response head (skipping interim 1xx responses) and sets up its body.
async fn read_head(
    mut connection: Connection,
    reused: bool,
    pool: Arc<Pool>,
) -> Result<Http1Response, SendError> {
    let mut received_any = false;
    let mut at = Instant::now();
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut slots);
        let pending = &connection.buffer[connection.start..connection.end];
        let head_len = match parsed.parse(pending) {
            Ok(httparse::Status::Complete(len)) => Some(len),
            Ok(httparse::Status::Partial) => None,
            Err(err) => return Err(SendError::Failed(format!("invalid HTTP response: {err}"))),
        };
        let Some(head_len) = head_len else {
            match connection.fill().await {
                Ok((0, _)) if reused && !received_any => return Err(SendError::Stale),
                Ok((0, _)) => {
                    return Err(SendError::Failed(
                        "request failed: connection closed before a response".into(),
                    ))
                }
                Ok((_, read_at)) => {
                    received_any = true;
                    at = read_at;
                }
                Err(_) if reused && !received_any => return Err(SendError::Stale),
                Err(err) => return Err(SendError::Failed(format!("request failed: {err}"))),
            }
            continue;
        };
        let status = parsed.code.unwrap_or(0);
        let version = parsed.version.unwrap_or(1);
        let mut headers = HeaderMap::with_capacity(parsed.headers.len());
        for header in parsed.headers.iter() {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(header.name.as_bytes()),
                HeaderValue::from_bytes(header.value),
            ) {
                headers.append(name, value);
            }
        }
        connection.start += head_len;
        if (100..200).contains(&status) {
            continue; // 100 Continue, 103 Early Hints: the real response follows
        }
        let framing = framing(status, &headers).map_err(SendError::Failed)?;
        let keep_alive = keeps_alive(version, &headers) && !matches!(framing, Framing::Close);
        return Ok(Http1Response {
            status,
            headers,
            body: Http1Body {
                connection: Some(connection),
                framing,
                keep_alive,
                complete: false,
                at,
                handed: 0..0,
                pool,
            },
        });
    }
}

/// How the body's end is known.
#[derive(Debug)]
enum Framing {
    Length {
        left: u64,
    },
    Chunked(ChunkedDecoder),
    /// Until the server closes the connection.
    Close,
}

fn framing(status: u16, headers: &HeaderMap) -> Result<Framing, String> {
    if status == 204 || status == 304 {
        return Ok(Framing::Length { left: 0 });
    }
    let codings: Vec<&str> = headers
        .get_all(reqwest::header::TRANSFER_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    if let Some(last) = codings.last() {
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked(ChunkedDecoder::new())
        } else {
            Framing::Close
        });
    }
    match headers.get(reqwest::header::CONTENT_LENGTH) {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|left| Framing::Length { left })
            .ok_or_else(|| "invalid HTTP response: bad Content-Length".to_string()),
        None => Ok(Framing::Close),
    }
}

fn keeps_alive(version: u8, headers: &HeaderMap) -> bool {
    let says = |word: &str| {
        headers
            .get_all(reqwest::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(word))
    };
    if version >= 1 {
        !says("close")
    } else {
        says("keep-alive")
    }
}

/// A response whose head has been read.
pub struct Http1Response {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Http1Body,
}

/// The body of a response, read as it arrives. Dropped after its last byte, it gives its
/// connection back for the next request; dropped earlier, the connection is closed.
///
/// `repr(C)`, aligned to a cache line, the fields each read touches first: read once per
/// token on every stream, its cost is mostly the cache lines it brings back (see the probe's
/// `StreamReader`).
#[repr(C, align(64))]
pub struct Http1Body {
    complete: bool,
    keep_alive: bool,
    /// When the read that brought the pending bytes returned.
    at: Instant,
    /// The bytes last handed out, in the connection's buffer.
    handed: Range<usize>,
    framing: Framing,
    connection: Option<Connection>,
    pool: Arc<Pool>,
}

/// Why a body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("connection broke while reading: {0}")]
    Io(#[from] std::io::Error),
    #[error("connection broke while reading: the server closed it before the body's end")]
    Cut,
    #[error("invalid chunked body: {0}")]
    Chunked(#[from] ChunkedError),
}

impl Http1Body {
    /// The next bytes of the body: `Ready(Ok(Some(at)))` when new bytes are in
    /// [`Self::handed`], `at` being when the read that brought them returned; `Ok(None)` at the
    /// body's end. Nothing read is lost when the caller stops polling. A probe reads its
    /// streams through this one function, with no future of its own to keep: it runs once per
    /// token on every stream.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Instant>, BodyError>> {
        loop {
            if self.complete {
                return Poll::Ready(Ok(None));
            }
            let Some(connection) = self.connection.as_mut() else {
                return Poll::Ready(Ok(None));
            };
            let pending = connection.end - connection.start;
            if pending > 0 {
                let from = connection.start;
                let found = match &mut self.framing {
                    Framing::Length { left } => {
                        let take = pending.min((*left).try_into().unwrap_or(usize::MAX));
                        *left -= take as u64;
                        self.complete = *left == 0;
                        connection.start += take;
                        (take > 0).then_some(from..from + take)
                    }
                    Framing::Close => {
                        connection.start = connection.end;
                        Some(from..connection.end)
                    }
                    Framing::Chunked(decoder) => {
                        let decoded = decoder.decode(&connection.buffer[from..connection.end])?;
                        connection.start += decoded.consumed;
                        self.complete = decoder.is_done();
                        decoded.data.map(|r| from + r.start..from + r.end)
                    }
                };
                if let Some(range) = found.filter(|r| !r.is_empty()) {
                    self.handed = range;
                    return Poll::Ready(Ok(Some(self.at)));
                }
                continue;
            }
            if let Framing::Length { left: 0 } = self.framing {
                self.complete = true;
                continue;
            }
            let (read, at) = ready!(connection.poll_fill(cx))?;
            if read == 0 {
                // The peer closed: the end of a close-delimited body, else a cut one.
                self.connection = None;
                return Poll::Ready(match self.framing {
                    Framing::Close => Ok(None),
                    _ => Err(BodyError::Cut),
                });
            }
            self.at = at;
        }
    }

    /// The bytes the last [`Self::poll_next`] handed out.
    pub fn handed(&self) -> &[u8] {
        match &self.connection {
            Some(connection) => connection.buffer.get(self.handed.clone()).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl Drop for Http1Body {
    fn drop(&mut self) {
        let reusable = self.complete && self.keep_alive;
        if let (true, Some(connection)) = (reusable, self.connection.take()) {
            // Bytes beyond the response would be read as the next one's: not reusable.
            if connection.start == connection.end {
                self.pool.put(connection);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let chunked = map(&[("transfer-encoding", "gzip, chunked")]);
        assert!(matches!(framing(200, &chunked), Ok(Framing::Chunked(_))));
        let both = map(&[("transfer-encoding", "chunked"), ("content-length", "5")]);
        assert!(matches!(framing(200, &both), Ok(Framing::Chunked(_))));
        let not_last = map(&[("transfer-encoding", "chunked, gzip")]);
        assert!(matches!(framing(200, &not_last), Ok(Framing::Close)));
        let length = map(&[("content-length", "12")]);
        assert!(matches!(
            framing(200, &length),
            Ok(Framing::Length { left: 12 })
        ));
        assert!(framing(200, &map(&[("content-length", "x")])).is_err());
        assert!(matches!(
            framing(204, &chunked),
            Ok(Framing::Length { left: 0 })
        ));
        assert!(matches!(
            framing(200, &HeaderMap::new()),
            Ok(Framing::Close)
        ));
    }

    #[test]
    fn keep_alive_by_version_and_connection_header() {
        assert!(keeps_alive(1, &HeaderMap::new()));
        assert!(!keeps_alive(1, &map(&[("connection", "Close")])));
        assert!(!keeps_alive(0, &HeaderMap::new()));
        assert!(keeps_alive(0, &map(&[("connection", "keep-alive")])));
    }
}
