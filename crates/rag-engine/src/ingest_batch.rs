//! Bulk ingest: many files in one pass and one store write.
//!
//! Each file goes through the stages it would go through alone (size check,
//! same-content skip, extraction, chunking, embedding), but the extractions
//! are asked for together (the sandbox runs small files many to a worker,
//! on every core), the files are chunked on the blocking pool at once, the
//! passages of all of them go to the embedder as one list (it batches them),
//! and the documents are committed in one atomic write. A bad file fails
//! alone. A crash before the write leaves none of the batch; a re-run skips
//! the files that were committed (same content).

use crate::blocking::blocking;
use crate::chunk::{split, to_chunks};
use crate::embed::{hex_sha256, EmbedStats};
use crate::engine::Engine;
use crate::ingest::{cancelled, embedding_failure, file_stem};
use crate::job::{IngestOptions, IngestProgress, TokenCountFn};
use crate::pipeline::error_code;
use crate::second::SecondSource;
use crate::sentences::{embed_sentences, SentenceSource};
use crate::{ExtractJob, IngestOutcome, IngestStatus};
use rag_core::{
    chunk_title, now, Chunk, CoreError, DocId, Document, KnowledgeBase, PassageId, TenantId,
    UserError, WriteOp,
};
use rag_ingest::{check_size, Content, FaqRow};
use std::collections::HashMap;

/// One input of [`Engine::ingest_batch`].
#[derive(Debug, Clone)]
pub struct IngestFile {
    /// The file's name or path (a document's source).
    pub source: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A file extracted as a document, on its way to the write.
struct PreparedDoc {
    file: usize,
    id: DocId,
    title: String,
    hash: String,
    text: String,
    chunks: Vec<Chunk>,
}

/// The files of one batch and where each stands: `None` while it is still
/// on its way, its final status once it is done.
struct Batch<'a> {
    kb: &'a str,
    sources: Vec<String>,
    status: Vec<Option<IngestStatus>>,
    progress: &'a mut (dyn FnMut(IngestProgress) + Send),
}

impl Batch<'_> {
    fn emit(&mut self, e: IngestProgress) {
        (self.progress)(e);
    }

    /// The file was rejected: its `failed` event, nothing of it stored.
    fn refuse(&mut self, i: usize, code: &'static str, reason: String) {
        let source = &self.sources[i];
        tracing::warn!(kb = self.kb, source = %source, code, %reason, "file rejected");
        (self.progress)(IngestProgress::failed(source, code, reason.clone()));
        self.status[i] = Some(IngestStatus::Failed {
            code: code.to_owned(),
            reason,
        });
    }

    fn skip(&mut self, i: usize, reason: String) {
        (self.progress)(IngestProgress::Skipped {
            source: self.sources[i].clone(),
            reason: reason.clone(),
        });
        self.status[i] = Some(IngestStatus::Skipped { reason });
    }

    /// Every file still on its way is refused as cancelled.
    fn cancel_open(&mut self) {
        for i in 0..self.sources.len() {
            if self.status[i].is_none() {
                let (code, reason) = cancelled();
                self.refuse(i, code, reason);
            }
        }
    }
}

impl Engine {
    /// Ingests several files as one step of a job: what
    /// [`Engine::ingest_with`] does for one file, for all of them, with the
    /// extractions asked for together, the embeddings computed as one list
    /// and the documents stored in one atomic write. One outcome per file,
    /// in order; every file's events go to `progress` (a file's events stay
    /// in order; the files' events interleave). A bad file fails alone; the
    /// error result is kept for what stops the whole job, and then every
    /// file not yet done gets its `failed` event.
    pub async fn ingest_batch(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        files: Vec<IngestFile>,
        options: &IngestOptions,
        progress: &mut (dyn FnMut(IngestProgress) + Send),
    ) -> Result<Vec<IngestOutcome>, CoreError> {
        let mut batch = Batch {
            kb: kb_name,
            sources: files.iter().map(|f| f.source.clone()).collect(),
            status: vec![None; files.len()],
            progress,
        };
        for f in &files {
            batch.emit(IngestProgress::Received {
                source: f.source.clone(),
                bytes: f.bytes.len() as u64,
            });
        }
        if let Err(e) = self
            .batch_stages(tenant, kb_name, files, options, &mut batch)
            .await
        {
            for i in 0..batch.sources.len() {
                if batch.status[i].is_none() {
                    let source = batch.sources[i].clone();
                    batch.emit(IngestProgress::failed(
                        &source,
                        error_code(&e),
                        e.to_string(),
                    ));
                }
            }
            return Err(e);
        }
        Ok(batch
            .sources
            .into_iter()
            .zip(batch.status)
            .map(|(source, status)| IngestOutcome {
                source,
                status: status.unwrap_or_else(|| IngestStatus::Failed {
                    code: "internal".into(),
                    reason: "the file was not processed".into(),
                }),
            })
            .collect())
    }

