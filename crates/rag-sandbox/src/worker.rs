//! The child's side: limit yourself, read one request, extract (or list a
//! page's links, or extract each file of a batch), reply.

use crate::protocol::{Reply, Request, Task, REPLY_MARK};
use rag_ingest::{extract, html_links, Limits};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::ExitCode;

/// Runs one extraction as the worker process: reads a [`Request`] line and
/// the bytes from `input`, sets the request's CPU-time and address-space
/// limits on this process (before parsing anything), extracts, and writes
/// the [`Reply`] to `output`. Exit code 0 whenever a reply was written (a
/// refused file included), 2 for a broken request.
///
/// Call it only in a process of its own: the limits apply to the whole
/// process, and a parser that crashes takes the process with it, which is
/// the point.
pub fn run_worker(input: impl Read, mut output: impl Write) -> ExitCode {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    if input.read_until(b'\n', &mut line).is_err() {
        eprintln!("extract worker: could not read the request");
        return ExitCode::from(2);
    }
    let request: Request = match serde_json::from_slice(&line) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("extract worker: bad request: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = limit_self(&request) {
        eprintln!("extract worker: could not set limits: {e}");
        return ExitCode::from(2);
    }
    // A batch's bytes are its items' bytes one after another, each within
    // the file limit.
    let cap = if request.task == Task::ExtractBatch {
        request
            .max_file_bytes
            .saturating_mul(request.items.len() as u64)
    } else {
        request.max_file_bytes
    };
    let mut bytes = Vec::with_capacity(request.len.min(cap) as usize);
    let read = (&mut input)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes);
    if read.is_err() || bytes.len() as u64 != request.len {
        eprintln!("extract worker: expected {} bytes", request.len);
        return ExitCode::from(2);
    }
    let limits = Limits {
        max_file_bytes: request.max_file_bytes,
        max_decompressed_bytes: request.max_decompressed_bytes,
    };
    let reply = match request.task {
        Task::ExtractBatch => {
            let total: u64 = request.items.iter().map(|i| i.len).sum();
            if total != request.len {
                eprintln!(
                    "extract worker: the items do not add up to {} bytes",
                    request.len
                );
                return ExitCode::from(2);
            }
            // A failpoint for the parent's tests of a batch that dies.
            rag_core::failpoint::hit("extract.worker.batch");
            let mut replies = Vec::with_capacity(request.items.len());
            let mut at = 0usize;
            for item in &request.items {
                let end = at + item.len as usize;
                let file = &bytes[at..end];
                at = end;
                replies.push(one(
                    Task::Extract,
                    &item.name,
                    item.media_type.as_deref(),
                    file,
                    &limits,
                ));
            }
            Reply::Batch(replies)
        }
        task => one(
            task,
            &request.name,
            request.media_type.as_deref(),
            &bytes,
            &limits,
        ),
    };
    drop(bytes);
    let written = output
        .write_all(REPLY_MARK)
        .and_then(|()| serde_json::to_writer(&mut output, &reply).map_err(std::io::Error::other))
        .and_then(|()| output.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("extract worker: could not write the reply: {e}");
            ExitCode::from(2)
        }
    }
}

/// One file's reply: extracted, links, or refused (a parser panic included).
fn one(task: Task, name: &str, media_type: Option<&str>, bytes: &[u8], limits: &Limits) -> Reply {
    // A failpoint for the parent's tests: spin, hog, stall or abort here.
    rag_core::failpoint::hit("extract.worker");
    let run = || match task {
        Task::Extract | Task::ExtractBatch => {
            extract(name, media_type, bytes, limits).map(|x| Reply::Extracted(Box::new(x)))
        }
        Task::Links => Ok(Reply::Links(html_links(&String::from_utf8_lossy(bytes)))),
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => Reply::Refused {
            code: e.code().to_owned(),
            message: e.to_string(),
        },
        Err(p) => Reply::Refused {
            code: "parse_crash".into(),
            message: format!("the parser panicked: {}", panic_text(&p)),
        },
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    let text = p
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    text.chars().take(200).collect()
}

/// CPU seconds (soft limit: SIGXCPU; hard, a second later: SIGKILL),
/// address space, and no core dumps. (No parent-death signal: Linux ties it
/// to the thread that started the child, and the runtime's threads come and
/// go; an orphan still dies at its CPU limit.)
#[cfg(unix)]
fn limit_self(r: &Request) -> Result<(), String> {
    use nix::sys::resource::{setrlimit, Resource};
    let cpu_s = r.cpu_ms.div_ceil(1000).max(1);
    setrlimit(Resource::RLIMIT_CPU, cpu_s, cpu_s + 1).map_err(|e| format!("RLIMIT_CPU: {e}"))?;
    let bytes = r.memory_mb.saturating_mul(1 << 20);
    setrlimit(Resource::RLIMIT_AS, bytes, bytes).map_err(|e| format!("RLIMIT_AS: {e}"))?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|e| format!("RLIMIT_CORE: {e}"))?;
    Ok(())
}

#[cfg(not(unix))]
fn limit_self(_: &Request) -> Result<(), String> {
    // Only the parent's wall-time limit applies here.
    Ok(())
}
