//! The seam through which ingest turns a file's bytes into text: in this
//! process on a blocking thread (the default, for trusted input and tests),
//! or isolated in a child process with limits (`rag-sandbox`, what the
//! `ragscope` binary wires in).

use async_trait::async_trait;
use rag_ingest::{extract, Extraction, IngestError, Limits};

/// Why a file could not be extracted: a stable code and a reason for the
/// user. The codes are `rag_ingest`'s ([`IngestError::code`]) plus
/// `parse_limit` (the extraction ran over a time or memory limit) and
/// `parse_crash` (the parser crashed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractFailure {
    /// Stable snake_case code.
    pub code: &'static str,
    /// What happened, for the user.
    pub reason: String,
}

impl From<IngestError> for ExtractFailure {
    fn from(e: IngestError) -> Self {
        ExtractFailure {
            code: e.code(),
            reason: e.to_string(),
        }
    }
}

/// One file to extract.
#[derive(Debug, Clone)]
pub struct ExtractJob {
    /// The file's name or URL (its extension helps detect the format).
    pub name: String,
    /// A media type, for fetched pages.
    pub media_type: Option<String>,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Size limits.
    pub limits: Limits,
}

/// Turns a file into an [`Extraction`]. Implementations must never take
/// the process down, whatever the bytes: a failure is an [`ExtractFailure`]
/// for that one file.
#[async_trait]
pub trait Extractor: Send + Sync {
    /// Extracts one file. Dropping the future abandons the work.
    async fn extract(&self, job: ExtractJob) -> Result<Extraction, ExtractFailure>;

    /// Extracts several files: one result per job, in order. Bulk ingest
    /// calls this so an implementation can share work between small files
    /// (the sandbox runs many in one worker). By default, one after another.
    async fn extract_many(&self, jobs: Vec<ExtractJob>) -> Vec<Result<Extraction, ExtractFailure>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            out.push(self.extract(job).await);
        }
        out
    }

    /// The links of an HTML page, for the URL-source crawler
    /// ([`rag_ingest::html_links`]: at most [`rag_ingest::MAX_PAGE_LINKS`],
    /// in document order). Parsing a fetched page is parsing outside bytes,
    /// so it goes through the same isolation as [`Extractor::extract`].
    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure>;
}

/// Extraction in this process, on a blocking thread. A parser panic becomes
/// `parse_crash`; a stack overflow or an endless loop in a parser is *not*
/// contained, so servers that read untrusted files use an isolating
/// extractor instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcessExtractor;

#[async_trait]
impl Extractor for InProcessExtractor {
    async fn extract(&self, job: ExtractJob) -> Result<Extraction, ExtractFailure> {
        let run = move || {
            extract(
                &job.name,
                job.media_type.as_deref(),
                &job.bytes,
                &job.limits,
            )
        };
        match tokio::task::spawn_blocking(run).await {
            Ok(r) => r.map_err(ExtractFailure::from),
            Err(e) => Err(ExtractFailure {
                code: "parse_crash",
                reason: format!("the parser failed: {e}"),
            }),
        }
    }

    /// All at once on the blocking pool.
    async fn extract_many(&self, jobs: Vec<ExtractJob>) -> Vec<Result<Extraction, ExtractFailure>> {
        futures::future::join_all(jobs.into_iter().map(|j| self.extract(j))).await
    }

    async fn links(&self, job: ExtractJob) -> Result<Vec<String>, ExtractFailure> {
        let run = move || rag_ingest::html_links(&String::from_utf8_lossy(&job.bytes));
        tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| ExtractFailure {
                code: "parse_crash",
                reason: format!("the link parser failed: {e}"),
            })
    }
}
