//! The parent's side: start a worker per file, feed it, watch it, classify
//! how it ended.

use crate::protocol::{Reply, Request, Task, REPLY_MARK, WORKER_ARG};
use async_trait::async_trait;
use rag_engine::{ExtractFailure, ExtractJob, Extractor};
use rag_ingest::Extraction;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The limits of one extraction (`[limits] extract_*` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Wall time from start to reply, in milliseconds.
    pub wall_ms: u64,
    /// CPU time, in milliseconds (enforced by the kernel in whole seconds,
    /// rounded up).
    pub cpu_ms: u64,
    /// Address space of the worker, in MiB.
    pub memory_mb: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            wall_ms: 30_000,
            cpu_ms: 20_000,
            memory_mb: 512,
        }
    }
}

/// An [`Extractor`] that runs every extraction in a worker process: the
/// program at `program` started with [`WORKER_ARG`], which must call
/// [`crate::run_worker`]. The worker gets an empty environment plus the
/// variables given to [`SandboxExtractor::with_env`]; it is killed when its
/// wall time runs out or when the extraction is abandoned (the future
/// dropped: a client that went away, a cancelled job, shutdown).
#[derive(Debug, Clone)]
pub struct SandboxExtractor {
    program: PathBuf,
    limits: SandboxLimits,
    env: Vec<(String, String)>,
}

impl SandboxExtractor {
    /// Workers started from `program` (usually `std::env::current_exe()`).
    pub fn new(program: PathBuf, limits: SandboxLimits) -> Self {
        SandboxExtractor {
            program,
            limits,
            env: Vec::new(),
        }
    }

    /// Passes one environment variable to the workers.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The limits.
    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// The most reply bytes read from a worker: a reply is JSON of the
    /// extracted text, a few times the input at most.
    fn reply_cap(max_file_bytes: u64) -> u64 {
        max_file_bytes.saturating_mul(8).saturating_add(16 << 20)
    }