    async fn batch_stages(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        files: Vec<IngestFile>,
        options: &IngestOptions,
        batch: &mut Batch<'_>,
    ) -> Result<(), CoreError> {
        options
            .chunk
            .validate()
            .map_err(|e| UserError::InvalidParam {
                name: "chunk",
                reason: e.to_string(),
            })?;
        let kb = self.kb(tenant, kb_name).await?;
        let limits = self.ingest_limits();
        let store = self.store();

        // Sizes, then the same bytes already stored (or earlier in this
        // batch): skipped before anything is extracted.
        let mut jobs = Vec::new();
        let mut first_of: HashMap<String, usize> = HashMap::new();
        let mut first_source: HashMap<String, usize> = HashMap::new();
        for (i, file) in files.into_iter().enumerate() {
            if let Err(e) = check_size(file.bytes.len() as u64, &limits) {
                batch.refuse(i, e.code(), e.to_string());
                continue;
            }
            if let Some(&j) = first_source.get(&file.source) {
                batch.skip(
                    i,
                    format!("the same source is file {} of this batch", j + 1),
                );
                continue;
            }
            first_source.insert(file.source.clone(), i);
            let hash = hex_sha256(&file.bytes);
            if let Some(&j) = first_of.get(&hash) {
                let other = batch.sources[j].clone();
                batch.skip(i, format!("same content as {other}"));
                continue;
            }
            if store
                .document_by_hash(tenant, kb.id, &hash, options.owner.as_deref())
                .await?
                .is_some()
            {
                batch.skip(i, "already ingested (same content)".into());
                continue;
            }
            first_of.insert(hash.clone(), i);
            jobs.push((
                (i, hash),
                ExtractJob {
                    name: file.source,
                    media_type: options.media_type.clone(),
                    bytes: file.bytes,
                    limits,
                },
            ));
        }
        if options.cancelled() {
            batch.cancel_open();
            return Ok(());
        }

        let (indices, jobs): (Vec<(usize, String)>, Vec<ExtractJob>) = jobs.into_iter().unzip();
        let extracted = self.extractor().extract_many(jobs).await;
        let mut docs = Vec::new();
        let mut faqs: Vec<(usize, Vec<FaqRow>)> = Vec::new();
        for ((i, hash), result) in indices.into_iter().zip(extracted) {
            let x = match result {
                Ok(x) => x,
                Err(e) => {
                    batch.refuse(i, e.code, e.reason);
                    continue;
                }
            };
            let source = batch.sources[i].clone();
            match x.content {
                Content::Document(doc) => {
                    batch.emit(IngestProgress::Extracted {
                        source,
                        format: x.format,
                        encoding: doc.encoding.as_ref().map(|e| e.name().to_owned()),
                        chars: Some(doc.text.chars().count()),
                        pages: (!doc.pages.is_empty()).then_some(doc.pages.len()),
                        entries: None,
                    });
                    docs.push((i, hash, doc));
                }
                Content::Faqs { rows, encoding } => {
                    batch.emit(IngestProgress::Extracted {
                        source,
                        format: x.format,
                        encoding: Some(encoding.name().to_owned()),
                        chars: None,
                        pages: None,
                        entries: Some(rows.len()),
                    });
                    faqs.push((i, rows));
                }
            }
        }

        let prepared = self.chunk_documents(docs, options, batch).await?;
        if options.cancelled() {
            batch.cancel_open();
            return Ok(());
        }
        self.store_documents(tenant, &kb, prepared, options, batch)
            .await?;

        // FAQ tables, one write each (their rows are checked against the
        // entries already stored, which the previous table may have added).
        for (i, rows) in faqs {
            if options.cancelled() {
                batch.cancel_open();
                return Ok(());
            }
            let source = batch.sources[i].clone();
            match self
                .ingest_faq_rows(tenant, &kb, &source, rows, options, &mut *batch.progress)
                .await?
            {
                Ok(IngestStatus::Skipped { reason }) => batch.skip(i, reason),
                Ok(status) => batch.status[i] = Some(status),
                Err((code, reason)) => batch.refuse(i, code, reason),
            }
        }
        Ok(())
    }

