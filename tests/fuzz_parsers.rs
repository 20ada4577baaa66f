//! Property tests of everything that parses bytes or files a user or a server hands capplan:
//! arbitrary bytes, split anywhere, give no panic and no hang, and either an answer or a
//! classified error.
//!
//! In CI each property runs its default number of cases. For a long fuzzing run by hand, raise
//! the count for every property at once (proptest reads the variable), in a release build:
//!
//! ```sh
//! PROPTEST_CASES=200000 cargo test --release --test fuzz_parsers
//! PROPTEST_CASES=200000 cargo test --release --test fuzz_parsers -- sse   # one parser
//! ```
//!
//! A failing case is shrunk and printed; it then belongs in a regression test beside the
//! parser.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use capplan::catalog::Catalog;
use capplan::plan::scenario::read_scenario;
use capplan::probe::sse::{SseDecoder, SseEvent};
use capplan::probe::transport::chunked::{ChunkedDecoder, ChunkedError};
use capplan::probe::transport::http1::Http1Client;
use capplan::store::capacity::parse_capacity_csv;
use capplan::store::import::{read as import, ImportFormat};
use proptest::prelude::*;

/// Cases per property: `PROPTEST_CASES` when set, else `default` (the slow properties — a
/// socket or a catalog per case — run fewer in CI).
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Bytes that look like what the parser reads: pieces of its own syntax mixed with noise, so
/// that random cases get past the first byte.
fn shaped(alphabet: &'static [&'static [u8]]) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(alphabet).prop_map(<[u8]>::to_vec),
            1 => prop::collection::vec(any::<u8>(), 0..8),
        ],
        0..64,
    )
    .prop_map(|pieces| pieces.concat())
}

/// Cut points into `len` bytes (sorted, deduplicated).
fn cuts(bytes: &[u8], seeds: &[usize]) -> Vec<usize> {
    let mut at: Vec<usize> = seeds.iter().map(|s| s % (bytes.len() + 1)).collect();
    at.sort_unstable();
    at.dedup();
    at
}

fn pieces<'a>(bytes: &'a [u8], at: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in at {
        out.push(&bytes[from..cut]);
        from = cut;
    }
    out.push(&bytes[from..]);
    out
}

const SSE: &[&[u8]] = &[
    b"data: ",
    b"data:",
    b"event: ",
    b"id: 7",
    b"retry: 10",
    b": keep-alive",
    b"\n",
    b"\r\n",
    b"\r",
    b"\n\n",
    b"[DONE]",
    b"{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}",
    b"\xEF\xBB\xBF",
    b"\xFF",
    "é".as_bytes(),
];

fn events(decoder: &mut SseDecoder, reads: &[&[u8]], at: Instant) -> Vec<(Option<String>, String)> {
    let mut out: Vec<SseEvent> = Vec::new();
    for read in reads {
        decoder.feed(read, at, &mut out);
    }
    out.extend(decoder.finish());
    out.into_iter().map(|e| (e.event, e.data)).collect()
}

proptest! {
    #![proptest_config(config(512))]

    /// However a stream is cut into reads, the same events come out of it.
    #[test]
    fn sse_events_do_not_depend_on_where_reads_end(
        bytes in shaped(SSE),
        seeds in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let at = Instant::now();
        let whole = events(&mut SseDecoder::new(), &[&bytes], at);
        let split = events(&mut SseDecoder::new(), &pieces(&bytes, &cuts(&bytes, &seeds)), at);
        prop_assert_eq!(whole, split);
    }

    /// Data framed in chunks of any sizes, cut into reads anywhere, comes back whole.
    #[test]
    fn chunked_data_round_trips(
        data in prop::collection::vec(any::<u8>(), 0..2000),
        sizes in prop::collection::vec(1usize..300, 1..20),
        seeds in prop::collection::vec(any::<usize>(), 0..12),
        extension in any::<bool>(),
    ) {
        let mut framed = Vec::new();
        let mut rest = &data[..];
        let mut size = sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*size.next().unwrap_or(&1)).min(rest.len());
            framed.extend_from_slice(format!("{n:x}").as_bytes());
            if extension {
                framed.extend_from_slice(b" ;name=value");
            }
            framed.extend_from_slice(b"\r\n");
            framed.extend_from_slice(&rest[..n]);
            framed.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        framed.extend_from_slice(b"0\r\nTrailer: x\r\n\r\n");
        let (out, err, done) = dechunk(&framed, &cuts(&framed, &seeds));
        prop_assert_eq!(err, None);
        prop_assert!(done);
        prop_assert_eq!(out, data);
    }

    /// Any bytes: data or a classified error, the same however the reads are cut.
    #[test]
    fn chunked_garbage_is_an_error_not_a_panic(
        bytes in shaped(&[b"0", b"1a", b"ff", b";x", b"\r\n", b"\n", b"\r", b"abc", b"zz", b" "]),
        seeds in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = dechunk(&bytes, &[]);
        let split = dechunk(&bytes, &cuts(&bytes, &seeds));
        prop_assert_eq!(whole, split);
    }
}

