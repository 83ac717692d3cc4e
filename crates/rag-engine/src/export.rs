//! Moving a knowledge base between stores and machines: export writes it as
//! JSON Lines (a header with its settings, then one line per document with
//! its chunks, FAQ entry, fact, synonym group, dictionary word and URL
//! source, and optionally its vectors); import reads such a file into any
//! store. Ids are kept, so an export from the embedded store imported into
//! PostgreSQL is the same knowledge base; `new_ids` gives every item a fresh
//! id instead (to copy a knowledge base inside one store).

use crate::embed::to_hex;
use crate::engine::Engine;
use rag_core::{
    Chunk, ChunkId, CoreError, DocId, Document, DocumentQuery, EmbeddingSpace, Fact, FactId,
    FaqEntry, FaqId, KbSettings, PassageId, PassageVector, SentenceVectors, Source, SourceId,
    SynonymGroup, TenantId, UserError, UserWord, Viewer, WriteOp, MAX_PAGE_LIMIT,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The format name in the header line.
pub const EXPORT_FORMAT: &str = "ragscope-kb";
/// The format version this build writes and reads.
pub const EXPORT_VERSION: u32 = 1;

/// Items read per page while exporting.
const PAGE: usize = MAX_PAGE_LIMIT;

/// One line of an export.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExportLine {
    /// The first line.
    Header {
        /// [`EXPORT_FORMAT`].
        format: String,
        /// [`EXPORT_VERSION`].
        version: u32,
        /// The knowledge base's name.
        name: String,
        /// Its settings.
        settings: Box<KbSettings>,
        /// The embedding space of its vectors, when any are exported.
        space: Option<EmbeddingSpace>,
    },
    /// A document with its chunks.
    Document {
        /// The document.
        document: Document,
        /// Its chunks.
        chunks: Vec<Chunk>,
    },
    /// An FAQ entry.
    Faq(FaqEntry),
    /// A fact.
    Fact(Fact),
    /// A synonym group.
    Synonyms(SynonymGroup),
    /// A dictionary word.
    Word(UserWord),
    /// A URL source.
    Source(Source),
    /// A passage's vector.
    Vector {
        /// The passage.
        id: PassageId,
        /// sha256 of the text it was made from.
        text_hash: String,
        /// The vector.
        vector: Vec<f32>,
        /// Its passage's sentence vectors, when it has them
        /// ([`rag_core::SentenceVectors::to_bytes`] in hex).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sentences: Option<String>,
        /// The second embedder's vectors of its passage, when it has them
        /// (the configured second model's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        second: Option<SecondExport>,
    },
}

/// A passage's vectors from the second embedder, in an export line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecondExport {
    /// The model that made them.
    pub model: String,
    /// [`rag_core::SentenceVectors::to_bytes`] in hex: the whole text's
    /// vector, then its sentences' or its question's.
    pub vectors: String,
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What an export or import moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExportCounts {
    /// Documents.
    pub documents: usize,
    /// Chunks.
    pub chunks: usize,
    /// FAQ entries.
    pub faqs: usize,
    /// Facts.
    pub facts: usize,
    /// Synonym groups.
    pub synonyms: usize,
    /// Dictionary words.
    pub words: usize,
    /// URL sources.
    pub sources: usize,
    /// Vectors.
    pub vectors: usize,
}

fn bad(reason: impl Into<String>) -> CoreError {
    UserError::InvalidParam {
        name: "import",
        reason: reason.into(),
    }
    .into()
}

/// Fresh ids for everything, remembered so references follow.
#[derive(Default)]
struct Remap {
    on: bool,
    docs: HashMap<DocId, DocId>,
    chunks: HashMap<ChunkId, ChunkId>,
    faqs: HashMap<FaqId, FaqId>,
    facts: HashMap<FactId, FactId>,
}

impl Remap {
    fn doc(&mut self, id: DocId) -> DocId {
        if !self.on {
            return id;
        }
        *self.docs.entry(id).or_insert_with(DocId::generate)
    }
    fn chunk(&mut self, id: ChunkId) -> ChunkId {
        if !self.on {
            return id;
        }
        *self.chunks.entry(id).or_insert_with(ChunkId::generate)
    }
    fn faq(&mut self, id: FaqId) -> FaqId {
        if !self.on {
            return id;
        }
        *self.faqs.entry(id).or_insert_with(FaqId::generate)
    }
    fn fact(&mut self, id: FactId) -> FactId {
        if !self.on {
            return id;
        }
        *self.facts.entry(id).or_insert_with(FactId::generate)
    }
    fn passage(&mut self, id: PassageId) -> PassageId {
        match id {
            PassageId::Chunk(c) => PassageId::Chunk(self.chunk(c)),
            PassageId::Faq(f) => PassageId::Faq(self.faq(f)),
            PassageId::Fact(f) => PassageId::Fact(self.fact(f)),
        }
    }
}