    async fn run(&self, job: ExtractJob, task: Task) -> Result<Reply, ExtractFailure> {
        let started = Instant::now();
        let request = Request {
            task,
            name: job.name,
            media_type: job.media_type,
            max_file_bytes: job.limits.max_file_bytes,
            max_decompressed_bytes: job.limits.max_decompressed_bytes,
            cpu_ms: self.limits.cpu_ms,
            memory_mb: self.limits.memory_mb,
            len: job.bytes.len() as u64,
        };
        let mut header = serde_json::to_vec(&request).map_err(|e| crash(e.to_string()))?;
        header.push(b'\n');
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.arg(WORKER_ARG)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| crash(format!("could not start the extraction worker: {e}")))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(crash("the extraction worker has no pipes".into()));
        };
        let bytes = job.bytes;
        // A worker that dies early closes its stdin: the write fails, and the
        // exit status says why.
        let write = async move {
            let _ = stdin.write_all(&header).await;
            let _ = stdin.write_all(&bytes).await;
            drop(stdin);
        };
        let cap = Self::reply_cap(request.max_file_bytes);
        let read_out = async move {
            let mut out = Vec::new();
            let r = stdout.take(cap + 1).read_to_end(&mut out).await;
            (out, r)
        };
        let read_err = async move {
            let mut err = Vec::new();
            let _ = stderr.take(64 << 10).read_to_end(&mut err).await;
            err
        };
        let wall = Duration::from_millis(self.limits.wall_ms);
        let watched = async {
            let ((), (out, read), err, status) =
                tokio::join!(write, read_out, read_err, child.wait());
            (out, read, err, status)
        };
        let outcome = tokio::time::timeout(wall, watched).await;
        let Ok((out, read, err, status)) = outcome else {
            let _ = child.kill().await;
            return Err(limit(format!(
                "extraction took longer than the wall-time limit of {} ms; the file was not read",
                self.limits.wall_ms
            )));
        };
        let status = status.map_err(|e| crash(format!("waiting for the worker: {e}")))?;
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            %status,
            reply_bytes = out.len(),
            "extraction worker finished"
        );
        if read.is_err() || out.len() as u64 > cap {
            return Err(limit(format!(
                "the extracted text is over the limit of {cap} bytes"
            )));
        }
        if !status.success() {
            return Err(self.classify(status, &err));
        }
        let Some(start) = find_last(&out, REPLY_MARK) else {
            return Err(crash("the extraction worker gave no reply".into()));
        };
        let reply = &out[start + REPLY_MARK.len()..];
        // Large replies are parsed off the async runtime.
        let reply = reply.to_vec();
        let parsed = tokio::task::spawn_blocking(move || serde_json::from_slice::<Reply>(&reply))
            .await
            .map_err(|e| crash(e.to_string()))?;
        match parsed {
            Ok(Reply::Refused { code, message }) => Err(ExtractFailure {
                code: known_code(&code),
                reason: message,
            }),
            Ok(reply) => Ok(reply),
            Err(e) => Err(crash(format!(
                "the extraction worker's reply was malformed: {e}"
            ))),
        }
    }

    /// Why a worker ended without a reply.
    fn classify(&self, status: ExitStatus, stderr: &[u8]) -> ExtractFailure {
        let err = String::from_utf8_lossy(stderr);
        if err.contains("memory allocation of") {
            return limit(format!(
                "extraction needed more than the memory limit of {} MiB; the file was not read",
                self.limits.memory_mb
            ));
        }
        if err.contains("overflowed its stack") {
            return crash("the parser overflowed its stack (a self-referencing structure?); the file was not read".into());
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            match status.signal() {
                // SIGXCPU at the soft limit, SIGKILL at the hard one.
                Some(24) | Some(9) => {
                    return limit(format!(
                    "extraction used more than the CPU-time limit of {} ms; the file was not read",
                    self.limits.cpu_ms
                ))
                }
                Some(sig) => {
                    return crash(format!(
                        "the parser crashed (signal {sig}); the file was not read"
                    ))
                }
                None => {}
            }
        }
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let last: String = last.chars().take(200).collect();
        crash(format!(
            "the parser failed ({status}{}{last}); the file was not read",
            if last.is_empty() { "" } else { ": " }
        ))
    }
}

#[async_trait]
impl Extractor for SandboxExtractor {
    async fn extract(&self, job: ExtractJob) -> Result<Extraction, ExtractFailure> {
        match self.run(job, Task::Extract).await? {
            Reply::Extracted(x) => Ok(*x),
            _ => Err(crash("the extraction worker answered another task".into())),
        }
    }

    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure> {
        match self.run(job, Task::Links).await? {
            Reply::Links(links) => Ok(links),
            _ => Err(crash("the extraction worker answered another task".into())),
        }
    }
}

fn crash(reason: String) -> ExtractFailure {
    ExtractFailure {
        code: "parse_crash",
        reason,
    }
}

fn limit(reason: String) -> ExtractFailure {
    ExtractFailure {
        code: "parse_limit",
        reason,
    }
}

/// The worker's code as one of the stable codes (anything else is a crash).
fn known_code(code: &str) -> &'static str {
    rag_ingest::IngestError::CODES
        .iter()
        .chain(&["parse_limit", "parse_crash"])
        .find(|c| **c == code)
        .copied()
        .unwrap_or("parse_crash")
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_mark_and_maps_codes() {
        let mut out = b"noise".to_vec();
        out.extend_from_slice(REPLY_MARK);
        out.extend_from_slice(b"x");
        out.extend_from_slice(REPLY_MARK);
        out.extend_from_slice(b"{}");
        assert_eq!(find_last(&out, REPLY_MARK), Some(5 + REPLY_MARK.len() + 1));
        assert_eq!(known_code("malformed_file"), "malformed_file");
        assert_eq!(known_code("anything"), "parse_crash");
    }
}
