//! The reqwest side of [`super::Transport`]: HTTPS and proxied endpoints.

use super::{Body, Response, SendError};

pub async fn post(
    client: &reqwest::Client,
    url: &str,
    body: String,
    api_key: Option<&str>,
) -> Result<Response, SendError> {
    let mut builder = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = api_key {
        builder = builder.bearer_auth(key);
    }
    match builder.send().await {
        Ok(response) => Ok(Response {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: Body::Library {
                stream: Box::pin(response.bytes_stream()),
                chunk: bytes::Bytes::new(),
            },
        }),
        Err(err) if stale_connection(&err) => Err(SendError::Stale),
        Err(err) => Err(SendError::Failed(message(&err))),
    }
}

/// Whether `err` is a pooled connection closed by the server before any byte of the response:
/// hyper's "incomplete message" on a request that got no response at all.
fn stale_connection(err: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            return hyper.is_incomplete_message();
        }
        source = cause.source();
    }
    false
}

/// The error's description without anything that could carry a secret (reqwest puts the URL in
/// its messages; ours has none, but the probe does not rely on that).
pub fn message(err: &reqwest::Error) -> String {
    let kind = if err.is_connect() {
        "cannot connect"
    } else if err.is_timeout() {
        "timed out"
    } else if err.is_body() || err.is_decode() {
        "connection broke while reading"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(err);
    let mut detail = String::new();
    while let Some(cause) = source {
        detail = cause.to_string();
        source = cause.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}