impl Engine {
    /// Writes knowledge base `kb_name` as export lines to `out`, vectors
    /// included when asked. Every owner's documents are exported (this is an
    /// operator's tool). Everything is read a page at a time (documents,
    /// FAQ entries, passages with their vectors), so memory holds one page
    /// whatever the knowledge base's size; each page is a read of its own,
    /// so an export taken while writes arrive is not one commit's state.
    pub async fn export_kb(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        with_vectors: bool,
        out: &mut (dyn FnMut(&ExportLine) -> std::io::Result<()> + Send),
    ) -> Result<ExportCounts, CoreError> {
        let io = |e: std::io::Error| CoreError::Component {
            component: "export".into(),
            message: e.to_string(),
        };
        let kb = self.kb(tenant, kb_name).await?;
        let store = self.store();
        let space = if with_vectors {
            store.embedding_space(tenant, kb.id).await?
        } else {
            None
        };
        let mut n = ExportCounts::default();
        out(&ExportLine::Header {
            format: EXPORT_FORMAT.into(),
            version: EXPORT_VERSION,
            name: kb.name.clone(),
            settings: Box::new(kb.settings.clone()),
            space: space.clone(),
        })
        .map_err(io)?;
        let mut docs = DocumentQuery::first_page(Viewer::Everything, PAGE);
        loop {
            let page = store.documents_page(tenant, kb.id, &docs).await?;
            for info in page.documents {
                let Some((document, chunks)) = store.document(tenant, kb.id, info.id).await? else {
                    continue;
                };
                n.documents += 1;
                n.chunks += chunks.len();
                out(&ExportLine::Document { document, chunks }).map_err(io)?;
            }
            match page.next {
                Some(next) => docs.after = Some(next),
                None => break,
            }
        }
        self.each_faq_page(tenant, kb.id, |page| {
            for f in page {
                n.faqs += 1;
                out(&ExportLine::Faq(f.clone())).map_err(io)?;
            }
            Ok(())
        })
        .await?;
        // The lexicon is small: facts, synonym groups and dictionary words.
        let lexicon = self.lexicon(tenant, kb_name).await?;
        let facts = lexicon.facts;
        for f in &facts {
            n.facts += 1;
            out(&ExportLine::Fact(f.clone())).map_err(io)?;
        }
        for g in &lexicon.synonyms {
            n.synonyms += 1;
            out(&ExportLine::Synonyms(g.clone())).map_err(io)?;
        }
        for w in &lexicon.user_words {
            n.words += 1;
            out(&ExportLine::Word(w.clone())).map_err(io)?;
        }
        for s in store.sources(tenant, kb.id).await? {
            n.sources += 1;
            out(&ExportLine::Source(s)).map_err(io)?;
        }
        if space.is_some() {
            // The facts' vectors, then the text passages' a page at a time.
            let fact_ids: Vec<PassageId> = facts.iter().map(|f| PassageId::Fact(f.id)).collect();
            for part in fact_ids.chunks(PAGE) {
                n.vectors += self.export_vectors(tenant, kb.id, part, out).await?;
            }
            let mut after = None;
            loop {
                let page = store
                    .passages_page(tenant, kb.id, after.as_ref(), PAGE)
                    .await?;
                let ids: Vec<PassageId> = page
                    .passages
                    .iter()
                    .filter(|(_, hash)| hash.is_some())
                    .map(|(p, _)| p.id)
                    .collect();
                n.vectors += self.export_vectors(tenant, kb.id, &ids, out).await?;
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        Ok(n)
    }

    /// Writes the vectors of `ids` (those that have one) with their
    /// sentence vectors; returns how many.
    async fn export_vectors(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        ids: &[PassageId],
        out: &mut (dyn FnMut(&ExportLine) -> std::io::Result<()> + Send),
    ) -> Result<usize, CoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let store = self.store();
        let mut vectors = store.vectors(tenant, kb, ids).await?;
        // In the order asked (the snapshot's), whatever order the store
        // answered in.
        let order: HashMap<PassageId, usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        vectors.sort_by_key(|v| order.get(&v.id).copied().unwrap_or(usize::MAX));
        let mut sentences: HashMap<PassageId, SentenceVectors> = store
            .sentence_vectors(tenant, kb, ids)
            .await?
            .into_iter()
            .collect();
        let (model, mut second): (String, HashMap<PassageId, SentenceVectors>) =
            match self.second_embedder() {
                Some(e) => {
                    let model = e.model().model_id().to_owned();
                    let rows = store.second_vectors(tenant, kb, &model, ids).await?;
                    (model, rows.into_iter().collect())
                }
                None => (String::new(), HashMap::new()),
            };
        let count = vectors.len();
        for v in vectors {
            let sentences = sentences.remove(&v.id).map(|s| to_hex(&s.to_bytes()));
            let second = second.remove(&v.id).map(|s| SecondExport {
                model: model.clone(),
                vectors: to_hex(&s.to_bytes()),
            });
            out(&ExportLine::Vector {
                id: v.id,
                text_hash: v.text_hash,
                vector: v.vector,
                sentences,
                second,
            })
            .map_err(|e| CoreError::Component {
                component: "export".into(),
                message: e.to_string(),
            })?;
        }
        Ok(count)
    }

    /// Creates a knowledge base from export lines (`name` overrides the
    /// exported name), read one at a time from `lines` and written in
    /// batches as they come, so memory holds a batch whatever the file's
    /// size. The header is checked before the first write; when a later
    /// line is unreadable or a write fails, the knowledge base is deleted
    /// again, so an import is all or nothing.
    pub async fn import_kb(
        &self,
        tenant: &TenantId,
        lines: &mut (dyn Iterator<Item = Result<ExportLine, CoreError>> + Send),
        name: Option<&str>,
        new_ids: bool,
    ) -> Result<(rag_core::KnowledgeBase, ExportCounts), CoreError> {
        let Some(ExportLine::Header {
            format,
            version,
            name: exported,
            settings,
            space,
        }) = lines.next().transpose()?
        else {
            return Err(bad("the first line must be the export header"));
        };
        if format != EXPORT_FORMAT {
            return Err(bad(format!(
                "not a ragscope knowledge-base export (format {format:?})"
            )));
        }
        if version > EXPORT_VERSION {
            return Err(bad(format!("export format version {version} is newer than this ragscope reads ({EXPORT_VERSION})")));
        }
        let name = name.unwrap_or(&exported).to_owned();
        let kb = self.create_kb(tenant, &name, settings.upgraded()).await?;
        let mut import = Import {
            engine: self,
            tenant,
            kb: kb.id,
            space,
            remap: Remap {
                on: new_ids,
                ..Remap::default()
            },
            n: ExportCounts::default(),
            batch: Vec::new(),
            batch_bytes: 0,
            vectors: Vec::new(),
            sentences: Vec::new(),
            second: Vec::new(),
            sources: Vec::new(),
        };
        let result: Result<(), CoreError> = async {
            for line in lines {
                import.line(line?).await?;
            }
            import.finish().await
        }
        .await;
        if let Err(e) = result {
            // All or nothing: the half-imported knowledge base goes again.
            let _ = self.delete_kb(tenant, &name).await;
            return Err(e);
        }
        Ok((kb, import.n))
    }
}

/// Items written per batch (one transaction) while importing.
const IMPORT_BATCH: usize = 500;
/// Text written per batch at most (about: the batch that passes it is the
/// last to grow).
const IMPORT_BATCH_BYTES: usize = 8 << 20;
/// Vectors written per batch while importing.
const VECTOR_BATCH: usize = 2_000;

/// An import under way: what is waiting to be written.
struct Import<'a> {
    engine: &'a Engine,
    tenant: &'a TenantId,
    kb: rag_core::KbId,
    space: Option<EmbeddingSpace>,
    remap: Remap,
    n: ExportCounts,
    /// Documents, FAQ entries, facts, synonym groups and words, in file
    /// order.
    batch: Vec<WriteOp>,
    /// The documents' text in `batch`.
    batch_bytes: usize,
    vectors: Vec<PassageVector>,
    sentences: Vec<(PassageId, String, SentenceVectors)>,
    /// Second-embedder vectors by model.
    second: Vec<(String, PassageId, String, SentenceVectors)>,
    /// URL sources, written last: their pages point at documents.
    sources: Vec<Source>,
}

