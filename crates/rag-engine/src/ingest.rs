//! Ingest: files into documents with chunks, or into FAQ entries; each file is one atomic write.

use crate::chunk::chunk_text;
use crate::engine::Engine;
use crate::parse::{parse_file, Parsed};
use crate::embed::{hex_sha256, text_hash};
use rag_core::{
    chunk_title, now, Chunk, ChunkId, CoreError, DocId, Document, EmbeddingSpace, Fact, FactId, FaqEntry, FaqId, PassageId,
    PassageVector, SynonymGroup, TenantId, UserWord, WriteOp,
};
use serde::Serialize;

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
    /// Ingests one file. Never fails as a whole: problems are reported in the outcome.
    pub async fn ingest(&self, tenant: &TenantId, kb_name: &str, source: &str, bytes: Vec<u8>) -> Result<IngestOutcome, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let outcome = |status| IngestOutcome { source: source.to_owned(), status };
        if bytes.len() > self.config().max_file_bytes {
            return Ok(outcome(IngestStatus::Failed {
                reason: format!("{} bytes exceeds the limit of {} bytes", bytes.len(), self.config().max_file_bytes),
            }));
        }
        let hash = hex_sha256(&bytes);
        let name = source.to_owned();
        let chunk_params = self.config().chunk;
        let parsed = tokio::task::spawn_blocking(move || {
            parse_file(&name, &bytes).map(|p| match p {
                Parsed::Document { title, text, markdown } => {
                    let chunks = chunk_text(&text, markdown, chunk_params);
                    (Parsed::Document { title, text, markdown }, chunks)
                }
                faqs => (faqs, Vec::new()),
            })
        })
        .await
        .map_err(|e| CoreError::Component { component: "ingest".into(), message: e.to_string() })?;
        let (parsed, raw_chunks) = match parsed {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(kb = %kb.name, source, reason = %e, "file rejected");
                return Ok(outcome(IngestStatus::Failed { reason: e.to_string() }));
            }
        };
        let store = self.store();
        match parsed {
            Parsed::Document { title, text, .. } => {
                if store.document_by_hash(tenant, kb.id, &hash).await?.is_some() {
                    return Ok(outcome(IngestStatus::Skipped { reason: "already ingested (same content)".into() }));
                }
                if raw_chunks.is_empty() {
                    return Ok(outcome(IngestStatus::Failed { reason: "no text to index".into() }));
                }
                let mut ops: Vec<WriteOp> = store
                    .documents(tenant, kb.id)
                    .await?
                    .into_iter()
                    .filter(|d| d.source == source)
                    .map(|d| WriteOp::DeleteDocument(d.id))
                    .collect();
                let replaced = !ops.is_empty();
                let ts = now();
                let doc_id = DocId::generate();
                let chunks: Vec<Chunk> = raw_chunks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| Chunk {
                        id: ChunkId::generate(),
                        doc: doc_id,
                        ordinal: i as u32,
                        heading_path: c.heading_path.clone(),
                        text: text[c.start..c.end].to_owned(),
                        start: c.start,
                        end: c.end,
                    })
                    .collect();
                let n = chunks.len();
                let texts: Vec<(PassageId, String)> = chunks
                    .iter()
                    .map(|c| (PassageId::Chunk(c.id), format!("{}\n{}", chunk_title(&title, &c.heading_path), c.text)))
                    .collect();
                let vectors = self.vectors_for(tenant, kb.id, texts).await?;
                let document = Document {
                    id: doc_id,
                    kb: kb.id,
                    title,
                    source: source.to_owned(),
                    content_hash: hash,
                    tags: Vec::new(),
                    created_at: ts,
                    updated_at: ts,
                    text,
                };
                // The vectors go in the same atomic write, after the document they belong to.
                ops.push(WriteOp::PutDocument { document, chunks });
                ops.extend(vectors);
                let seq = store.apply(tenant, kb.id, ops).await?;
                tracing::info!(kb = %kb.name, source, chunks = n, replaced, seq, "document ingested");
                Ok(outcome(IngestStatus::Document { chunks: n, replaced }))
            }
            Parsed::Faqs(drafts) => {
                let existing = store.faqs(tenant, kb.id).await?;
                let ts = now();
                let mut duplicates = 0;
                let mut ops = Vec::new();
                for d in drafts {
                    if existing.iter().any(|e| e.question == d.question && e.answer == d.answer) {
                        duplicates += 1;
                        continue;
                    }
                    ops.push(WriteOp::PutFaq(FaqEntry {
                        id: FaqId::generate(),
                        kb: kb.id,
                        question: d.question,
                        answer: d.answer,
                        status: d.status,
                        edited: false,
                        source_url: d.source_url,
                        tags: d.tags,
                        created_at: ts,
                        updated_at: ts,
                        valid_from: d.valid_from,
                        valid_until: d.valid_until,
                    }));
                }
                let added = ops.len();
                if added == 0 {
                    return Ok(outcome(IngestStatus::Skipped { reason: format!("all {duplicates} entries already present") }));
                }
                let texts: Vec<(PassageId, String)> = ops
                    .iter()
                    .filter_map(|o| match o {
                        WriteOp::PutFaq(f) => Some((PassageId::Faq(f.id), format!("{}: {}", f.question, f.answer))),
                        _ => None,
                    })
                    .collect();
                if let Some(op) = self.vectors_for(tenant, kb.id, texts).await? {
                    ops.push(op);
                }
                let seq = store.apply(tenant, kb.id, ops).await?;
                tracing::info!(kb = %kb.name, source, added, duplicates, seq, "FAQ entries ingested");
                Ok(outcome(IngestStatus::Faqs { added, duplicates }))
            }
        }
    }

    /// Embeds `texts` for storing beside their passages, when an embedder is
    /// configured; refuses when the knowledge base's vectors come from another model.
    pub(crate) async fn vectors_for(&self, tenant: &TenantId, kb: rag_core::KbId, texts: Vec<(PassageId, String)>) -> Result<Option<WriteOp>, CoreError> {
        let Some(embedder) = self.embedder() else { return Ok(None) };
        if texts.is_empty() {
            return Ok(None);
        }
        let space = self.store().embedding_space(tenant, kb).await?;
        self.check_space(space.as_ref(), &embedder, 0)?;
        let strings: Vec<String> = texts.iter().map(|(_, t)| t.clone()).collect();
        let (vectors, _) = embedder.embed_documents(&strings, self.config().embed_batch).await?;
        let dims = vectors.first().map_or(0, Vec::len);
        self.check_space(space.as_ref(), &embedder, dims)?;
        let vectors = texts
            .into_iter()
            .zip(vectors)
            .map(|((id, text), vector)| PassageVector { id, text_hash: text_hash(&text), vector })
            .collect();
        Ok(Some(WriteOp::PutVectors { space: EmbeddingSpace { model_id: embedder.model().model_id().to_owned(), dims }, vectors }))
    }

    /// Adds synonym groups to a knowledge base (groups already present are skipped).
    pub async fn add_synonyms(&self, tenant: &TenantId, kb_name: &str, groups: Vec<SynonymGroup>) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let existing = self.store().snapshot(tenant, kb.id).await?.synonyms;
        let ops: Vec<WriteOp> = groups.into_iter().filter(|g| !existing.contains(g)).map(WriteOp::AddSynonyms).collect();
        let n = ops.len();
        if n > 0 {
            self.store().apply(tenant, kb.id, ops).await?;
        }
        Ok(n)
    }

    /// Adds or replaces structured facts (by key).
    pub async fn put_facts(&self, tenant: &TenantId, kb_name: &str, facts: Vec<(String, String, Vec<String>)>) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let snapshot = self.store().snapshot(tenant, kb.id).await?;
        let mut ops: Vec<WriteOp> = Vec::new();
        for (key, value, key_synonyms) in facts {
            let existing = snapshot.passages.iter().find_map(|p| match p.id {
                rag_core::PassageId::Fact(id) if p.title == key => Some((id, p.body == value && p.aliases == key_synonyms)),
                _ => None,
            });
            match existing {
                Some((_, true)) => continue,
                Some((id, false)) => ops.push(WriteOp::PutFact(Fact { id, kb: kb.id, key, value, key_synonyms })),
                None => ops.push(WriteOp::PutFact(Fact { id: FactId::generate(), kb: kb.id, key, value, key_synonyms })),
            }
        }
        let n = ops.len();
        if n > 0 {
            let texts: Vec<(PassageId, String)> = ops
                .iter()
                .filter_map(|o| match o {
                    WriteOp::PutFact(f) => Some((PassageId::Fact(f.id), format!("{}: {}", f.key, f.value))),
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
    pub async fn add_user_words(&self, tenant: &TenantId, kb_name: &str, words: Vec<UserWord>) -> Result<usize, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let n = words.len();
        if n > 0 {
            self.store().apply(tenant, kb.id, words.into_iter().map(WriteOp::AddUserWord).collect()).await?;
        }
        Ok(n)
    }
}
