//! The worker protocol. The parent writes one JSON line ([`Request`]) and
//! then the file's bytes to the child's stdin and closes it; the child
//! writes [`REPLY_MARK`] and one JSON [`Reply`] to its stdout and exits 0.
//! A batch ([`Task::ExtractBatch`]) carries several small files: the
//! request lists them in [`Request::items`], their bytes follow one after
//! another, and the reply is one [`Reply::Batch`] with a reply per file.
//! The mark holds a NUL byte, which JSON output never contains, so anything
//! a library may print to stdout before the reply cannot be taken for it.

use rag_ingest::Extraction;
use serde::{Deserialize, Serialize};

/// The first argument that turns the binary into an extraction worker.
pub const WORKER_ARG: &str = "__extract-worker";

/// Precedes the reply on the child's stdout.
pub const REPLY_MARK: &[u8] = b"\0ragscope-extract-reply\n";

/// What the worker does with the bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Extract the file's text ([`Reply::Extracted`]).
    #[default]
    Extract,
    /// List an HTML page's links for the crawler ([`Reply::Links`]).
    Links,
    /// Extract each file of [`Request::items`] ([`Reply::Batch`]).
    ExtractBatch,
}

/// One file of a batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Item {
    /// The file's name or URL.
    pub name: String,
    /// A media type, for fetched pages.
    pub media_type: Option<String>,
    /// Its number of bytes, in the order of the items.
    pub len: u64,
}

/// What to extract, and the limits the child sets on itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// What to do.
    #[serde(default)]
    pub task: Task,
    /// The file's name or URL.
    pub name: String,
    /// A media type, for fetched pages.
    pub media_type: Option<String>,
    /// `rag_ingest::Limits::max_file_bytes`.
    pub max_file_bytes: u64,
    /// `rag_ingest::Limits::max_decompressed_bytes`.
    pub max_decompressed_bytes: u64,
    /// CPU time, in milliseconds (the kernel counts whole seconds: rounded up).
    pub cpu_ms: u64,
    /// Address space, in MiB.
    pub memory_mb: u64,
    /// Number of bytes that follow the request line (for a batch, the sum
    /// of the items' lengths).
    pub len: u64,
    /// The files of a [`Task::ExtractBatch`] (empty otherwise).
    #[serde(default)]
    pub items: Vec<Item>,
}

/// The child's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The file's text and structure.
    Extracted(Box<Extraction>),
    /// A page's links (`rag_ingest::html_links`).
    Links(Vec<String>),
    /// One reply per item of a batch, in order (each `Extracted` or `Refused`).
    Batch(Vec<Reply>),
    /// The file was refused (`rag_ingest`'s code and message).
    Refused {
        /// `IngestError::code`, or `parse_crash` for a parser panic.
        code: String,
        /// The reason.
        message: String,
    },
}