impl Import<'_> {
    async fn write(&self, ops: Vec<WriteOp>) -> Result<(), CoreError> {
        self.engine.store().apply(self.tenant, self.kb, ops).await?;
        Ok(())
    }

    async fn flush_batch(&mut self) -> Result<(), CoreError> {
        if !self.batch.is_empty() {
            let ops = std::mem::take(&mut self.batch);
            self.batch_bytes = 0;
            self.write(ops).await?;
        }
        Ok(())
    }

    /// The waiting vectors, then their sentence vectors (which are stored
    /// beside a vector).
    async fn flush_vectors(&mut self) -> Result<(), CoreError> {
        if self.vectors.is_empty() {
            return Ok(());
        }
        let Some(space) = self.space.clone() else {
            return Err(bad("vectors without an embedding space in the header"));
        };
        self.n.vectors += self.vectors.len();
        let vectors = std::mem::take(&mut self.vectors);
        self.write(vec![WriteOp::PutVectors { space, vectors }])
            .await?;
        if !self.sentences.is_empty() {
            let rows = std::mem::take(&mut self.sentences);
            self.write(vec![WriteOp::PutSentenceVectors(rows)]).await?;
        }
        let mut second = std::mem::take(&mut self.second);
        second.sort_by(|a, b| a.0.cmp(&b.0));
        for group in second.chunk_by(|a, b| a.0 == b.0) {
            let model = group[0].0.clone();
            let items = group
                .iter()
                .map(|(_, id, hash, v)| (*id, hash.clone(), v.clone()))
                .collect();
            self.write(vec![WriteOp::PutSecondVectors { model, items }])
                .await?;
        }
        Ok(())
    }

    /// Adds an item to the batch, written once it holds [`IMPORT_BATCH`]
    /// items or [`IMPORT_BATCH_BYTES`] of text.
    async fn push(&mut self, op: WriteOp) -> Result<(), CoreError> {
        self.batch.push(op);
        if self.batch.len() >= IMPORT_BATCH || self.batch_bytes >= IMPORT_BATCH_BYTES {
            self.flush_batch().await?;
        }
        Ok(())
    }

    async fn line(&mut self, line: ExportLine) -> Result<(), CoreError> {
        let kb = self.kb;
        match line {
            ExportLine::Header { .. } => return Err(bad("a second header line")),
            ExportLine::Document {
                mut document,
                mut chunks,
            } => {
                document.id = self.remap.doc(document.id);
                document.kb = kb;
                for c in &mut chunks {
                    c.id = self.remap.chunk(c.id);
                    c.doc = document.id;
                }
                self.n.documents += 1;
                self.n.chunks += chunks.len();
                self.batch_bytes +=
                    document.text.len() + chunks.iter().map(|c| c.text.len()).sum::<usize>();
                self.push(WriteOp::PutDocument { document, chunks }).await?;
            }
            ExportLine::Faq(mut f) => {
                f.id = self.remap.faq(f.id);
                f.kb = kb;
                f.source_doc = f.source_doc.map(|d| self.remap.doc(d));
                self.n.faqs += 1;
                self.push(WriteOp::PutFaq(f)).await?;
            }
            ExportLine::Fact(mut f) => {
                f.id = self.remap.fact(f.id);
                f.kb = kb;
                self.n.facts += 1;
                self.push(WriteOp::PutFact(f)).await?;
            }
            ExportLine::Synonyms(g) => {
                self.n.synonyms += 1;
                self.push(WriteOp::AddSynonyms(g)).await?;
            }
            ExportLine::Word(w) => {
                self.n.words += 1;
                self.push(WriteOp::AddUserWord(w)).await?;
            }
            ExportLine::Source(s) => self.sources.push(s),
            ExportLine::Vector {
                id,
                text_hash,
                vector,
                sentences,
                second,
            } => {
                if self.space.is_none() {
                    return Err(bad("vectors without an embedding space in the header"));
                }
                // Their passages first.
                self.flush_batch().await?;
                let id = self.remap.passage(id);
                if let Some(hex) = sentences {
                    let s = from_hex(&hex)
                        .and_then(|b| SentenceVectors::from_bytes(&b))
                        .ok_or_else(|| bad("unreadable sentence vectors"))?;
                    self.sentences.push((id, text_hash.clone(), s));
                }
                if let Some(SecondExport { model, vectors }) = second {
                    let v = from_hex(&vectors)
                        .and_then(|b| SentenceVectors::from_bytes(&b))
                        .ok_or_else(|| bad("unreadable second vectors"))?;
                    self.second.push((model, id, text_hash.clone(), v));
                }
                self.vectors.push(PassageVector {
                    id,
                    text_hash,
                    vector,
                });
                if self.vectors.len() >= VECTOR_BATCH {
                    self.flush_vectors().await?;
                }
            }
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<(), CoreError> {
        self.flush_batch().await?;
        self.flush_vectors().await?;
        for mut s in std::mem::take(&mut self.sources) {
            if self.remap.on {
                s.id = SourceId::generate();
            }
            s.kb = self.kb;
            for p in &mut s.pages {
                p.doc = p.doc.map(|d| self.remap.doc(d));
            }
            self.n.sources += 1;
            self.batch.push(WriteOp::PutSource(s));
        }
        self.flush_batch().await
    }
}
