//! How a request reaches the server and its response comes back, byte by byte.
//!
//! Two transports behind one [`Response`]: plain `http://` goes through the probe's own lean
//! HTTP/1.1 client ([`http1`]), which reads each socket from the task that awaits it and times
//! every read as it returns; HTTPS, and any endpoint a proxy variable applies to, goes through
//! reqwest ([`library`]). The code that times streams ([`super::client`]) sees only bytes and
//! the instants they arrived.

pub mod chunked;
pub mod http1;
mod library;

use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;

use http1::{Http1Body, Http1Client};

/// Why a request got no response head.
#[derive(Debug)]
pub enum SendError {
    /// A kept-alive connection the server had closed: the request never reached it, so it may
    /// be sent again on a new connection.
    Stale,
    /// Anything else, described without the URL or headers (no secret can be in it).
    Failed(String),
}

/// The connection side of an [`super::client::Endpoint`].
pub enum Transport {
    Direct(Http1Client),
    Library(reqwest::Client),
}

/// Environment variables that send requests through a proxy (reqwest honours them, with
/// `NO_PROXY`; the direct client does not, so it steps aside when one is set).
const PROXY_VARIABLES: [&str; 4] = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"];

impl Transport {
    /// The direct client for a plain-HTTP `base` without a proxy in the environment, else
    /// `library`.
    pub fn for_base(
        base: &str,
        library: reqwest::Client,
        connect_timeout: Duration,
        pool: usize,
    ) -> Transport {
        let proxied = PROXY_VARIABLES
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        match direct_for(base, proxied, connect_timeout, pool) {
            Some(direct) => Transport::Direct(direct),
            None => Transport::Library(library),
        }
    }

    /// POSTs the JSON `body` to `url` (which must be on the base's origin for the direct
    /// client) and returns once the response head has arrived.
    pub async fn post(
        &self,
        url: &str,
        body: String,
        api_key: Option<&str>,
    ) -> Result<Response, SendError> {
        match self {
            Transport::Direct(client) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|err| SendError::Failed(format!("invalid URL: {err}")))?;
                let target = match parsed.query() {
                    Some(query) => format!("{}?{query}", parsed.path()),
                    None => parsed.path().to_string(),
                };
                let authorization = api_key.map(|key| format!("Bearer {key}"));
                let response = client
                    .post(&target, body.as_bytes(), authorization.as_deref())
                    .await?;
                Ok(Response {
                    status: response.status,
                    headers: response.headers,
                    body: Body::Direct(response.body),
                })
            }
            Transport::Library(client) => library::post(client, url, body, api_key).await,
        }
    }
}

/// The direct client for `base`, unless it is not plain HTTP or a proxy is configured.
fn direct_for(
    base: &str,
    proxied: bool,
    connect_timeout: Duration,
    pool: usize,
) -> Option<Http1Client> {
    if proxied {
        return None;
    }
    Http1Client::new(&reqwest::Url::parse(base).ok()?, connect_timeout, pool)
}

/// A response whose head has arrived.
pub struct Response {
    status: u16,
    headers: HeaderMap,
    body: Body,
}

enum Body {
    Direct(Http1Body),
    Library {
        stream: LibraryStream,
        /// The last chunk handed out (borrowed by the caller until the next call).
        chunk: bytes::Bytes,
    },
}

type LibraryStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

impl Response {
    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The next bytes of the body with the instant they were read; `None` at the body's clean
    /// end; `Err` (a description) when the connection broke or the framing was invalid.
    /// Cancel-safe.
    pub async fn chunk(&mut self) -> Result<Option<(&[u8], Instant)>, String> {
        let at = std::future::poll_fn(|cx| self.poll_chunk(cx)).await?;
        Ok(at.map(|at| (self.last_chunk(), at)))
    }

    /// Poll form of [`Self::chunk`]: `Ready(Ok(Some(at)))` when new bytes are in
    /// [`Self::last_chunk`].
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Instant>, String>> {
        match &mut self.body {
            Body::Direct(body) => body.poll_next(cx).map_err(|err| err.to_string()),
            Body::Library { stream, chunk } => match ready!(stream.as_mut().poll_next(cx)) {
                Some(Ok(bytes)) => {
                    let at = Instant::now();
                    *chunk = bytes;
                    Poll::Ready(Ok(Some(at)))
                }
                None => Poll::Ready(Ok(None)),
                Some(Err(err)) => Poll::Ready(Err(library::message(&err))),
            },
        }
    }

    /// The bytes the last [`Self::poll_chunk`] handed out.
    pub fn last_chunk(&self) -> &[u8] {
        match &self.body {
            Body::Direct(body) => body.handed(),
            Body::Library { chunk, .. } => chunk,
        }
    }

    /// Reads the rest of the body (untimed), giving up after `limit`: after `[DONE]` most
    /// servers end the body at once, and a body read to its end lets the connection serve the
    /// next request instead of being closed and opened again.
    pub async fn finish(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while let Ok(Some(_)) = self.chunk().await {}
        })
        .await;
    }

    /// The whole body, or `Err` with a description; bounded by `deadline`.
    pub async fn bytes(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        let reading = async {
            while let Some((bytes, _)) = self.chunk().await? {
                body.extend_from_slice(bytes);
            }
            Ok::<(), String>(())
        };
        match tokio::time::timeout_at(deadline.into(), reading).await {
            Err(_) => Err("timed out".into()),
            Ok(Err(err)) => Err(err),
            Ok(Ok(())) => Ok(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_without_a_proxy_goes_direct() {
        let direct = |base: &str, proxied: bool| {
            direct_for(base, proxied, Duration::from_secs(1), 4).map(|c| c.origin())
        };
        assert_eq!(
            direct("http://127.0.0.1:8000/v1", false),
            Some(("127.0.0.1".to_string(), 8000, "127.0.0.1:8000".to_string()))
        );
        assert_eq!(
            direct("http://[::1]:9000", false),
            Some(("::1".to_string(), 9000, "[::1]:9000".to_string()))
        );
        assert_eq!(
            direct("http://gpu-box/v1?api-version=1", false),
            Some(("gpu-box".to_string(), 80, "gpu-box".to_string()))
        );
        assert_eq!(
            direct("http://127.0.0.1:8000", true),
            None,
            "a proxy applies"
        );
        assert_eq!(direct("https://api.example.com", false), None, "TLS");
        assert_eq!(direct("not a url", false), None);
    }
}