/// Decodes `bytes` read in pieces cut at `at`: the data, the error if any, whether complete.
fn dechunk(bytes: &[u8], at: &[usize]) -> (Vec<u8>, Option<ChunkedError>, bool) {
    let mut decoder = ChunkedDecoder::new();
    let mut out = Vec::new();
    for read in pieces(bytes, at) {
        let mut rest = read;
        while !rest.is_empty() && !decoder.is_done() {
            match decoder.decode(rest) {
                Ok(decoded) => {
                    if let Some(range) = decoded.data {
                        out.extend_from_slice(&rest[range]);
                    }
                    assert!(decoded.consumed > 0, "no progress on {rest:?}");
                    rest = &rest[decoded.consumed..];
                }
                Err(err) => return (out, Some(err), false),
            }
        }
    }
    let done = decoder.is_done();
    (out, None, done)
}

const HTTP: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.0 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 500 Oops\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: x\r\n",
    b"Connection: close\r\n",
    b"Content-Type: text/event-stream\r\n",
    b"\r\n",
    b"5\r\nhello\r\n",
    b"0\r\n\r\n",
    b"data: {}\n\n",
    b"\n",
];

proptest! {
    #![proptest_config(config(48))]

    /// A server answering any bytes, in any pieces, then closing: the client reads a head and
    /// a body to their end or fails with a message — within a bounded time.
    #[test]
    fn http1_responses_of_any_bytes_end(
        bytes in shaped(HTTP),
        seeds in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let outcome = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), exchange(bytes.clone(), seeds)).await
        });
        prop_assert!(outcome.is_ok(), "the exchange hung on {:?}", String::from_utf8_lossy(&bytes));
    }
}

/// One request to a local server that answers `bytes` in pieces and closes.
async fn exchange(bytes: Vec<u8>, seeds: Vec<usize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let at = cuts(&bytes, &seeds);
    let server = tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        for piece in pieces(&bytes, &at) {
            if socket.write_all(piece).await.is_err() {
                return;
            }
            let _ = socket.flush().await;
            tokio::task::yield_now().await;
        }
        let _ = socket.shutdown().await;
    });
    let url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/v1")).expect("a URL");
    let client = Http1Client::new(&url, Duration::from_secs(2), 1).expect("a plain-http client");
    if let Ok(mut response) = client.post("/v1/completions", b"{}", None).await {
        let _ = response.status;
        loop {
            let read = std::future::poll_fn(|cx| response.body.poll_next(cx)).await;
            match read {
                Ok(Some(_)) => {
                    let _ = response.body.handed().len();
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    let _ = server.await;
}

/// Files of one kind to start mutations from.
fn files_under(dir: &str, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, keep, out);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(dir),
        keep,
        &mut out,
    );
    out
}

/// A file's bytes, damaged: cut short, bytes overwritten, noise spliced in.
#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    Overwrite(usize, u8),
    Splice(usize, Vec<u8>),
    Drop(usize, usize),
}

fn damage() -> impl Strategy<Value = Vec<Damage>> {
    prop::collection::vec(
        prop_oneof![
            any::<usize>().prop_map(Damage::Truncate),
            (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Damage::Overwrite(at, b)),
            (
                any::<usize>(),
                shaped(&[
                    b"{", b"}", b"[", b"]", b"\"", b",", b":", b"-1", b"1e999", b"null", b"NaN",
                    b"\n", b"=", b"'"
                ])
            )
                .prop_map(|(at, bytes)| Damage::Splice(at, bytes)),
            (any::<usize>(), 0usize..64).prop_map(|(at, n)| Damage::Drop(at, n)),
        ],
        1..4,
    )
}

