//! The bounded fuzzing run of CI: every target, in a watched child process,
//! for `RAGSCOPE_FUZZ_SECONDS` seconds each (default 8; at most 5 minutes
//! in all for the 12 targets at the default). Fails on any panic (or broken
//! invariant), and on a crash or hang of a target that production does not
//! run inside rag-sandbox's worker process; prints executions per target.
//!
//! `RAGSCOPE_FUZZ_TARGETS=pdf,html` runs only those; `RAGSCOPE_FUZZ_SEED`
//! changes the mutation seed (default fixed, so every run tries the same
//! inputs on the same machine speed).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rag_fuzz::supervise::{supervise, Supervision};
use rag_fuzz::{corpus_root, summary_line, Options, TARGETS};

fn env_num(name: &str) -> Option<f64> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Some(x),
        _ => panic!("{name}={v:?} is not a number of seconds"),
    }
}

#[test]
fn every_target_survives_a_bounded_run() {
    let secs = env_num("RAGSCOPE_FUZZ_SECONDS").unwrap_or(8.0);
    let only: Option<Vec<String>> = std::env::var("RAGSCOPE_FUZZ_TARGETS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let crash_root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rag-fuzz-crashes");
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut total = 0;
    for t in TARGETS {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == t.name))
        {
            continue;
        }
        let mut run = Options::new(
            t,
            &corpus_root(),
            &crash_root,
            Duration::from_secs_f64(secs),
        );
        if let Some(seed) = env_num("RAGSCOPE_FUZZ_SEED") {
            run.seed = seed as u64;
        }
        let s = Supervision {
            run,
            hang: Duration::from_secs(10),
            memory_mb: 4096,
            exe: PathBuf::from(env!("CARGO_BIN_EXE_rag-fuzz")),
            max_restarts: 10,
        };
        let report = supervise(t, &s).unwrap_or_else(|e| panic!("{}: {e}", t.name));
        println!("{}", summary_line(&report));
        for f in &report.findings {
            println!("  {:?} x{}: {} ({:?})", f.kind, f.hits, f.message, f.input);
        }
        for (site, n) in &report.contained_sites {
            println!("  contained x{n}: {site}");
        }
        total += report.execs;
        for f in report.failures(t) {
            failures.push(format!(
                "{}: {:?}: {} (input {:?})",
                t.name, f.kind, f.message, f.input
            ));
        }
    }
    println!(
        "total: {total} executions in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "fuzzing found:\n{}",
        failures.join("\n")
    );
}
