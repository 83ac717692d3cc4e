//! Ingest as a job: options, per-file progress events by stage, and a summary.
//!
//! [`Engine::ingest_with`](crate::Engine::ingest_with) reports every file as a
//! sequence of [`IngestProgress`] events:
//!
//! ```text
//! received → extracted → chunked → embedded → indexed     (a document)
//! … → embedded → drafted → indexed                        (a document, knowledge base drafting FAQ entries automatically)
//! received → extracted → embedded → indexed               (an FAQ table)
//! received → … → skipped                                  (same content already stored)
//! received → … → failed {code, reason}                    (nothing of the file was stored)
//! ```
//!
//! Every file ends with exactly one of `indexed`, `skipped` or `failed`.
//! [`IngestSummary`] folds events into the totals a job reports at the end.

use rag_ingest::{ChunkParams, Format};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Counts the tokens of a text as the active embedder's tokenizer does.
pub type TokenCountFn = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// How a job ingests its files.
#[derive(Clone, Default)]
pub struct IngestOptions {
    /// Token counter for chunk sizes; `None` uses
    /// [`rag_ingest::ApproxTokenCounter`], which over-counts XLM-R pieces and
    /// so stays inside e5's 510-token window.
    pub token_counter: Option<TokenCountFn>,
    /// Chunk sizes, in tokens of the counter.
    pub chunk: ChunkParams,
    /// The media type of the bytes when known (`Content-Type` of a fetched
    /// URL); the file name and content decide otherwise.
    pub media_type: Option<String>,
    /// Set to stop the job: a file not yet committed fails with code
    /// `cancelled` and leaves nothing behind.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Restrict the ingested documents to this owner (FAQ tables stay
    /// visible to the whole tenant: FAQ entries carry no owner).
    pub owner: Option<String>,
}

impl std::fmt::Debug for IngestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestOptions")
            .field(
                "token_counter",
                &self.token_counter.as_ref().map(|_| "custom"),
            )
            .field("chunk", &self.chunk)
            .field("media_type", &self.media_type)
            .field("cancel", &self.cancel)
            .field("owner", &self.owner)
            .finish()
    }
}

impl IngestOptions {
    /// Options with these chunk sizes and the approximate token counter.
    pub fn new(chunk: ChunkParams) -> Self {
        IngestOptions {
            chunk,
            ..IngestOptions::default()
        }
    }

    /// Counts tokens with `counter` (the embedder's tokenizer).
    pub fn with_token_counter(mut self, counter: TokenCountFn) -> Self {
        self.token_counter = Some(counter);
        self
    }

    /// Sets the token counter.
    pub fn set_token_counter(&mut self, counter: Option<TokenCountFn>) {
        self.token_counter = counter;
    }

    /// Stops when `flag` is set.
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// One step of one file through an ingest job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum IngestProgress {
    /// The bytes were handed to the engine.
    Received {
        /// The file's name or path.
        source: String,
        /// Its size.
        bytes: u64,
    },
    /// The format was recognised and its text (or FAQ rows) extracted.
    Extracted {
        /// The file's name or path.
        source: String,
        /// What it was read as.
        format: Format,
        /// The text encoding it was decoded from (text-based formats).
        #[serde(skip_serializing_if = "Option::is_none")]
        encoding: Option<String>,
        /// Characters of extracted text (documents).
        #[serde(skip_serializing_if = "Option::is_none")]
        chars: Option<usize>,
        /// Pages (PDF).
        #[serde(skip_serializing_if = "Option::is_none")]
        pages: Option<usize>,
        /// FAQ entries read (FAQ tables).
        #[serde(skip_serializing_if = "Option::is_none")]
        entries: Option<usize>,
    },
    /// The document was split into chunks.
    Chunked {
        /// The file's name or path.
        source: String,
        /// Chunks.
        chunks: usize,
        /// Tokens of the largest chunk, by the job's counter.
        max_tokens: usize,
    },
    /// Vectors were made for the new passages (none when no embedder is configured).
    Embedded {
        /// The file's name or path.
        source: String,
        /// The embedding model, when one is configured.
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Vectors stored with the passages.
        vectors: usize,
        /// Of those, taken from the embedding cache (unchanged texts).
        cached: usize,
        /// Of those, computed by the model.
        computed: usize,
    },
    /// FAQ entries were drafted from the stored document by the LLM (a
    /// knowledge base with automatic drafting), or could not be: drafting
    /// never fails the file, which is stored already.
    Drafted {
        /// The file's name or path.
        source: String,
        /// Drafts stored.
        added: usize,
        /// Earlier unedited drafts of the document, or of the version it
        /// replaced, that were deleted (also when drafting failed).
        replaced: usize,
        /// Why entries of the LLM's reply were left out.
        dropped: Vec<String>,
        /// Why nothing was drafted.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<NotDrafted>,
    },
    /// The file was committed to the store in one atomic write.
    Indexed {
        /// The file's name or path.
        source: String,
        /// The knowledge base's commit sequence after the write.
        seq: u64,
        /// Chunks stored (documents).
        chunks: usize,
        /// FAQ entries added (FAQ tables).
        faqs_added: usize,
        /// FAQ entries already present (FAQ tables).
        faq_duplicates: usize,
        /// Whether an older version from the same source was replaced.
        replaced: bool,
    },
    /// Nothing to do: the same content is already stored.
    Skipped {
        /// The file's name or path.
        source: String,
        /// Why.
        reason: String,
    },
    /// The file was refused; nothing of it was stored.
    Failed {
        /// The file's name or path.
        source: String,
        /// A stable snake_case code (`no_text_layer`, `unsupported_format`,
        /// `too_large`, `bad_record`, `read_error`, `cancelled`, ...).
        code: String,
        /// A sentence for people.
        reason: String,
    },
}