fn damaged(original: &[u8], damage: &[Damage]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for d in damage {
        let at = |i: &usize, len: usize| i % (len + 1);
        match d {
            Damage::Truncate(i) => {
                let cut = at(i, bytes.len());
                bytes.truncate(cut);
            }
            Damage::Overwrite(i, b) => {
                if !bytes.is_empty() {
                    let i = i % bytes.len();
                    bytes[i] = *b;
                }
            }
            Damage::Splice(i, noise) => {
                let i = at(i, bytes.len());
                bytes.splice(i..i, noise.iter().copied());
            }
            Damage::Drop(i, n) => {
                let i = at(i, bytes.len());
                let end = (i + n).min(bytes.len());
                bytes.drain(i..end);
            }
        }
    }
    bytes
}

/// The import fixtures and the format that reads each.
fn import_fixtures() -> Vec<(ImportFormat, PathBuf)> {
    let data = |p: &Path| {
        matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("json" | "jsonl" | "csv")
        )
    };
    let mut out = Vec::new();
    for (tool, format) in [
        ("aiperf", ImportFormat::Aiperf),
        ("evalscope", ImportFormat::Evalscope),
        ("genai-perf", ImportFormat::GenaiPerf),
        ("guidellm", ImportFormat::Guidellm),
        ("vllm-bench-serve", ImportFormat::VllmBench),
    ] {
        for path in files_under(&format!("tests/fixtures/import/{tool}"), &data) {
            out.push((format, path));
        }
    }
    for path in files_under("measurements", &|p| {
        p.extension().is_some_and(|e| e == "csv")
    }) {
        out.push((ImportFormat::StepsCsv, path));
    }
    out
}

proptest! {
    #![proptest_config(config(256))]

    /// Every importer, on a damaged copy of a file it reads: an import or an error that names
    /// the file.
    #[test]
    fn importers_take_damaged_files(pick in any::<usize>(), damage in damage()) {
        let fixtures = import_fixtures();
        prop_assume!(!fixtures.is_empty());
        let (format, original) = &fixtures[pick % fixtures.len()];
        let bytes = damaged(&std::fs::read(original).expect("the fixture"), &damage);
        let dir = common::scratch("fuzz-import");
        let name = original.file_name().expect("a file name");
        let path = dir.join(name);
        std::fs::write(&path, &bytes).expect("a scratch file");
        if let Err(err) = import(*format, std::slice::from_ref(&path)) {
            let message = err.to_string();
            prop_assert!(!message.is_empty());
            prop_assert!(capplan::is_input_error(&anyhow::Error::new(err)), "{message}");
        }
    }

    /// Capacity tables, damaged: points or an error naming the file and line.
    #[test]
    fn capacity_tables_take_damaged_text(pick in any::<usize>(), damage in damage()) {
        let tables = files_under("measurements", &|p| p.extension().is_some_and(|e| e == "csv"));
        prop_assume!(!tables.is_empty());
        let original = &tables[pick % tables.len()];
        let bytes = damaged(&std::fs::read(original).expect("the table"), &damage);
        let text = String::from_utf8_lossy(&bytes);
        let catalog = shipped();
        if let Err(err) = parse_capacity_csv(&text, "table.csv", catalog) {
            prop_assert!(err.to_string().contains("table.csv"), "{err}");
        }
    }

    /// Scenario files, damaged: a scenario or an error naming the file.
    #[test]
    fn scenarios_take_damaged_text(pick in any::<usize>(), damage in damage()) {
        let scenarios = files_under("plans", &|p| p.extension().is_some_and(|e| e == "toml"));
        prop_assume!(!scenarios.is_empty());
        let original = &scenarios[pick % scenarios.len()];
        let bytes = damaged(&std::fs::read(original).expect("the scenario"), &damage);
        let dir = common::scratch("fuzz-scenario");
        let path = dir.join("scenario.toml");
        std::fs::write(&path, &bytes).expect("a scratch file");
        if let Err(err) = read_scenario(&path) {
            prop_assert!(err.to_string().contains("scenario.toml"), "{err}");
        }
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Catalog files given with --hardware, damaged: a catalog or an error naming the file.
    #[test]
    fn catalog_files_take_damaged_text(pick in any::<usize>(), damage in damage()) {
        let names = ["cards.toml", "nodes.toml", "models.toml", "engines.toml", "bands.toml"];
        let name = names[pick % names.len()];
        let original = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware").join(name);
        let bytes = damaged(&std::fs::read(&original).expect("the catalog file"), &damage);
        let dir = common::scratch("fuzz-catalog");
        std::fs::write(dir.join(name), &bytes).expect("a scratch file");
        if let Err(err) = Catalog::load(Some(&dir)) {
            prop_assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }
}

fn shipped() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| Catalog::shipped().expect("the shipped catalog"))
}
