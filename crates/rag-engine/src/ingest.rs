//! Ingest: files into documents with chunks, or into FAQ entries; each file is one atomic write.
//!
//! Extraction and chunking are `rag_ingest`'s; this module runs them off the
//! async runtime, embeds through the cache, writes, and reports progress.

use crate::drafts::DraftFailure;
use crate::embed::{text_hash, EmbedStats};
use crate::engine::Engine;
use crate::ingest_batch::IngestFile;
use crate::job::NotDrafted;
use crate::job::{IngestOptions, IngestProgress};
use rag_core::{
    now, CoreError, Document, EmbeddingSpace, Fact, FactId, FaqEntry, FaqId, PassageId,
    PassageVector, SynonymGroup, TenantId, UserWord, WriteOp,
};
use rag_ingest::Limits;
use serde::Serialize;

/// The refusal of a file whose job was cancelled before its write.
pub(crate) fn cancelled() -> (&'static str, String) {
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
        let file = IngestFile {
            source: source.to_owned(),
            bytes,
        };
        let mut outcomes = self
            .ingest_batch(tenant, kb_name, vec![file], options, progress)
            .await?;
        outcomes.pop().ok_or_else(|| CoreError::Component {
            component: "ingest".into(),
            message: "no outcome for the file".into(),
        })
    }

    /// Stores the rows of an FAQ table as entries (rows whose question and
    /// answer are already present are counted, not added), with their
    /// vectors, in one write.
    pub(crate) async fn ingest_faq_rows(
        &self,
        tenant: &TenantId,
        kb: &rag_core::KnowledgeBase,
        source: &str,
        rows: Vec<rag_ingest::FaqRow>,
        options: &IngestOptions,
        progress: &mut (dyn FnMut(IngestProgress) + Send),
    ) -> Result<Result<IngestStatus, (&'static str, String)>, CoreError> {
        // The (question, answer) pairs already there, by their sha256 (read
        // a page at a time, so a large knowledge base is not held), and
        // those of the rows taken so far.
        let pair = |q: &str, a: &str| text_hash(&format!("{q}\u{0}{a}"));
        let mut seen = std::collections::HashSet::new();
        self.each_faq_page(tenant, kb.id, |page| {
            seen.extend(page.iter().map(|e| pair(&e.question, &e.answer)));
            Ok(())
        })
        .await?;
        let ts = now();
        let mut duplicates = 0;
        let mut ops = Vec::new();
        for r in rows {
            if !seen.insert(pair(&r.question, &r.answer)) {
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
        let second: Vec<crate::second::SecondSource> = ops
            .iter()
            .filter_map(|o| match o {
                WriteOp::PutFaq(f) => Some(crate::second::SecondSource::faq(f)),
                _ => None,
            })
            .collect();
        let embedded = async {
            let first = self.embed_for_ingest(tenant, kb.id, texts).await?;
            Ok::<_, CoreError>((first, self.second_ops(&second).await?))
        };
        let ((vectors, stats), second) = match embedded.await {
            Ok(v) => v,
            Err(e) if embedding_failure(&e) => return Ok(Err(("embedding_failed", e.to_string()))),
            Err(e) => return Err(e),
        };
        progress(self.embedded_event(source, &stats));
        ops.extend(vectors);
        ops.extend(second);
        if options.cancelled() {
            return Ok(Err(cancelled()));
        }
        let seq = self.store().apply(tenant, kb.id, ops).await?;
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

    /// Drafts FAQ entries from a document just stored, for a knowledge base
    /// that drafts automatically. Never fails the ingest: the outcome or the
    /// reason nothing was drafted is the `drafted` event.
    pub(crate) async fn auto_draft(
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

    pub(crate) fn embedded_event(
        &self,
        source: &str,
        stats: &Option<EmbedStats>,
    ) -> IngestProgress {
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
        Ok(match self.embed_passages(tenant, kb, texts).await? {
            Some((space, vectors, marks)) => (
                Some(WriteOp::PutVectors { space, vectors }),
                Some(EmbedStats::of(&marks)),
            ),
            None => (None, None),
        })
    }

    /// Embeds passages through the cache, when an embedder is configured
    /// and there are texts: their space, their vectors in order, and per
    /// passage whether the vector came from the cache. Refuses when the
    /// knowledge base's vectors come from another model.
    pub(crate) async fn embed_passages(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        texts: Vec<(PassageId, String)>,
    ) -> Result<Option<(EmbeddingSpace, Vec<PassageVector>, Vec<bool>)>, CoreError> {
        let Some(embedder) = self.embedder() else {
            return Ok(None);
        };
        if texts.is_empty() {
            return Ok(None);
        }
        let space = self.store().embedding_space(tenant, kb).await?;
        self.check_space(space.as_ref(), &embedder, 0)?;
        let strings: Vec<String> = texts.iter().map(|(_, t)| t.clone()).collect();
        let (vectors, marks) = embedder
            .embed_documents_marked(&strings, self.config().embed_batch)
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
        let space = EmbeddingSpace {
            model_id: embedder.model().model_id().to_owned(),
            dims,
        };
        Ok(Some((space, vectors, marks)))
    }

    /// Adds synonym groups to a knowledge base (groups already present are skipped).
    pub async fn add_synonyms(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        groups: Vec<SynonymGroup>,
    ) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let existing = self.store().lexicon_snapshot(tenant, kb.id).await?.synonyms;
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
        let snapshot = self.store().lexicon_snapshot(tenant, kb.id).await?;
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

/// An embedder that failed (a model or endpoint error) fails the file, not the job.
pub(crate) fn embedding_failure(e: &CoreError) -> bool {
    matches!(e, CoreError::Component { .. })
}

/// The file name without directories and extension: the title of a document without one.
pub(crate) fn file_stem(source: &str) -> String {
    let last = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let stem = last.rsplit_once('.').map_or(last, |(s, _)| s);
    if stem.is_empty() {
        last.to_owned()
    } else {
        stem.to_owned()
    }
}
