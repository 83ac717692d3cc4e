//! The parent's side: start a worker per file, feed it, watch it, classify
//! how it ended.

use crate::protocol::{Item, Reply, Request, Task, REPLY_MARK, WORKER_ARG};
use async_trait::async_trait;
use futures::StreamExt;
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
        let request = Request {
            task,
            name: job.name,
            media_type: job.media_type,
            max_file_bytes: job.limits.max_file_bytes,
            max_decompressed_bytes: job.limits.max_decompressed_bytes,
            cpu_ms: self.limits.cpu_ms,
            memory_mb: self.limits.memory_mb,
            len: job.bytes.len() as u64,
            items: Vec::new(),
        };
        let cap = Self::reply_cap(request.max_file_bytes);
        self.exchange(request, job.bytes, cap).await
    }

    /// Extracts several small files in one worker: one reply per job, in
    /// order. An error means the batch as a whole failed (a crash or a
    /// limit of the one worker), and says nothing about any one file.
    async fn run_batch(
        &self,
        jobs: &[ExtractJob],
    ) -> Result<Vec<Result<Extraction, ExtractFailure>>, ExtractFailure> {
        let Some(first) = jobs.first() else {
            return Ok(Vec::new());
        };
        let items: Vec<Item> = jobs
            .iter()
            .map(|j| Item {
                name: j.name.clone(),
                media_type: j.media_type.clone(),
                len: j.bytes.len() as u64,
            })
            .collect();
        let mut bytes = Vec::with_capacity(items.iter().map(|i| i.len as usize).sum());
        for j in jobs {
            bytes.extend_from_slice(&j.bytes);
        }
        let request = Request {
            task: Task::ExtractBatch,
            name: String::new(),
            media_type: None,
            max_file_bytes: first.limits.max_file_bytes,
            max_decompressed_bytes: first.limits.max_decompressed_bytes,
            cpu_ms: self.limits.cpu_ms,
            memory_mb: self.limits.memory_mb,
            len: bytes.len() as u64,
            items,
        };
        let cap = jobs.iter().fold(0u64, |c, j| {
            c.saturating_add(Self::reply_cap(j.limits.max_file_bytes))
        });
        match self.exchange(request, bytes, cap).await? {
            Reply::Batch(replies) if replies.len() == jobs.len() => Ok(replies
                .into_iter()
                .map(|r| match r {
                    Reply::Extracted(x) => Ok(*x),
                    Reply::Refused { code, message } => Err(ExtractFailure {
                        code: known_code(&code),
                        reason: message,
                    }),
                    _ => Err(crash("the extraction worker answered another task".into())),
                })
                .collect()),
            _ => Err(crash(
                "the extraction worker's batch reply was malformed".into(),
            )),
        }
    }

    /// Sends one request and its bytes to a new worker and reads its reply.
    async fn exchange(
        &self,
        request: Request,
        bytes: Vec<u8>,
        cap: u64,
    ) -> Result<Reply, ExtractFailure> {
        let started = Instant::now();
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
        // A worker that dies early closes its stdin: the write fails, and the
        // exit status says why.
        let write = async move {
            let _ = stdin.write_all(&header).await;
            let _ = stdin.write_all(&bytes).await;
            drop(stdin);
        };
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

    /// Small files go to workers in batches (one process start for many
    /// files, as many workers at once as there are cores); a batch whose
    /// worker crashed or ran over a limit is extracted again one file per
    /// worker, so a hostile file fails alone, with its own limits.
    async fn extract_many(&self, jobs: Vec<ExtractJob>) -> Vec<Result<Extraction, ExtractFailure>> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let groups = batch_groups(&jobs, workers);
        let jobs = &jobs;
        let mut done: Vec<(usize, Vec<Result<Extraction, ExtractFailure>>)> =
            futures::stream::iter(groups.into_iter().enumerate())
                .map(|(g, range)| async move {
                    let group = &jobs[range];
                    let results = if group.len() == 1 {
                        vec![self.extract(group[0].clone()).await]
                    } else {
                        match self.run_batch(group).await {
                            Ok(r) => r,
                            Err(e) => {
                                tracing::info!(files = group.len(), reason = %e.reason, "an extraction batch failed; extracting its files one by one");
                                let mut r = Vec::with_capacity(group.len());
                                for job in group {
                                    r.push(self.extract(job.clone()).await);
                                }
                                r
                            }
                        }
                    };
                    (g, results)
                })
                .buffer_unordered(workers)
                .collect()
                .await;
        done.sort_by_key(|(g, _)| *g);
        done.into_iter().flat_map(|(_, r)| r).collect()
    }

    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure> {
        match self.run(job, Task::Links).await? {
            Reply::Links(links) => Ok(links),
            _ => Err(crash("the extraction worker answered another task".into())),
        }
    }
}

/// Files up to this size may share a worker with others.
const BATCH_FILE_BYTES: usize = 256 << 10;
/// At most this many files share a worker...
const BATCH_FILES: usize = 64;
/// ...and at most this many bytes.
const BATCH_BYTES: usize = 4 << 20;

/// Splits the jobs, in order, into consecutive groups for workers: a large
/// file alone; small ones together, spread over `workers` groups (so every
/// core has one) within the batch caps.
fn batch_groups(jobs: &[ExtractJob], workers: usize) -> Vec<std::ops::Range<usize>> {
    let small = jobs
        .iter()
        .filter(|j| j.bytes.len() <= BATCH_FILE_BYTES)
        .count();
    let per_group = small.div_ceil(workers.max(1)).clamp(1, BATCH_FILES);
    let mut groups = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, job) in jobs.iter().enumerate() {
        let len = job.bytes.len();
        if len > BATCH_FILE_BYTES {
            if start < i {
                groups.push(start..i);
            }
            groups.push(i..i + 1);
            start = i + 1;
            bytes = 0;
            continue;
        }
        if i > start && (i - start >= per_group || bytes + len > BATCH_BYTES) {
            groups.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += len;
    }
    if start < jobs.len() {
        groups.push(start..jobs.len());
    }
    groups
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

    fn job(len: usize) -> ExtractJob {
        ExtractJob {
            name: "f.txt".into(),
            media_type: None,
            bytes: vec![b'a'; len],
            limits: rag_ingest::Limits::default(),
        }
    }

    #[test]
    fn small_files_share_workers_and_large_ones_go_alone() {
        let jobs: Vec<ExtractJob> = (0..10).map(|_| job(100)).collect();
        assert_eq!(batch_groups(&jobs, 2), vec![0..5, 5..10]);
        let mut jobs: Vec<ExtractJob> = (0..6).map(|_| job(100)).collect();
        jobs.insert(3, job(BATCH_FILE_BYTES + 1));
        assert_eq!(batch_groups(&jobs, 2), vec![0..3, 3..4, 4..7]);
        let jobs: Vec<ExtractJob> = (0..200).map(|_| job(10)).collect();
        let groups = batch_groups(&jobs, 2);
        assert!(groups.iter().all(|g| g.len() <= BATCH_FILES), "{groups:?}");
        assert_eq!(groups.iter().map(|g| g.len()).sum::<usize>(), 200);
        let jobs: Vec<ExtractJob> = (0..8).map(|_| job(BATCH_FILE_BYTES)).collect();
        let groups = batch_groups(&jobs, 1);
        assert!(groups
            .iter()
            .all(|g| g.len() * BATCH_FILE_BYTES <= BATCH_BYTES));
        assert!(batch_groups(&[], 2).is_empty());
    }

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
