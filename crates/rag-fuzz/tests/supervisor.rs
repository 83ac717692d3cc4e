//! The harness catches what `catch_unwind` cannot: a stack overflow, an
//! abort, an allocation failure and an endless loop each become a finding
//! with the input that caused it saved, and the run goes on.

use std::path::PathBuf;
use std::time::Duration;

use rag_fuzz::supervise::{supervise, Supervision};
use rag_fuzz::{by_name, Kind, Options, Report};

fn one_input(name: &str, input: &[u8], slow_ms: u64) -> Report {
    let t = by_name("selftest").unwrap();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("rag-fuzz-selftest-{name}"));
    let _ = std::fs::remove_dir_all(&root);
    let corpus = root.join("corpus");
    std::fs::create_dir_all(corpus.join("selftest")).unwrap();
    std::fs::write(corpus.join("selftest").join("input"), input).unwrap();
    let mut run = Options::new(t, &corpus, &root.join("crashes"), Duration::from_secs(30));
    run.max_execs = Some(1);
    run.slow = Duration::from_millis(slow_ms);
    let s = Supervision {
        run,
        hang: Duration::from_secs(2),
        memory_mb: 4096,
        exe: PathBuf::from(env!("CARGO_BIN_EXE_rag-fuzz")),
        max_restarts: 0,
    };
    supervise(t, &s).unwrap()
}

fn only_finding(r: &Report, kind: Kind, text: &str, input: &[u8]) {
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.kind, kind, "{f:?}");
    assert!(f.message.contains(text), "{f:?}");
    let saved = std::fs::read(f.input.as_ref().expect("input saved")).unwrap();
    assert_eq!(saved, input);
    assert!(!r.failures(by_name("selftest").unwrap()).is_empty() || kind == Kind::Slow);
}

#[test]
fn a_clean_run() {
    let r = one_input("clean", b"fine", 2000);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(r.execs, 1);
}

#[test]
fn a_panic_is_caught_and_minimised() {
    let r = one_input("panic", b"panic and more bytes", 2000);
    only_finding(&r, Kind::Panic, "selftest panic", b"panic and more bytes");
    let min = std::fs::read(r.findings[0].minimized.as_ref().unwrap()).unwrap();
    assert_eq!(min, b"panic");
}

#[test]
fn a_stack_overflow_is_a_crash() {
    let r = one_input("overflow", b"overflow", 2000);
    only_finding(&r, Kind::Crash, "stack overflow", b"overflow");
}

#[test]
fn an_abort_is_a_crash() {
    let r = one_input("abort", b"abort", 2000);
    only_finding(&r, Kind::Crash, "the process died", b"abort");
}

#[test]
fn an_allocation_failure_is_a_crash() {
    let r = one_input("oom", b"oom", 2000);
    only_finding(&r, Kind::Crash, "allocation", b"oom");
}

#[test]
fn an_endless_loop_is_a_hang() {
    let r = one_input("hang", b"hang", 2000);
    only_finding(&r, Kind::Hang, "no progress", b"hang");
}

#[test]
fn a_slow_input_is_reported() {
    let r = one_input("slow", b"slow", 100);
    only_finding(&r, Kind::Slow, "slow threshold", b"slow");
}
