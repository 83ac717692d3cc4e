//! Fuzzing of every parser of outside input in ragscope, on the stable
//! toolchain (no cargo-fuzz, no nightly).
//!
//! * [`targets`]: one module per target (PDF, DOCX, HTML and the crawler's
//!   links, Markdown, CSV and JSONL FAQ tables, encoding detection,
//!   chunking, the query analyzer, config TOML, HTTP bodies), each feeding
//!   the bytes to the code the way ragscope does and checking the
//!   invariants that hold for any input.
//! * [`mutate`]: deterministic mutations from a fixed seed: bit and byte
//!   edits, format tokens, splices between inputs, repeated chunks, deep
//!   nesting of brackets and tags, line edits, extreme numbers, odd Unicode.
//! * [`driver`]: the loop: the seed corpus in `corpus/<target>/`, then
//!   mutations of the seeds and of inputs with new behaviour, each under
//!   `catch_unwind` on a thread with the target's production stack; panics
//!   (minimised) and slow inputs are saved in the crash directory.
//! * [`supervise`]: the loop in a watched child process, so stack
//!   overflows, aborts, allocation failures and endless loops are findings
//!   with their input saved, not the end of the run.
//! * [`seeds`]: the generator of the seed corpus (`rag-fuzz gen-corpus`);
//!   `corpus/<target>/regress-*` are the inputs of fixed findings.
//! * `known/`: inputs that still crash a parser that production runs only
//!   inside rag-sandbox's worker (third-party bugs, contained there as
//!   `parse_crash`): `known/pdf/self-drawing-xobject.pdf` overflows the
//!   stack in pdf-extract, `known/pdf/cyclic-parent.pdf` (a page that is
//!   its own `/Parent`) loops forever in pdf-extract's `get_inherited`,
//!   `known/pdf/xref-stream-huge-width.pdf` makes lopdf allocate 22 GB for
//!   an xref stream's `/W`. Kept out of the corpus,
//!   which must run cleanly in one process; `rag-fuzz repro pdf
//!   --memory-mb 512 FILE` shows them.
//!
//! `cargo test -p rag-fuzz` runs every target for a bounded time (see
//! `tests/bounded.rs`, `RAGSCOPE_FUZZ_SECONDS`) and every corpus file as a
//! regression test; `cargo run -p rag-fuzz --release -- <target> --seconds N`
//! runs longer.

/// Panics with an `invariant:` message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            panic!("invariant: {}", format!($($fmt)+));
        }
    };
}

pub mod driver;
pub mod mutate;
pub mod rng;
pub mod seeds;
pub mod supervise;
pub mod targets;

use std::path::PathBuf;

pub use driver::{Finding, Kind, Options, Outcome, Report};
pub use targets::{by_name, Target, TARGETS};

/// The seed corpus in the repository: `crates/rag-fuzz/corpus`.
pub fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Where runs by hand save findings: `crates/rag-fuzz/crashes` (ignored by git).
pub fn default_crash_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crashes")
}

/// One line about a report: executions, rate, behaviours, findings.
pub fn summary_line(r: &Report) -> String {
    let secs = (r.elapsed_ms as f64 / 1000.0).max(0.001);
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    for f in &r.findings {
        *kinds
            .entry(match f.kind {
                Kind::Panic => "panic",
                Kind::Crash => "crash",
                Kind::Hang => "hang",
                Kind::Slow => "slow",
            })
            .or_default() += 1;
    }
    let findings = if kinds.is_empty() {
        "no findings".to_owned()
    } else {
        kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{:<11} {:>9} execs in {:>6.1} s ({:>7.0}/s), {} seeds, {} behaviours, slowest {} ms, {} contained panics, {}{}",
        r.target,
        r.execs,
        secs,
        r.execs as f64 / secs,
        r.seeds,
        r.signatures,
        r.slowest_ms,
        r.contained_panics,
        findings,
        if r.restarts > 0 {
            format!(", {} restarts", r.restarts)
        } else {
            String::new()
        }
    )
}
