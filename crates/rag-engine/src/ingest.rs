//! Ingest: files into documents with chunks, or into FAQ entries; each file is one atomic write.
//!
//! Extraction and chunking are `rag_ingest`'s; this module runs them off the
//! async runtime, embeds through the cache, writes, and reports progress.

use crate::chunk::{split, to_chunks};
use crate::drafts::DraftFailure;
use crate::embed::{hex_sha256, text_hash, EmbedStats};
use crate::engine::Engine;
use crate::job::NotDrafted;
use crate::job::{IngestOptions, IngestProgress};
use crate::pipeline::error_code;
use rag_core::{
    chunk_title, now, CoreError, DocId, Document, EmbeddingSpace, Fact, FactId, FaqEntry, FaqId,
    PassageId, PassageVector, SynonymGroup, TenantId, UserError, UserWord, WriteOp,
};
use rag_ingest::{check_size, Content, Limits};
use serde::Serialize;

/// The refusal of a file whose job was cancelled before its write.
fn cancelled() -> (&'static str, String) {
    (
        "cancelled",
        "the job was cancelled before this file was stored; nothing of it was stored".into(),
    )
}

/// What happened to one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum IngestStatus {
    /// A document was stored with this many chunks.
    Document {
        /// Chunks.
        chunks: usize,
        /// Whether an older version from the same source was replaced.
        replaced: bool,
    },
    /// FAQ entries were stored.
    Faqs {
        /// New entries.
        added: usize,
        /// Entries already present (same question and answer).
        duplicates: usize,
    },
    /// Nothing to do: the same content is already in the knowledge base.
    Skipped {
        /// Why.
        reason: String,
    },
    /// The input was rejected; nothing of it was stored.
    Failed {
        /// A stable snake_case code (`parse_limit`, `no_text_layer`,
        /// `too_large`, ...), as in [`IngestProgress::Failed`].
        code: String,
        /// Why.
        reason: String,
    },
}

/// The outcome for one input.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IngestOutcome {
    /// The input's name or path.
    pub source: String,
    /// What happened.
    #[serde(flatten)]
    pub status: IngestStatus,
}

impl Engine {
    /// Ingests one file with the engine's chunk sizes and the approximate
    /// token counter. Never fails for a bad file: problems are reported in
    /// the outcome. See [`Engine::ingest_with`].
    pub async fn ingest(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        source: &str,
        bytes: Vec<u8>,
    ) -> Result<IngestOutcome, CoreError> {
        let options = IngestOptions::new(self.config().chunk);
        self.ingest_with(tenant, kb_name, source, bytes, &options, &mut |_| {})
            .await
    }

