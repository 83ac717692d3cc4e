//! Helpers for the command-line tests: run the real binary in a temporary data directory.

#![allow(dead_code)]

pub mod served;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_ragscope");

/// The demo knowledge base shipped in the repository.
pub fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

/// The shared evaluation data (`../shared/eval` beside the checkout, or RAGSCOPE_EVAL_DIR).
pub fn eval_dir() -> PathBuf {
    std::env::var_os("RAGSCOPE_EVAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/eval"))
}

/// A command for the binary with a clean environment and the data directory set.
pub fn cmd(data: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--data-dir")
        .arg(data)
        .current_dir(data.parent().unwrap_or(data));
    c
}

/// Reads the child's stderr (which must be piped) until a line reports
/// that failpoint `name` stalled; the child is then blocked there, for the
/// test to kill. Panics when the child exits first.
pub fn wait_for_stall(child: &mut std::process::Child, name: &str) {
    use std::io::BufRead;
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr is piped"));
    let needle = format!("failpoint {name} stalled");
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the child exited before failpoint {name}"
        );
        if line.contains(&needle) {
            return;
        }
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut c: Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("binary runs");
    let r = Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    assert!(
        !r.stderr.contains("panicked"),
        "the binary panicked:\n{}",
        r.stderr
    );
    r
}

pub fn ok(c: Command) -> Run {
    let r = run(c);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// A data directory with the demo knowledge base loaded.
pub fn demo_data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["demo", "--dir"]).arg(demo_dir());
    ok(c);
    dir
}

pub fn data_of(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("data")
}

/// Runs `ragscope query --json` and returns the events.
pub fn query_events(data: &Path, kb: &str, query: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut c = cmd(data);
    c.args(["query", "--kb", kb, "--json"])
        .args(extra)
        .arg(query);
    let r = ok(c);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

/// Titles and bodies of the packed context sources, in order.
pub fn sources(events: &[serde_json::Value]) -> Vec<(String, String)> {
    let ctx = events
        .iter()
        .find(|e| e["type"] == "context_assembled")
        .expect("context_assembled event");
    ctx["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["passage"]["title"].as_str().unwrap().to_owned(),
                s["passage"]["body"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
