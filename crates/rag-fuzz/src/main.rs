//! `rag-fuzz`: runs the fuzz targets by hand.
//!
//! ```text
//! rag-fuzz list
//! rag-fuzz <target>|all [--seconds N] [--seed N] [--slow-ms N] [--hang-ms N]
//!          [--memory-mb N] [--max-execs N] [--corpus DIR] [--crashes DIR]
//!          [--no-minimize] [--in-process]
//! rag-fuzz repro <target> [--memory-mb N] FILE...
//! rag-fuzz gen-corpus [--out DIR]
//! ```
//!
//! Findings go to `crates/rag-fuzz/crashes/<target>/` unless `--crashes`
//! says otherwise; the exit code is 1 when a run has a failing finding.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rag_fuzz::driver::{self, Options, Outcome};
use rag_fuzz::supervise::{self, Supervision};
use rag_fuzz::{by_name, corpus_root, default_crash_root, seeds, summary_line, Report, TARGETS};

struct Args {
    rest: Vec<String>,
    flags: Vec<(String, Option<String>)>,
}

impl Args {
    fn parse(args: impl Iterator<Item = String>) -> Result<Self, String> {
        const SWITCHES: &[&str] = &["--no-minimize", "--in-process"];
        let mut rest = Vec::new();
        let mut flags = Vec::new();
        let mut it = args.peekable();
        while let Some(a) = it.next() {
            if let Some(stripped) = a.strip_prefix("--") {
                if SWITCHES.contains(&a.as_str()) {
                    flags.push((stripped.to_owned(), None));
                } else {
                    let v = it.next().ok_or(format!("{a} needs a value"))?;
                    flags.push((stripped.to_owned(), Some(v)));
                }
            } else {
                rest.push(a);
            }
        }
        Ok(Args { rest, flags })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|(n, _)| n == name)
    }

    fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        self.get(name).map_or(Ok(default), |v| {
            v.parse().map_err(|e| format!("--{name} {v}: {e}"))
        })
    }

    fn secs(&self, default: f64) -> Result<Duration, String> {
        let s: f64 = self.get("seconds").map_or(Ok(default), |v| {
            v.parse().map_err(|e| format!("--seconds {v}: {e}"))
        })?;
        if let Some(ms) = self.get("millis") {
            return ms
                .parse()
                .map(Duration::from_millis)
                .map_err(|e| format!("--millis {ms}: {e}"));
        }
        Ok(Duration::from_secs_f64(s.max(0.0)))
    }

    fn options(&self, target: &rag_fuzz::Target, default_secs: f64) -> Result<Options, String> {
        let corpus = self.get("corpus").map_or_else(corpus_root, PathBuf::from);
        let crashes = self
            .get("crashes")
            .map_or_else(default_crash_root, PathBuf::from);
        let mut o = Options::new(target, &corpus, &crashes, self.secs(default_secs)?);
        o.seed = self.num("seed", o.seed)?;
        o.slow = Duration::from_millis(self.num("slow-ms", o.slow.as_millis() as u64)?);
        o.minimize = !self.has("no-minimize");
        o.max_execs = self
            .get("max-execs")
            .map(str::parse)
            .transpose()
            .map_err(|e| format!("--max-execs: {e}"))?;
        Ok(o)
    }
}

fn usage() -> String {
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    format!(
        "usage: rag-fuzz <target>|all [--seconds N] [--seed N] [--slow-ms N] [--hang-ms N] [--memory-mb N] [--max-execs N] [--corpus DIR] [--crashes DIR] [--no-minimize] [--in-process]\n       rag-fuzz repro <target> [--memory-mb N] FILE...\n       rag-fuzz gen-corpus [--out DIR]\n       rag-fuzz list\ntargets: {}",
        names.join(", ")
    )
}

