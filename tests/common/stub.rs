//! A scripted HTTP/1.1 server on 127.0.0.1 that writes exactly the bytes a test asks for, when it
//! asks: the way to show the probe every stream a real server can send (several tokens per
//! chunk, keep-alives, an error inside a 200 stream, a reset, silence, a stream that stays open
//! after `[DONE]`). axum would frame the bytes itself; here the test owns every byte and pause.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One thing the server does in its answer.
#[derive(Debug, Clone)]
pub enum Act {
    /// Write these bytes (and flush).
    Bytes(Vec<u8>),
    /// Pause.
    Wait(Duration),
    /// Pause until this long after the request was read (a schedule that does not drift).
    At(Duration),
    /// Cut the connection with a TCP reset.
    Reset,
    /// Close the connection cleanly.
    Close,
    /// Keep the connection open and silent until the client goes away.
    Hang,
}

/// What the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Requests on this server so far, counting from 0.
    pub n: u64,
    /// The connection it came on: connections accepted before it, counting from 0.
    pub connection: u64,
    pub head: String,
    pub body: String,
    /// When the whole request had been read.
    pub at: Instant,
}

pub type Script = Arc<dyn Fn(&Received) -> Vec<Act> + Send + Sync>;

/// How late the server's scheduled writes ([`Act::At`]) went out: the server's own error, to
/// tell apart from the client's. The first scheduled write of each request (its first token,
/// in a streaming script) is kept apart from all of them.
#[derive(Debug, Default)]
pub struct Lateness {
    inner: Mutex<[Late; 2]>,
}

/// Count, sum and worst of lateness, seconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Late {
    pub writes: u64,
    pub sum_s: f64,
    pub max_s: f64,
}

impl Late {
    fn add(&mut self, late_s: f64) {
        self.writes += 1;
        self.sum_s += late_s;
        self.max_s = self.max_s.max(late_s);
    }

    pub fn mean_s(&self) -> f64 {
        if self.writes > 0 {
            self.sum_s / self.writes as f64
        } else {
            0.0
        }
    }
}

impl Lateness {
    fn add(&self, late_s: f64, first: bool) {
        if let Ok(mut inner) = self.inner.lock() {
            inner[1].add(late_s);
            if first {
                inner[0].add(late_s);
            }
        }
    }

    /// (first scheduled write of each request, every scheduled write) since the last call;
    /// resets.
    pub fn take(&self) -> (Late, Late) {
        match self.inner.lock() {
            Ok(mut inner) => {
                let [first, all] = std::mem::take(&mut *inner);
                (first, all)
            }
            Err(_) => Default::default(),
        }
    }
}

/// Starts the server; returns its base URL (`http://127.0.0.1:PORT`). It lives as long as the
/// runtime it was started in.
pub async fn start(script: Script) -> String {
    start_with(script, Arc::new(Lateness::default())).await
}

/// [`start`], recording the lateness of scheduled writes into `lateness`.
pub async fn start_with(script: Script, lateness: Arc<Lateness>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let counter = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        let mut accepted = 0;
        while let Ok((socket, _)) = listener.accept().await {
            accepted += 1;
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(
                socket,
                accepted - 1,
                script.clone(),
                counter.clone(),
                lateness.clone(),
            ));
        }
    });
    url
}

async fn connection(
    mut socket: TcpStream,
    index: u64,
    script: Script,
    counter: Arc<AtomicU64>,
    lateness: Arc<Lateness>,
) {
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut socket, &mut buffer).await else {
            return;
        };
        let received = Received {
            n: counter.fetch_add(1, Ordering::Relaxed),
            connection: index,
            head,
            body,
            at: Instant::now(),
        };
        let mut first_scheduled = true;
        for act in script(&received) {
            match act {
                Act::Bytes(bytes) => {
                    if socket.write_all(&bytes).await.is_err() || socket.flush().await.is_err() {
                        return;
                    }
                }
                Act::Wait(pause) => tokio::time::sleep(pause).await,
                Act::At(offset) => {
                    let due = received.at + offset;
                    tokio::time::sleep_until(due.into()).await;
                    let late = Instant::now().saturating_duration_since(due).as_secs_f64();
                    lateness.add(late, std::mem::take(&mut first_scheduled));
                }
                Act::Reset => {
                    // Linger 0 makes the close a reset; with a zero timeout, closing never blocks.
                    #[allow(deprecated)]
                    let _ = socket.set_linger(Some(Duration::ZERO));
                    return;
                }
                Act::Close => {
                    let _ = socket.shutdown().await;
                    return;
                }
                Act::Hang => {
                    let mut sink = [0u8; 1024];
                    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                    return;
                }
            }
        }
    }
}

/// Reads one request (head and a `Content-Length` body); `None` when the client closed.
async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, String)> {
    let mut read = [0u8; 8192];
    loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            let total = end + 4 + length;
            while buffer.len() < total {
                let n = socket.read(&mut read).await.ok()?;
                if n == 0 {
                    return None;
                }
                buffer.extend_from_slice(&read[..n]);
            }
            let body = String::from_utf8_lossy(&buffer[end + 4..total]).into_owned();
            buffer.drain(..total);
            return Some((head, body));
        }
        let n = socket.read(&mut read).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&read[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The head of a chunked response with this status and content type.
pub fn head(status: u16, content_type: &str) -> Act {
    Act::Bytes(
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        .into_bytes(),
    )
}

/// The head of a streaming (`text/event-stream`) 200 response.
pub fn sse_head() -> Act {
    head(200, "text/event-stream")
}

/// One HTTP chunk carrying `text`.
pub fn chunk(text: &str) -> Act {
    Act::Bytes(format!("{:x}\r\n{text}\r\n", text.len()).into_bytes())
}

/// One SSE event `data: <data>` in its own HTTP chunk.
pub fn event(data: &str) -> Act {
    chunk(&format!("data: {data}\n\n"))
}

/// A chat chunk carrying `content`.
pub fn content(text: &str) -> Act {
    event(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":{}}}}}]}}"#,
        serde_json::Value::from(text)
    ))
}

/// The usage-only chunk (`choices: []`).
pub fn usage(prompt: u32, completion: u32) -> Act {
    event(&format!(
        r#"{{"choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion}}}}}"#
    ))
}

pub fn done() -> Act {
    event("[DONE]")
}

/// The last HTTP chunk: the body ends cleanly.
pub fn end() -> Act {
    Act::Bytes(b"0\r\n\r\n".to_vec())
}

/// A whole response with a `Content-Length` body.
pub fn whole(status: u16, content_type: &str, body: &str) -> Act {
    Act::Bytes(
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// A whole response with a `Content-Length` body and extra headers (`name: value` lines).
pub fn whole_with(status: u16, content_type: &str, headers: &[(&str, &str)], body: &str) -> Act {
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    Act::Bytes(
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

pub fn wait_ms(ms: u64) -> Act {
    Act::Wait(Duration::from_millis(ms))
}
