//! Runs a target's fuzzing loop in a child process and watches it.
//!
//! A stack overflow, an abort or an allocation failure kills the process,
//! and an endless loop never returns: neither can be caught inside it. So
//! the loop runs in a child (this crate's binary, `__child` mode, with an
//! address-space limit), which writes each input to a progress file before
//! running it. The supervisor polls the file's counter: when the child dies
//! or stops making progress for the hang limit (it is then killed), the
//! last input is saved as a `crash-*` or `hang-*` finding, and a new child
//! goes on with another mutation seed until the time budget is spent.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::driver::{self, Finding, Kind, Options, Report};
use crate::targets::Target;

/// How to supervise.
#[derive(Debug, Clone)]
pub struct Supervision {
    /// The run: budget, seed, corpus, crash directory, slow threshold.
    pub run: Options,
    /// No new input for this long is a hang.
    pub hang: Duration,
    /// Address-space limit of the child, in MiB (0: none).
    pub memory_mb: u64,
    /// The rag-fuzz binary.
    pub exe: PathBuf,
    /// Give up after this many crashes or hangs.
    pub max_restarts: u32,
}

/// The child's arguments for one run.
fn child_args(
    target: &Target,
    s: &Supervision,
    seed: u64,
    left: Duration,
    work: &Path,
) -> Vec<String> {
    let r = &s.run;
    let mut a = vec![
        "__child".to_owned(),
        target.name.to_owned(),
        "--millis".into(),
        left.as_millis().to_string(),
        "--seed".into(),
        seed.to_string(),
        "--corpus".into(),
        r.corpus_dir.display().to_string(),
        "--crashes".into(),
        r.crash_dir.display().to_string(),
        "--slow-ms".into(),
        r.slow.as_millis().to_string(),
        "--memory-mb".into(),
        s.memory_mb.to_string(),
        "--progress".into(),
        work.join("progress").display().to_string(),
        "--findings".into(),
        work.join("findings.jsonl").display().to_string(),
        "--summary".into(),
        work.join("summary.json").display().to_string(),
    ];
    if let Some(m) = r.max_execs {
        a.push("--max-execs".into());
        a.push(m.to_string());
    }
    if !r.minimize {
        a.push("--no-minimize".into());
    }
    a
}

/// What the end of a dead child's stderr says.
fn crash_message(status: ExitStatus, stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let telling = lines
        .iter()
        .rev()
        .find(|l| {
            l.contains("overflowed its stack")
                || l.contains("memory allocation")
                || l.contains("panicked")
                || l.contains("fatal")
        })
        .or(lines.last())
        .map_or("", |l| l.trim());
    let how = describe(status);
    let kind = if telling.contains("overflowed its stack") {
        "stack overflow"
    } else if telling.contains("memory allocation") {
        "allocation failure (address-space limit)"
    } else {
        "the process died"
    };
    let telling: String = telling.chars().take(300).collect();
    format!("{kind}: {telling} ({how}) at child")
}

#[cfg(unix)]
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    }
}

#[cfg(not(unix))]
fn describe(status: ExitStatus) -> String {
    format!("{status}")
}

/// Fuzzes `target` in watched child processes for the run's budget.
pub fn supervise(target: &'static Target, s: &Supervision) -> std::io::Result<Report> {
    let t0 = Instant::now();
    let work = s.run.crash_dir.join(".work");
    std::fs::create_dir_all(&work)?;
    let mut report = Report {
        target: target.name.into(),
        ..Report::default()
    };
    let mut restarts = 0u32;
    loop {
        let left = s.run.duration.saturating_sub(t0.elapsed());
        if restarts > 0 && left < Duration::from_millis(500) {
            break;
        }
        for f in ["progress", "findings.jsonl", "summary.json"] {
            let _ = std::fs::remove_file(work.join(f));
        }
        let seed = s.run.seed.wrapping_add(u64::from(restarts));
        let mut child = Command::new(&s.exe)
            .args(child_args(target, s, seed, left, &work))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        // Keep the end of the child's stderr.
        let tail = Arc::new(Mutex::new(Vec::<u8>::new()));
        let reader = child.stderr.take().map(|mut err| {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.extend_from_slice(&buf[..n]);
                        let over = t.len().saturating_sub(16 << 10);
                        t.drain(..over);
                    }
                }
            })
        });
        let progress = work.join("progress");
        let mut beats = 0;
        let mut last_beat = Instant::now();
        let mut hung = None;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            std::thread::sleep(Duration::from_millis(50));
            let now = driver::read_progress_count(&progress).unwrap_or(0);
            if now != beats {
                beats = now;
                last_beat = Instant::now();
            } else if last_beat.elapsed() > s.hang {
                hung = Some(last_beat.elapsed());
                let _ = child.kill();
                break child.wait()?;
            }
        };
        if let Some(r) = reader {
            let _ = r.join();
        }
        let stderr = tail
            .lock()
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .unwrap_or_default();
        let summary = std::fs::read(work.join("summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Report>(&b).ok());
        match summary {
            Some(sum) if hung.is_none() && status.success() => {
                report.merge(sum);
                break;
            }
            _ => {}
        }
        // The child died or hung: its findings so far, then the input that did it.
        if let Ok(log) = std::fs::read_to_string(work.join("findings.jsonl")) {
            for l in log.lines() {
                if let Ok(f) = serde_json::from_str::<Finding>(l) {
                    report.add_finding(f);
                }
            }
        }
        let (n, input) = driver::read_progress(&progress).unwrap_or((0, Vec::new()));
        report.execs += n;
        let (kind, message, prefix) = match hung {
            Some(d) => (
                Kind::Hang,
                format!("no progress for {} ms at child", d.as_millis()),
                "hang",
            ),
            None => (Kind::Crash, crash_message(status, &stderr), "crash"),
        };
        if n == 0 && hung.is_none() {
            // It died before running anything: a broken setup, not a finding.
            return Err(std::io::Error::other(format!(
                "the fuzzing child for {} failed to start: {}",
                target.name,
                crash_message(status, &stderr)
            )));
        }
        report.add_finding(Finding {
            kind,
            message,
            input: driver::save(&s.run.crash_dir, prefix, &input),
            minimized: None,
            len: input.len(),
            ms: hung.map_or(0, |d| d.as_millis() as u64),
            hits: 1,
        });
        restarts += 1;
        if restarts > s.max_restarts {
            break;
        }
    }
    report.restarts = restarts;
    report.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(report)
}

/// Sets the child's own limits: address space and no core dumps.
#[cfg(unix)]
pub fn limit_self(memory_mb: u64) -> Result<(), String> {
    use nix::sys::resource::{setrlimit, Resource};
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|e| format!("RLIMIT_CORE: {e}"))?;
    if memory_mb > 0 {
        let bytes = memory_mb.saturating_mul(1 << 20);
        setrlimit(Resource::RLIMIT_AS, bytes, bytes).map_err(|e| format!("RLIMIT_AS: {e}"))?;
    }
    Ok(())
}

/// No limits off Unix (the supervisor's hang limit still applies).
#[cfg(not(unix))]
pub fn limit_self(_: u64) -> Result<(), String> {
    Ok(())
}