    /// The limits files are checked against (the engine's largest file).
    pub fn ingest_limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.config().max_file_bytes as u64,
            ..Limits::default()
        }
    }

    /// Ingests one file as a step of a job, reporting each stage to
    /// `progress` (see [`IngestProgress`]): the file is extracted by
    /// [`rag_ingest::extract`] (TXT, Markdown, HTML, PDF, DOCX, FAQ
    /// JSONL/CSV), a document is chunked by [`rag_ingest::chunk`] with the
    /// options' token counter, new passages are embedded through the
    /// embedding cache (an unchanged chunk of a re-ingested file takes its
    /// vector from there), and everything is committed in one atomic write.
    ///
    /// The same bytes twice are skipped; a changed file from the same source
    /// replaces the older document. A bad file fails with a code and a
    /// reason and leaves nothing behind; the error result is kept for what
    /// should stop a whole job (unknown knowledge base, invalid options,
    /// vectors of another model, a failing store), and even then the file's
    /// last event is `failed`.
    pub async fn ingest_with(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        source: &str,
        bytes: Vec<u8>,
        options: &IngestOptions,
        progress: &mut (dyn FnMut(IngestProgress) + Send),
    ) -> Result<IngestOutcome, CoreError> {
        progress(IngestProgress::Received {
            source: source.to_owned(),
            bytes: bytes.len() as u64,
        });
        let result = self
            .ingest_stages(tenant, kb_name, source, bytes, options, progress)
            .await;
        let status = match result {
            Ok(Ok(status)) => status,
            Ok(Err((code, reason))) => {
                tracing::warn!(kb = kb_name, source, code, %reason, "file rejected");
                progress(IngestProgress::failed(source, code, reason.clone()));
                IngestStatus::Failed {
                    code: code.to_owned(),
                    reason,
                }
            }
            Err(e) => {
                progress(IngestProgress::failed(
                    source,
                    error_code(&e),
                    e.to_string(),
                ));
                return Err(e);
            }
        };
        if let IngestStatus::Skipped { reason } = &status {
            progress(IngestProgress::Skipped {
                source: source.to_owned(),
                reason: reason.clone(),
            });
        }
        Ok(IngestOutcome {
            source: source.to_owned(),
            status,
        })
    }

    /// The stages after `received`. The inner error is a refused file
    /// (code, reason); the outer one stops the job.
    async fn ingest_stages(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        source: &str,
        bytes: Vec<u8>,
        options: &IngestOptions,
        progress: &mut (dyn FnMut(IngestProgress) + Send),
    ) -> Result<Result<IngestStatus, (&'static str, String)>, CoreError> {
        options
            .chunk
            .validate()
            .map_err(|e| UserError::InvalidParam {
                name: "chunk",
                reason: e.to_string(),
            })?;
        let kb = self.kb(tenant, kb_name).await?;
        let limits = self.ingest_limits();
        if let Err(e) = check_size(bytes.len() as u64, &limits) {
            return Ok(Err((e.code(), e.to_string())));
        }
        let store = self.store();
        // The same bytes are already a document: skip before extracting anything.
        let hash = hex_sha256(&bytes);
        if store
            .document_by_hash(tenant, kb.id, &hash, options.owner.as_deref())
            .await?
            .is_some()
        {
            return Ok(Ok(IngestStatus::Skipped {
                reason: "already ingested (same content)".into(),
            }));
        }
        if options.cancelled() {
            return Ok(Err(cancelled()));
        }

        let job = crate::ExtractJob {
            name: source.to_owned(),
            media_type: options.media_type.clone(),
            bytes,
            limits,
        };
        let extraction = match self.extractor().extract(job).await {
            Ok(x) => x,
            Err(e) => return Ok(Err((e.code, e.reason))),
        };
        let format = extraction.format;
        match extraction.content {
            Content::Document(doc) => {
                progress(IngestProgress::Extracted {
                    source: source.to_owned(),
                    format,
                    encoding: doc.encoding.as_ref().map(|e| e.name().to_owned()),
                    chars: Some(doc.text.chars().count()),
                    pages: (!doc.pages.is_empty()).then_some(doc.pages.len()),
                    entries: None,
                });
                // Chunk sizes in tokens of the active embedder's own tokenizer
                // when it can count locally (e5, BERT-family), else the caller's
                // or the approximate counter.
                let counter = options.token_counter.clone().or_else(|| {
                    let model = self.embedder()?.model().clone();
                    model.count_tokens("probe")?;
                    let approx = rag_ingest::ApproxTokenCounter;
                    Some(std::sync::Arc::new(move |s: &str| {
                        model
                            .count_tokens(s)
                            .unwrap_or_else(|| rag_ingest::TokenCounter::count_tokens(&approx, s))
                    }) as crate::job::TokenCountFn)
                });
                let params = options.chunk;
                let (doc, pieces) = blocking(move || {
                    let pieces = split(&doc, &params, counter.as_ref());
                    (doc, pieces)
                })
                .await?;
                let pieces = pieces.map_err(|e| UserError::InvalidParam {
                    name: "chunk",
                    reason: e.to_string(),
                })?;
                if pieces.is_empty() {
                    return Ok(Err(("empty_file", "no text to index".into())));
                }
                progress(IngestProgress::Chunked {
                    source: source.to_owned(),
                    chunks: pieces.len(),
                    max_tokens: pieces.iter().map(|c| c.tokens).max().unwrap_or(0),
                });
                let title = doc
                    .title
                    .clone()
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_else(|| file_stem(source));
                let doc_id = DocId::generate();
                let chunks = to_chunks(doc_id, pieces);
                let texts: Vec<(PassageId, String)> = chunks
                    .iter()
                    .map(|c| {
                        (
                            PassageId::Chunk(c.id),
                            format!("{}\n{}", chunk_title(&title, &c.heading_path), c.text),
                        )
                    })
                    .collect();
                if options.cancelled() {
                    return Ok(Err(cancelled()));
                }
                let (vectors, stats) = match self.embed_for_ingest(tenant, kb.id, texts).await {
                    Ok(v) => v,
                    Err(e) if embedding_failure(&e) => {
                        return Ok(Err(("embedding_failed", e.to_string())))
                    }
                    Err(e) => return Err(e),
                };
                progress(self.embedded_event(source, &stats));
                // The older versions of this source, by index (not a listing
                // of every document per file, which made ingest quadratic).
                let older: Vec<DocId> = store
                    .document_by_source(tenant, kb.id, source, options.owner.as_deref())
                    .await?;
                let replaced = !older.is_empty();
                // Unedited drafts of the older version, which this write deletes (reported when drafting again).
                let old_drafts = if replaced && kb.settings.drafts.auto {
                    store
                        .faqs(tenant, kb.id)
                        .await?
                        .iter()
                        .filter(|f| !f.edited && f.source_doc.is_some_and(|d| older.contains(&d)))
                        .count()
                } else {
                    0
                };
                let ts = now();
                let n = chunks.len();
                let document = Document {
                    id: doc_id,
                    kb: kb.id,
                    title,
                    source: source.to_owned(),
                    content_hash: hash,
                    tags: Vec::new(),
                    created_at: ts,
                    updated_at: ts,
                    text: doc.text,
                    owner: options.owner.clone(),
                };
                let stored = kb.settings.drafts.auto.then(|| document.clone());
                // The vectors go in the same atomic write, after the document they belong to.
                let mut ops = vec![WriteOp::PutDocument { document, chunks }];
                ops.extend(vectors);
                // Re-sync: drafts a person edited follow the new version; the
                // older version goes with its unedited drafts.
                for old in older {
                    ops.push(WriteOp::RelinkDrafts {
                        from: old,
                        to: doc_id,
                    });
                    ops.push(WriteOp::DeleteDocument(old));
                }
                if options.cancelled() {
                    return Ok(Err(cancelled()));
                }
                let seq = store.apply(tenant, kb.id, ops).await?;
                tracing::info!(kb = %kb.name, source, format = format.as_str(), chunks = n, replaced, seq, "document ingested");
                if let Some(stored) = stored {
                    progress(
                        self.auto_draft(tenant, &kb, stored, old_drafts, options)
                            .await,
                    );
                }
                progress(IngestProgress::Indexed {
                    source: source.to_owned(),
                    seq,
                    chunks: n,
                    faqs_added: 0,
                    faq_duplicates: 0,
                    replaced,
                });
                Ok(Ok(IngestStatus::Document {
                    chunks: n,
                    replaced,
                }))
            }
            Content::Faqs { rows, encoding } => {
                progress(IngestProgress::Extracted {
                    source: source.to_owned(),
                    format,
                    encoding: Some(encoding.name().to_owned()),
                    chars: None,
                    pages: None,
                    entries: Some(rows.len()),
                });
                let existing = store.faqs(tenant, kb.id).await?;
                let ts = now();
                let mut duplicates = 0;
                let mut ops = Vec::new();
                for r in rows {
                    let present = existing
                        .iter()
                        .any(|e| e.question == r.question && e.answer == r.answer);
                    let repeated = ops.iter().any(|o| matches!(o, WriteOp::PutFaq(f) if f.question == r.question && f.answer == r.answer));
                    if present || repeated {
                        duplicates += 1;
                        continue;
                    }
                    ops.push(WriteOp::PutFaq(FaqEntry {
                        id: FaqId::generate(),
                        kb: kb.id,
                        question: r.question,
                        answer: r.answer,
                        status: r.status,
                        edited: false,
                        source_url: r.source_url,
                        tags: r.tags,
                        created_at: ts,
                        updated_at: ts,
                        valid_from: r.valid_from,
                        valid_until: r.valid_until,
                        source_doc: None,
                    }));
                }
                let added = ops.len();
                if added == 0 {
                    return Ok(Ok(IngestStatus::Skipped {
                        reason: format!("all {duplicates} entries already present"),
                    }));
                }
                let texts: Vec<(PassageId, String)> = ops
                    .iter()
                    .filter_map(|o| match o {
                        WriteOp::PutFaq(f) => Some((
                            PassageId::Faq(f.id),
                            format!("{}: {}", f.question, f.answer),
                        )),
                        _ => None,
                    })
                    .collect();
                if options.cancelled() {
                    return Ok(Err(cancelled()));
                }
                let (vectors, stats) = match self.embed_for_ingest(tenant, kb.id, texts).await {
                    Ok(v) => v,
                    Err(e) if embedding_failure(&e) => {
                        return Ok(Err(("embedding_failed", e.to_string())))
                    }
                    Err(e) => return Err(e),
                };
                progress(self.embedded_event(source, &stats));
                ops.extend(vectors);
                if options.cancelled() {
                    return Ok(Err(cancelled()));
                }
                let seq = store.apply(tenant, kb.id, ops).await?;
                tracing::info!(kb = %kb.name, source, added, duplicates, seq, "FAQ entries ingested");
                progress(IngestProgress::Indexed {
                    source: source.to_owned(),
                    seq,
                    chunks: 0,
                    faqs_added: added,
                    faq_duplicates: duplicates,
                    replaced: false,
                });
                Ok(Ok(IngestStatus::Faqs { added, duplicates }))
            }
        }
    }

    /// Drafts FAQ entries from a document just stored, for a knowledge base
    /// that drafts automatically. Never fails the ingest: the outcome or the
    /// reason nothing was drafted is the `drafted` event.
    async fn auto_draft(
        &self,
        tenant: &TenantId,
        kb: &rag_core::KnowledgeBase,
        document: Document,
        old_drafts: usize,
        options: &IngestOptions,
    ) -> IngestProgress {
        let source = document.source.clone();
        let failed = |code: &str, reason: String| IngestProgress::Drafted {
            source: source.clone(),
            added: 0,
            replaced: old_drafts,
            dropped: Vec::new(),
            error: Some(NotDrafted {
                code: code.to_owned(),
                reason,
            }),
        };
        if options.cancelled() {
            return failed(
                "cancelled",
                "the job was cancelled after the document was stored; no FAQ entries were drafted"
                    .into(),
            );
        }
        if document.owner.is_some() {
            let e = DraftFailure::Restricted { doc: document.id };
            return failed(e.code(), e.to_string());
        }
        let Some(generator) = self.generator() else {
            return failed(DraftFailure::NoLlm.code(), DraftFailure::NoLlm.to_string());
        };
        match self.draft_document(tenant, kb, document, generator).await {
            Ok(o) => IngestProgress::Drafted {
                source: source.clone(),
                added: o.added.len(),
                replaced: old_drafts + o.replaced,
                dropped: o.dropped,
                error: None,
            },
            Err(e) => {
                tracing::warn!(kb = %kb.name, source = %source, error = %e, "automatic FAQ drafting failed");
                failed(e.code(), e.to_string())
            }
        }
    }

    fn embedded_event(&self, source: &str, stats: &Option<EmbedStats>) -> IngestProgress {
        let s = stats.unwrap_or_default();
        IngestProgress::Embedded {
            source: source.to_owned(),
            model: self.embedder().map(|e| e.model().model_id().to_owned()),
            vectors: s.cached + s.computed,
            cached: s.cached,
            computed: s.computed,
        }
    }

    /// Embeds `texts` for storing beside their passages, when an embedder is
    /// configured; refuses when the knowledge base's vectors come from another model.
    pub(crate) async fn vectors_for(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        texts: Vec<(PassageId, String)>,
    ) -> Result<Option<WriteOp>, CoreError> {
        Ok(self.embed_for_ingest(tenant, kb, texts).await?.0)
    }

    /// [`Engine::vectors_for`] with how many vectors came from the cache and
    /// how many were computed (`None` without an embedder or texts).
    async fn embed_for_ingest(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        texts: Vec<(PassageId, String)>,
    ) -> Result<(Option<WriteOp>, Option<EmbedStats>), CoreError> {
        let Some(embedder) = self.embedder() else {
            return Ok((None, None));
        };
        if texts.is_empty() {
            return Ok((None, None));
        }
        let space = self.store().embedding_space(tenant, kb).await?;
        self.check_space(space.as_ref(), &embedder, 0)?;
        let strings: Vec<String> = texts.iter().map(|(_, t)| t.clone()).collect();
        let (vectors, stats) = embedder
            .embed_documents(&strings, self.config().embed_batch)
            .await?;
        let dims = vectors.first().map_or(0, Vec::len);
        self.check_space(space.as_ref(), &embedder, dims)?;
        let vectors = texts
            .into_iter()
            .zip(vectors)
            .map(|((id, text), vector)| PassageVector {
                id,
                text_hash: text_hash(&text),
                vector,
            })
            .collect();
        let op = WriteOp::PutVectors {
            space: EmbeddingSpace {
                model_id: embedder.model().model_id().to_owned(),
                dims,
            },
            vectors,
        };
        Ok((Some(op), Some(stats)))
    }

    /// Adds synonym groups to a knowledge base (groups already present are skipped).
    pub async fn add_synonyms(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        groups: Vec<SynonymGroup>,
    ) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let existing = self.store().snapshot(tenant, kb.id).await?.synonyms;
        let ops: Vec<WriteOp> = groups
            .into_iter()
            .filter(|g| !existing.contains(g))
            .map(WriteOp::AddSynonyms)
            .collect();
        let n = ops.len();
        if n > 0 {
            self.store().apply(tenant, kb.id, ops).await?;
        }
        Ok(n)
    }

    /// Adds or replaces structured facts (by key).
    pub async fn put_facts(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        facts: Vec<(String, String, Vec<String>)>,
    ) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let snapshot = self.store().snapshot(tenant, kb.id).await?;
        let mut ops: Vec<WriteOp> = Vec::new();
        for (key, value, key_synonyms) in facts {
            let existing = snapshot.passages.iter().find_map(|p| match p.id {
                rag_core::PassageId::Fact(id) if p.title == key => {
                    Some((id, p.body == value && p.aliases == key_synonyms))
                }
                _ => None,
            });
            match existing {
                Some((_, true)) => continue,
                Some((id, false)) => ops.push(WriteOp::PutFact(Fact {
                    id,
                    kb: kb.id,
                    key,
                    value,
                    key_synonyms,
                })),
                None => ops.push(WriteOp::PutFact(Fact {
                    id: FactId::generate(),
                    kb: kb.id,
                    key,
                    value,
                    key_synonyms,
                })),
            }
        }
        let n = ops.len();
        if n > 0 {
            let texts: Vec<(PassageId, String)> = ops
                .iter()
                .filter_map(|o| match o {
                    WriteOp::PutFact(f) => {
                        Some((PassageId::Fact(f.id), format!("{}: {}", f.key, f.value)))
                    }
                    _ => None,
                })
                .collect();
            if let Some(op) = self.vectors_for(tenant, kb.id, texts).await? {
                ops.push(op);
            }
            self.store().apply(tenant, kb.id, ops).await?;
        }
        Ok(n)
    }

    /// Adds words to the knowledge base's segmenter dictionary.
    pub async fn add_user_words(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        words: Vec<UserWord>,
    ) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let n = words.len();
        if n > 0 {
            self.store()
                .apply(
                    tenant,
                    kb.id,
                    words.into_iter().map(WriteOp::AddUserWord).collect(),
                )
                .await?;
        }
        Ok(n)
    }
}

/// Runs CPU work (extraction, chunking) on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CoreError::Component {
            component: "ingest".into(),
            message: e.to_string(),
        })
}

/// An embedder that failed (a model or endpoint error) fails the file, not the job.
fn embedding_failure(e: &CoreError) -> bool {
    matches!(e, CoreError::Component { .. })
}

/// The file name without directories and extension: the title of a document without one.
fn file_stem(source: &str) -> String {
    let last = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let stem = last.rsplit_once('.').map_or(last, |(s, _)| s);
    if stem.is_empty() {
        last.to_owned()
    } else {
        stem.to_owned()
    }
}
