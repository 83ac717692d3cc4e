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
    Chunk, ChunkId, CoreError, DocId, Document, EmbeddingSpace, Fact, FactId, FaqEntry, FaqId,
    KbSettings, PassageId, PassageVector, SentenceVectors, Source, SourceId, SynonymGroup,
    TenantId, UserError, UserWord, WriteOp,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The format name in the header line.
pub const EXPORT_FORMAT: &str = "ragscope-kb";
/// The format version this build writes and reads.
pub const EXPORT_VERSION: u32 = 1;

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
        settings: KbSettings,
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
    },
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
    /// operator's tool).
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
        let snapshot = store.snapshot(tenant, kb.id).await?;
        let space = if with_vectors {
            snapshot.space.clone()
        } else {
            None
        };
        let mut n = ExportCounts::default();
        out(&ExportLine::Header {
            format: EXPORT_FORMAT.into(),
            version: EXPORT_VERSION,
            name: kb.name.clone(),
            settings: kb.settings.clone(),
            space: space.clone(),
        })
        .map_err(io)?;
        for info in store.documents(tenant, kb.id).await? {
            let Some((document, chunks)) = store.document(tenant, kb.id, info.id).await? else {
                continue;
            };
            n.documents += 1;
            n.chunks += chunks.len();
            out(&ExportLine::Document { document, chunks }).map_err(io)?;
        }
        for f in store.faqs(tenant, kb.id).await? {
            n.faqs += 1;
            out(&ExportLine::Faq(f)).map_err(io)?;
        }
        for f in self.lexicon(tenant, kb_name).await?.facts {
            n.facts += 1;
            out(&ExportLine::Fact(f)).map_err(io)?;
        }
        for g in &snapshot.synonyms {
            n.synonyms += 1;
            out(&ExportLine::Synonyms(g.clone())).map_err(io)?;
        }
        for w in &snapshot.user_words {
            n.words += 1;
            out(&ExportLine::Word(w.clone())).map_err(io)?;
        }
        for s in store.sources(tenant, kb.id).await? {
            n.sources += 1;
            out(&ExportLine::Source(s)).map_err(io)?;
        }
        if space.is_some() {
            for part in snapshot.vectors.chunks(1_000) {
                let ids: Vec<PassageId> = part.iter().map(|v| v.id).collect();
                let sentences: HashMap<PassageId, SentenceVectors> = store
                    .sentence_vectors(tenant, kb.id, &ids)
                    .await?
                    .into_iter()
                    .collect();
                for v in part {
                    n.vectors += 1;
                    let sentences = sentences.get(&v.id).map(|s| to_hex(&s.to_bytes()));
                    out(&ExportLine::Vector {
                        id: v.id,
                        text_hash: v.text_hash.clone(),
                        vector: v.vector.clone(),
                        sentences,
                    })
                    .map_err(io)?;
                }
            }
        }
        Ok(n)
    }

    /// Creates a knowledge base from export lines (`name` overrides the
    /// exported name). Everything is checked before the first write; the
    /// knowledge base is deleted again when a write fails, so an import is
    /// all or nothing.
    pub async fn import_kb(
        &self,
        tenant: &TenantId,
        lines: Vec<ExportLine>,
        name: Option<&str>,
        new_ids: bool,
    ) -> Result<(rag_core::KnowledgeBase, ExportCounts), CoreError> {
        let mut lines = lines.into_iter();
        let Some(ExportLine::Header {
            format,
            version,
            name: exported,
            settings,
            space,
        }) = lines.next()
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
        let mut remap = Remap {
            on: new_ids,
            ..Remap::default()
        };
        let mut n = ExportCounts::default();
        let mut ops: Vec<Vec<WriteOp>> = Vec::new();
        let mut vectors: Vec<PassageVector> = Vec::new();
        let mut sentence_rows: Vec<(PassageId, String, SentenceVectors)> = Vec::new();
        let mut sources: Vec<Source> = Vec::new();
        for line in lines {
            match line {
                ExportLine::Header { .. } => return Err(bad("a second header line")),
                ExportLine::Document {
                    mut document,
                    mut chunks,
                } => {
                    document.id = remap.doc(document.id);
                    for c in &mut chunks {
                        c.id = remap.chunk(c.id);
                        c.doc = document.id;
                    }
                    n.documents += 1;
                    n.chunks += chunks.len();
                    ops.push(vec![WriteOp::PutDocument { document, chunks }]);
                }
                ExportLine::Faq(mut f) => {
                    f.id = remap.faq(f.id);
                    f.source_doc = f.source_doc.map(|d| remap.doc(d));
                    n.faqs += 1;
                    ops.push(vec![WriteOp::PutFaq(f)]);
                }
                ExportLine::Fact(mut f) => {
                    f.id = remap.fact(f.id);
                    n.facts += 1;
                    ops.push(vec![WriteOp::PutFact(f)]);
                }
                ExportLine::Synonyms(g) => {
                    n.synonyms += 1;
                    ops.push(vec![WriteOp::AddSynonyms(g)]);
                }
                ExportLine::Word(w) => {
                    n.words += 1;
                    ops.push(vec![WriteOp::AddUserWord(w)]);
                }
                ExportLine::Source(s) => sources.push(s),
                ExportLine::Vector {
                    id,
                    text_hash,
                    vector,
                    sentences,
                } => {
                    if space.is_none() {
                        return Err(bad("vectors without an embedding space in the header"));
                    }
                    let id = remap.passage(id);
                    if let Some(hex) = sentences {
                        let s = from_hex(&hex)
                            .and_then(|b| SentenceVectors::from_bytes(&b))
                            .ok_or_else(|| bad("unreadable sentence vectors"))?;
                        sentence_rows.push((id, text_hash.clone(), s));
                    }
                    vectors.push(PassageVector {
                        id,
                        text_hash,
                        vector,
                    });
                }
            }
        }
        let kb = self.create_kb(tenant, &name, settings).await?;
        let fix_kb = |op: &mut WriteOp| match op {
            WriteOp::PutDocument { document, .. } => document.kb = kb.id,
            WriteOp::PutFaq(f) => f.kb = kb.id,
            WriteOp::PutFact(f) => f.kb = kb.id,
            _ => {}
        };
        for mut s in sources {
            if new_ids {
                s.id = SourceId::generate();
            }
            s.kb = kb.id;
            for p in &mut s.pages {
                p.doc = p.doc.map(|d| remap.doc(d));
            }
            n.sources += 1;
            ops.push(vec![WriteOp::PutSource(s)]);
        }
        if let Some(space) = space.filter(|_| !vectors.is_empty()) {
            n.vectors = vectors.len();
            for batch in vectors.chunks(2_000) {
                ops.push(vec![WriteOp::PutVectors {
                    space: space.clone(),
                    vectors: batch.to_vec(),
                }]);
            }
            // After every vector they belong beside.
            for batch in sentence_rows.chunks(2_000) {
                ops.push(vec![WriteOp::PutSentenceVectors(batch.to_vec())]);
            }
        }
        // Documents one write each; the small items in batches.
        let mut batch: Vec<WriteOp> = Vec::new();
        let store = self.store();
        let result: Result<(), CoreError> = async {
            for group in ops {
                for mut op in group {
                    fix_kb(&mut op);
                    let big = matches!(
                        op,
                        WriteOp::PutDocument { .. }
                            | WriteOp::PutVectors { .. }
                            | WriteOp::PutSentenceVectors(_)
                    );
                    batch.push(op);
                    if big || batch.len() >= 500 {
                        store
                            .apply(tenant, kb.id, std::mem::take(&mut batch))
                            .await?;
                    }
                }
            }
            if !batch.is_empty() {
                store.apply(tenant, kb.id, batch).await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            // All or nothing: the half-imported knowledge base goes again.
            let _ = self.delete_kb(tenant, &name).await;
            return Err(e);
        }
        Ok((kb, n))
    }
}
