//! The bounded fuzzing run of CI: every target, in a watched child process,
//! for `RAGSCOPE_FUZZ_SECONDS` seconds each (default 8), as many targets at
//! once as there are cores (about 48 s for the 12 targets on 2 cores).
//! Fails on any panic (or broken invariant), and on a crash or hang of a
//! target that production does not run inside rag-sandbox's worker
//! process; prints executions per target.
//!
//! `RAGSCOPE_FUZZ_TARGETS=pdf,html` runs only those; `RAGSCOPE_FUZZ_SEED`
//! changes the mutation seed (default fixed, so every run tries the same
//! inputs on the same machine speed).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rag_fuzz::supervise::{supervise, Supervision};
use rag_fuzz::{corpus_root, summary_line, Options, Report, TARGETS};

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
    let seed = env_num("RAGSCOPE_FUZZ_SEED");
    let targets: Vec<_> = TARGETS
        .iter()
        .filter(|t| only.as_ref().is_none_or(|o| o.iter().any(|n| n == t.name)))
        .collect();
    // Each target runs in a child process of its own (one core each) with
    // its own work directory, so the targets share the cores: as many run
    // at once as there are cores. Each still gets its whole time budget.
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(targets.len().max(1));
    let t0 = Instant::now();
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<Option<Report>>> = Mutex::new(vec![None; targets.len()]);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = targets.get(i) else {
                    break;
                };
                let mut run = Options::new(
                    t,
                    &corpus_root(),
                    &crash_root,
                    Duration::from_secs_f64(secs),
                );
                if let Some(seed) = seed {
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
                reports.lock().expect("no worker panicked holding the lock")[i] = Some(report);
            });
        }
    });
    let reports = reports
        .into_inner()
        .expect("no worker panicked holding the lock");
    let mut failures = Vec::new();
    let mut total = 0;
    // Printed in the targets' order, whatever order they finished in.
    for (t, report) in targets.iter().zip(reports) {
        let report = report.expect("every target was run");
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
        "total: {total} executions in {:.0} s on {workers} workers",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "fuzzing found:\n{}",
        failures.join("\n")
    );
}