    /// Chunks the documents of a batch, all at once on the blocking pool.
    async fn chunk_documents(
        &self,
        docs: Vec<(usize, String, rag_ingest::ExtractedDoc)>,
        options: &IngestOptions,
        batch: &mut Batch<'_>,
    ) -> Result<Vec<PreparedDoc>, CoreError> {
        let counter = self.chunk_counter(options);
        let params = options.chunk;
        let split_all = docs.into_iter().map(|(i, hash, doc)| {
            let counter = counter.clone();
            blocking("ingest", move || {
                let pieces = split(&doc, &params, counter.as_ref());
                (i, hash, doc, pieces)
            })
        });
        let mut prepared = Vec::new();
        for r in futures::future::join_all(split_all).await {
            let (i, hash, doc, pieces) = r?;
            let pieces = pieces.map_err(|e| UserError::InvalidParam {
                name: "chunk",
                reason: e.to_string(),
            })?;
            let source = batch.sources[i].clone();
            if pieces.is_empty() {
                batch.refuse(i, "empty_file", "no text to index".into());
                continue;
            }
            batch.emit(IngestProgress::Chunked {
                source: source.clone(),
                chunks: pieces.len(),
                max_tokens: pieces.iter().map(|c| c.tokens).max().unwrap_or(0),
            });
            let title = doc
                .title
                .clone()
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| file_stem(&source));
            let id = DocId::generate();
            prepared.push(PreparedDoc {
                file: i,
                id,
                title,
                hash,
                text: doc.text,
                chunks: to_chunks(id, pieces),
            });
        }
        Ok(prepared)
    }

    /// Chunk sizes count tokens of the active embedder's own tokenizer when
    /// it can count locally (e5, BERT-family), else the caller's or the
    /// approximate counter.
    fn chunk_counter(&self, options: &IngestOptions) -> Option<TokenCountFn> {
        options.token_counter.clone().or_else(|| {
            let model = self.embedder()?.model().clone();
            model.count_tokens("probe")?;
            let approx = rag_ingest::ApproxTokenCounter;
            Some(std::sync::Arc::new(move |s: &str| {
                model
                    .count_tokens(s)
                    .unwrap_or_else(|| rag_ingest::TokenCounter::count_tokens(&approx, s))
            }) as TokenCountFn)
        })
    }

    /// Embeds the passages of the prepared documents as one list, then
    /// stores them all in one write.
    async fn store_documents(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
        docs: Vec<PreparedDoc>,
        options: &IngestOptions,
        batch: &mut Batch<'_>,
    ) -> Result<(), CoreError> {
        if docs.is_empty() {
            return Ok(());
        }
        let mut texts: Vec<(PassageId, String)> = Vec::new();
        let mut ranges = Vec::with_capacity(docs.len());
        for d in &docs {
            let start = texts.len();
            texts.extend(d.chunks.iter().map(|c| {
                (
                    PassageId::Chunk(c.id),
                    format!("{}\n{}", chunk_title(&d.title, &c.heading_path), c.text),
                )
            }));
            ranges.push(start..texts.len());
        }
        // Passage vectors, then sentence vectors beside them; a failing
        // embedder refuses the whole batch's files.
        let embedding = async {
            let embedded = self.embed_passages(tenant, kb.id, texts).await?;
            let sentences = match (&embedded, self.embedder()) {
                (Some((_, vectors, _)), Some(embedder)) if self.config().sentence_vectors => {
                    // The passage vectors are in chunk order, with the hash
                    // of the text each was made from.
                    let sources: Vec<SentenceSource> = docs
                        .iter()
                        .flat_map(|d| d.chunks.iter().map(move |c| (d, c)))
                        .zip(vectors)
                        .map(|((d, c), v)| SentenceSource {
                            id: PassageId::Chunk(c.id),
                            text_hash: v.text_hash.clone(),
                            title: chunk_title(&d.title, &c.heading_path),
                            body: c.text.clone(),
                        })
                        .collect();
                    embed_sentences(&embedder, &sources, self.config().embed_batch).await?
                }
                _ => None,
            };
            // The second (English) model's vectors, beside the same passages.
            let second = match &embedded {
                Some((_, vectors, _)) => {
                    let sources: Vec<SecondSource> = docs
                        .iter()
                        .flat_map(|d| d.chunks.iter().map(move |c| (d, c)))
                        .zip(vectors)
                        .map(|((d, c), v)| {
                            let title = chunk_title(&d.title, &c.heading_path);
                            SecondSource::chunk(
                                PassageId::Chunk(c.id),
                                v.text_hash.clone(),
                                &title,
                                &c.text,
                            )
                        })
                        .collect();
                    self.second_ops(&sources).await?
                }
                None => None,
            };
            Ok::<_, CoreError>((embedded, sentences, second))
        };
        let (embedded, sentences, second) = match embedding.await {
            Ok(v) => v,
            Err(e) if embedding_failure(&e) => {
                for d in &docs {
                    batch.refuse(d.file, "embedding_failed", e.to_string());
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // Each document's share of the vectors, and its `embedded` event.
        let mut per_doc: Vec<Option<WriteOp>> = Vec::with_capacity(docs.len());
        let mut embedded =
            embedded.map(|(space, vectors, marks)| (space, vectors.into_iter(), marks));
        for (d, range) in docs.iter().zip(&ranges) {
            let stats = embedded
                .as_ref()
                .map(|(_, _, marks)| EmbedStats::of(&marks[range.clone()]));
            let source = batch.sources[d.file].clone();
            batch.emit(self.embedded_event(&source, &stats));
            per_doc.push(
                embedded
                    .as_mut()
                    .map(|(space, vectors, _)| WriteOp::PutVectors {
                        space: space.clone(),
                        vectors: vectors.by_ref().take(range.len()).collect(),
                    }),
            );
        }

        let mut ops = Vec::new();
        let mut stored = Vec::new();
        for (d, vectors) in docs.into_iter().zip(per_doc) {
            let source = batch.sources[d.file].clone();
            // The older versions of this source, by index (not a listing
            // of every document per file, which made ingest quadratic).
            let older: Vec<DocId> = self
                .store()
                .document_by_source(tenant, kb.id, &source, options.owner.as_deref())
                .await?;
            let replaced = !older.is_empty();
            // Unedited drafts of the older version, which this write deletes
            // (reported when drafting again).
            let mut old_drafts = 0;
            if replaced && kb.settings.drafts.auto {
                self.each_faq_page(tenant, kb.id, |page| {
                    old_drafts += page
                        .iter()
                        .filter(|f| !f.edited && f.source_doc.is_some_and(|x| older.contains(&x)))
                        .count();
                    Ok(())
                })
                .await?;
            }
            let ts = now();
            let n = d.chunks.len();
            let document = Document {
                id: d.id,
                kb: kb.id,
                title: d.title,
                source: source.clone(),
                content_hash: d.hash,
                tags: Vec::new(),
                created_at: ts,
                updated_at: ts,
                text: d.text,
                owner: options.owner.clone(),
            };
            let draft = kb.settings.drafts.auto.then(|| document.clone());
            // The vectors go in the same atomic write, after the document
            // they belong to.
            ops.push(WriteOp::PutDocument {
                document,
                chunks: d.chunks,
            });
            ops.extend(vectors);
            // Re-sync: drafts a person edited follow the new version; the
            // older version goes with its unedited drafts.
            for old in older {
                ops.push(WriteOp::RelinkDrafts {
                    from: old,
                    to: d.id,
                });
                ops.push(WriteOp::DeleteDocument(old));
            }
            stored.push((d.file, n, replaced, draft, old_drafts));
        }
        // After every passage vector they belong beside.
        ops.extend(sentences);
        ops.extend(second);
        if options.cancelled() {
            batch.cancel_open();
            return Ok(());
        }
        let seq = self.store().apply(tenant, kb.id, ops).await?;
        tracing::info!(kb = %kb.name, documents = stored.len(), seq, "documents ingested");
        // A failpoint for the crash-and-re-run test: the batch is committed.
        rag_core::failpoint::hit("ingest.batch.committed");
        for (i, chunks, replaced, draft, old_drafts) in stored {
            let source = batch.sources[i].clone();
            tracing::debug!(kb = %kb.name, source = %source, chunks, replaced, seq, "document ingested");
            if let Some(draft) = draft {
                let event = self
                    .auto_draft(tenant, kb, draft, old_drafts, options)
                    .await;
                batch.emit(event);
            }
            batch.emit(IngestProgress::Indexed {
                source,
                seq,
                chunks,
                faqs_added: 0,
                faq_duplicates: 0,
                replaced,
            });
            batch.status[i] = Some(IngestStatus::Document { chunks, replaced });
        }
        Ok(())
    }
}