/// The child side of supervision: the target's loop with progress records.
fn child(args: &Args) -> Result<ExitCode, String> {
    let name = args.rest.get(1).ok_or("__child needs a target")?;
    let target = by_name(name).ok_or(format!("no target {name}"))?;
    supervise::limit_self(args.num("memory-mb", 0)?)?;
    let mut o = args.options(target, 10.0)?;
    // The supervisor passes the exact directories.
    o.corpus_dir = PathBuf::from(args.get("corpus").ok_or("--corpus")?);
    o.crash_dir = PathBuf::from(args.get("crashes").ok_or("--crashes")?);
    o.progress = args.get("progress").map(PathBuf::from);
    o.findings_log = args.get("findings").map(PathBuf::from);
    let summary = PathBuf::from(args.get("summary").ok_or("--summary")?);
    let report = driver::fuzz(target, o).map_err(|e| e.to_string())?;
    let json = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
    std::fs::write(&summary, json).map_err(|e| format!("{}: {e}", summary.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn print_findings(r: &Report) {
    for f in &r.findings {
        println!(
            "  {:?} x{}: {}{}{}",
            f.kind,
            f.hits,
            f.message,
            f.input
                .as_ref()
                .map(|p| format!("\n    input: {}", p.display()))
                .unwrap_or_default(),
            f.minimized
                .as_ref()
                .map(|p| format!("\n    minimised: {}", p.display()))
                .unwrap_or_default()
        );
    }
    for (site, n) in &r.contained_sites {
        println!("  contained x{n}: {site}");
    }
}

fn fuzz(args: &Args) -> Result<ExitCode, String> {
    let name = &args.rest[0];
    let targets: Vec<&'static rag_fuzz::Target> = if name == "all" {
        TARGETS.iter().collect()
    } else {
        vec![by_name(name).ok_or_else(|| format!("no target {name}\n{}", usage()))?]
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut failed = false;
    let mut total = 0;
    for t in targets {
        let o = args.options(t, 60.0)?;
        let report = if args.has("in-process") {
            driver::fuzz(t, o).map_err(|e| e.to_string())?
        } else {
            let s = Supervision {
                run: o,
                hang: Duration::from_millis(args.num("hang-ms", 20_000)?),
                memory_mb: args.num("memory-mb", 4096)?,
                exe: exe.clone(),
                max_restarts: 50,
            };
            supervise::supervise(t, &s).map_err(|e| e.to_string())?
        };
        println!("{}", summary_line(&report));
        print_findings(&report);
        total += report.execs;
        failed |= !report.failures(t).is_empty();
    }
    println!("total: {total} executions");
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn repro(args: &Args) -> Result<ExitCode, String> {
    let name = args.rest.get(1).ok_or("repro needs a target")?;
    let target = by_name(name).ok_or(format!("no target {name}"))?;
    // The limit the fuzzing child had, to reproduce allocation failures.
    supervise::limit_self(args.num("memory-mb", 0)?)?;
    let mut failed = false;
    for file in &args.rest[2..] {
        let input = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
        let len = input.len();
        let (outcome, took) = driver::run_isolated(target, input);
        match outcome {
            Outcome::Returned { contained, .. } => println!(
                "{file}: ok ({len} bytes, {} ms){}",
                took.as_millis(),
                contained
                    .map(|c| format!(", contained panic: {c}"))
                    .unwrap_or_default()
            ),
            Outcome::Panicked(m) => {
                failed = true;
                println!("{file}: PANIC ({len} bytes, {} ms): {m}", took.as_millis());
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn run() -> Result<ExitCode, String> {
    let args = Args::parse(std::env::args().skip(1))?;
    match args.rest.first().map(String::as_str) {
        None | Some("help") => {
            println!("{}", usage());
            Ok(ExitCode::SUCCESS)
        }
        Some("list") => {
            for t in TARGETS {
                println!(
                    "{:<11} {}{}",
                    t.name,
                    t.about,
                    if t.contained { " [in rag-sandbox]" } else { "" }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("__child") => child(&args),
        Some("repro") => repro(&args),
        Some("gen-corpus") => {
            let out = args.get("out").map_or_else(corpus_root, PathBuf::from);
            let n = seeds::write_corpus(&out).map_err(|e| e.to_string())?;
            println!("wrote {n} seed files under {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Some(_) => fuzz(&args),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rag-fuzz: {e}");
            ExitCode::from(2)
        }
    }
}
