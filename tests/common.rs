//! Running the built `capplan` binary from the repository root, as a user would.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn capplan(args: &[&str]) -> Run {
    capplan_in(env!("CARGO_MANIFEST_DIR").into(), args)
}

pub fn capplan_in(dir: PathBuf, args: &[&str]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_capplan"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the capplan binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| {
        panic!(
            "stdout is not JSON ({err}):\n{}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// A fresh scratch folder for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capplan-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}