impl IngestProgress {
    /// The file the event is about.
    pub fn source(&self) -> &str {
        match self {
            IngestProgress::Received { source, .. }
            | IngestProgress::Extracted { source, .. }
            | IngestProgress::Chunked { source, .. }
            | IngestProgress::Embedded { source, .. }
            | IngestProgress::Drafted { source, .. }
            | IngestProgress::Indexed { source, .. }
            | IngestProgress::Skipped { source, .. }
            | IngestProgress::Failed { source, .. } => source,
        }
    }

    /// The stage name as serialised (`received`, `extracted`, ...).
    pub fn stage(&self) -> &'static str {
        match self {
            IngestProgress::Received { .. } => "received",
            IngestProgress::Extracted { .. } => "extracted",
            IngestProgress::Chunked { .. } => "chunked",
            IngestProgress::Embedded { .. } => "embedded",
            IngestProgress::Drafted { .. } => "drafted",
            IngestProgress::Indexed { .. } => "indexed",
            IngestProgress::Skipped { .. } => "skipped",
            IngestProgress::Failed { .. } => "failed",
        }
    }

    /// Whether this is a file's last event.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            IngestProgress::Indexed { .. }
                | IngestProgress::Skipped { .. }
                | IngestProgress::Failed { .. }
        )
    }

    /// A failure event.
    pub fn failed(
        source: impl Into<String>,
        code: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        IngestProgress::Failed {
            source: source.into(),
            code: code.into(),
            reason: reason.into(),
        }
    }
}

/// Why no FAQ entries were drafted from a stored document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotDrafted {
    /// A stable snake_case code (`no_llm`, `llm_failed`, `drafts_rejected`, ...).
    pub code: String,
    /// A sentence for people.
    pub reason: String,
}

/// A file that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedFile {
    /// The file's name or path.
    pub source: String,
    /// Why.
    pub reason: String,
}

/// Totals of a job, folded from its events.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IngestSummary {
    /// Files seen.
    pub files: usize,
    /// Documents stored.
    pub documents: usize,
    /// Of those, replacing an older version from the same source.
    pub replaced: usize,
    /// Chunks stored.
    pub chunks: usize,
    /// FAQ entries added.
    pub faqs_added: usize,
    /// FAQ entries already present.
    pub faq_duplicates: usize,
    /// Vectors taken from the embedding cache.
    pub vectors_cached: usize,
    /// Vectors computed by the model.
    pub vectors_computed: usize,
    /// FAQ entries drafted by the LLM (knowledge bases drafting automatically).
    pub drafts_added: usize,
    /// Stored documents no FAQ entries could be drafted from, and why.
    pub drafts_failed: Vec<FailedFile>,
    /// Files skipped (same content already stored).
    pub skipped: usize,
    /// Failed files by error code.
    pub failed: BTreeMap<String, Vec<FailedFile>>,
}

impl IngestSummary {
    /// Folds one event in.
    pub fn record(&mut self, event: &IngestProgress) {
        match event {
            IngestProgress::Received { .. } => self.files += 1,
            IngestProgress::Extracted { .. } | IngestProgress::Chunked { .. } => {}
            IngestProgress::Embedded {
                cached, computed, ..
            } => {
                self.vectors_cached += cached;
                self.vectors_computed += computed;
            }
            IngestProgress::Drafted {
                source,
                added,
                error,
                ..
            } => {
                self.drafts_added += added;
                if let Some(e) = error {
                    self.drafts_failed.push(FailedFile {
                        source: source.clone(),
                        reason: e.reason.clone(),
                    });
                }
            }
            IngestProgress::Indexed {
                chunks,
                faqs_added,
                faq_duplicates,
                replaced,
                ..
            } => {
                if *chunks > 0 {
                    self.documents += 1;
                }
                self.chunks += chunks;
                self.faqs_added += faqs_added;
                self.faq_duplicates += faq_duplicates;
                self.replaced += usize::from(*replaced);
            }
            IngestProgress::Skipped { .. } => self.skipped += 1,
            IngestProgress::Failed {
                source,
                code,
                reason,
            } => self
                .failed
                .entry(code.clone())
                .or_default()
                .push(FailedFile {
                    source: source.clone(),
                    reason: reason.clone(),
                }),
        }
    }

    /// Number of failed files.
    pub fn failed_count(&self) -> usize {
        self.failed.values().map(Vec::len).sum()
    }
}
