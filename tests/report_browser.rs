//! The HTML report opened in a real headless browser (Chromium): it must render its tables and
//! draw its charts. The page counts, after layout, the tables with rows and the charts with a
//! drawn size into `data-rendered`; the browser's DOM dump is read back.
//!
//! Without Chromium the test says so loudly and passes only outside CI: `.ci/run` installs
//! Chromium and sets CAPPLAN_REQUIRE_BROWSER=1, so there a missing browser fails.

mod common;

use std::process::Command;
use std::time::Duration;

fn chromium() -> Option<String> {
    if let Ok(path) = std::env::var("CAPPLAN_CHROMIUM") {
        return Some(path);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from)
}

#[test]
fn the_html_report_renders_its_tables_and_charts() {
    let Some(browser) = chromium() else {
        let required = std::env::var_os("CAPPLAN_REQUIRE_BROWSER").is_some();
        eprintln!("\n*** SKIPPED: no Chromium found (install the Debian package chromium) ***\n");
        assert!(
            !required,
            "CAPPLAN_REQUIRE_BROWSER is set but no Chromium was found"
        );
        return;
    };
    let out = common::scratch("browser");
    let run = common::capplan(&[
        "compare",
        "plans/seed-10000-users.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page = out.join("seed-10000-users.html");
    let profile = out.join("profile");
    let mut child = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the browser starts");
    // Bounded: a browser that hangs is killed after a minute.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().ok().flatten().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{browser} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("the DOM");
    let dom = String::from_utf8_lossy(&output.stdout);
    // Options, mixes and sensitivity tables; the cost and node charts.
    assert!(
        dom.contains("data-rendered=\"tables:3 charts:2\""),
        "rendered: {:?}",
        dom.find("data-rendered")
            .map(|i| &dom[i..(i + 40).min(dom.len())])
    );
    assert!(dom.contains("8xV100-32G-SXM2") && dom.contains("Total cost over 3 years"));
}
