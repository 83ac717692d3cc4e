//! The seam traits. Implementations are handed to the engine as `Arc<dyn Trait>`.

use crate::error::Result;
use crate::ids::{DocId, KbId, TenantId};
use crate::model::{Chunk, Document, FaqEntry, KbSettings, KbSnapshot, KnowledgeBase};
use crate::params::PathKind;
use crate::query::{AnalyzedQuery, Filters, Fused, FusedHit, RankedList};
pub use crate::write_op::WriteOp;
use async_trait::async_trait;
use futures::stream::BoxStream;

/// What a retriever needs besides the query.
#[derive(Debug, Clone)]
pub struct SearchCtx {
    /// Filters to apply.
    pub filters: Filters,
    /// The time validity windows are evaluated at.
    pub now: crate::model::Timestamp,
    /// Whose owner-restricted passages may be returned.
    pub viewer: crate::auth::Viewer,
}

/// One recall path.
#[async_trait]
pub trait Retriever: Send + Sync {
    /// The path this retriever implements.
    fn path(&self) -> PathKind;
    /// Returns up to `k` hits, best first.
    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList>;
}

/// Combines any number of ranked lists into one.
pub trait Fuser: Send + Sync {
    /// Fuses `lists`; every hit keeps each source's rank and score for explanation.
    fn fuse(&self, lists: &[RankedList]) -> Fused;
}

/// A fused candidate handed to a reranker, with the text the reranker reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankCandidate {
    /// The fused hit (its `rank` is the fused rank).
    pub hit: FusedHit,
    /// The passage text to judge (title and body).
    pub text: String,
}

/// A candidate in the reranker's order.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankedHit {
    /// The fused hit, unchanged: `hit.rank` is still its fused rank, so the
    /// move is `hit.rank` → position in the returned list + 1.
    pub hit: FusedHit,
    /// The reranker's own score, when it gives one (higher is better).
    pub score: Option<f64>,
}

/// Reorders fused candidates. Must fail soft: on error the engine keeps the input order.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// Name shown in events.
    fn name(&self) -> &str;
    /// Returns the candidates in a new order, at most `top_k` of them.
    async fn rerank(
        &self,
        query: &AnalyzedQuery,
        candidates: Vec<RerankCandidate>,
        top_k: usize,
    ) -> Result<Vec<RerankedHit>>;
}

/// The reranker used when none is configured: keeps the fused order.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdentityReranker;

#[async_trait]
impl Reranker for IdentityReranker {
    fn name(&self) -> &str {
        "identity"
    }
    async fn rerank(
        &self,
        _query: &AnalyzedQuery,
        candidates: Vec<RerankCandidate>,
        top_k: usize,
    ) -> Result<Vec<RerankedHit>> {
        Ok(candidates
            .into_iter()
            .take(top_k)
            .map(|c| RerankedHit {
                hit: c.hit,
                score: None,
            })
            .collect())
    }
}

/// Turns text into vectors (dense recall arrives with an implementation).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Model identity recorded next to stored vectors.
    fn model_id(&self) -> &str;
    /// Vector length.
    fn dimensions(&self) -> usize;
    /// Embeds a query.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>>;
    /// Embeds passages.
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
    /// How many tokens of the model's own tokenizer a piece of passage text
    /// takes (no prefix or special tokens), when the model can tell locally;
    /// chunk sizes are measured with it. Remote embedders say `None`.
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }
}

/// Who speaks in a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions.
    System,
    /// The user's turn.
    User,
    /// The model's earlier turn.
    Assistant,
}

/// One chat message, as OpenAI-compatible chat APIs take them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// Speaker.
    pub role: ChatRole,
    /// Text.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::System,
            content: content.into(),
        }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::User,
            content: content.into(),
        }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::Assistant,
            content: content.into(),
        }
    }
}

/// A piece of generated output.
#[derive(Debug, Clone, PartialEq)]
pub enum GenEvent {
    /// Answer text.
    Delta(String),
    /// Token usage as reported by the provider.
    Usage {
        /// The model that answered, as the provider names it.
        model: String,
        /// Prompt tokens.
        prompt: u32,
        /// Completion tokens.
        completion: u32,
    },
    /// The end.
    Done,
}

/// What a generator is asked.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    /// The question.
    pub question: String,
    /// Numbered sources as packed.
    pub sources: Vec<crate::event::ContextSource>,
    /// The prompt as chat messages (system rules, then the user turn with the
    /// sources as quoted data). LLM generators send these; the extractive
    /// generator reads `question` and `sources` instead.
    pub messages: Vec<ChatMessage>,
    /// Ask for one JSON object as the reply (OpenAI-compatible providers get
    /// `response_format: {"type": "json_object"}`); the caller still
    /// validates what comes back.
    pub json: bool,
}

/// Produces an answer from packed sources.
#[async_trait]
pub trait Generator: Send + Sync {
    /// Name shown in events.
    fn name(&self) -> &str;
    /// Streams the answer.
    async fn generate(
        &self,
        request: GenerateRequest,
    ) -> Result<BoxStream<'static, Result<GenEvent>>>;
}

/// Document metadata without its text.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentInfo {
    /// Id.
    pub id: DocId,
    /// Title.
    pub title: String,
    /// Source.
    pub source: String,
    /// Content hash.
    pub content_hash: String,
    /// Number of chunks.
    pub chunks: usize,
    /// The owner it is restricted to, if any.
    pub owner: Option<String>,
    /// When it was stored (the listing's order, with the id).
    pub created_at: crate::model::Timestamp,
}

/// The default size of a page of a listing.
pub const DEFAULT_PAGE_LIMIT: usize = 50;
/// The largest page of a listing.
pub const MAX_PAGE_LIMIT: usize = 500;

/// Where a page of the documents listing starts: right after the document
/// with this key. The listing is ordered by (`created_at`, `id`), a key no
/// later write changes, so paging goes on correctly across inserts and
/// deletes: every document present from the first page to the last is
/// listed exactly once, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocCursor {
    /// The last listed document's creation time.
    pub created_at: crate::model::Timestamp,
    /// The last listed document's id.
    pub id: DocId,
}

impl DocCursor {
    /// The key of a listed document.
    pub fn of(doc: &DocumentInfo) -> Self {
        DocCursor {
            created_at: doc.created_at,
            id: doc.id,
        }
    }

    /// The opaque text form handed to clients
    /// ([`crate::pages::encode_key`]).
    pub fn encode(&self) -> String {
        crate::pages::encode_key(self.created_at, &self.id.0)
    }

    /// Reads [`DocCursor::encode`]'s form; anything else is `None`.
    pub fn decode(text: &str) -> Option<Self> {
        let (created_at, id) = crate::pages::decode_key(text)?;
        Some(DocCursor {
            created_at,
            id: DocId(id),
        })
    }
}

/// Which page of a knowledge base's documents to read.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentQuery {
    /// Whose owner-restricted documents are listed (and counted).
    pub viewer: crate::auth::Viewer,
    /// Start after this document (`None`: the first page).
    pub after: Option<DocCursor>,
    /// At most this many documents (1 to [`MAX_PAGE_LIMIT`]; callers validate).
    pub limit: usize,
    /// Only documents stored from this source (file name or URL).
    pub source: Option<String>,
}

impl DocumentQuery {
    /// The first page of every source's documents, as `viewer` sees them.
    pub fn first_page(viewer: crate::auth::Viewer, limit: usize) -> Self {
        DocumentQuery {
            viewer,
            after: None,
            limit,
            source: None,
        }
    }
}

/// One page of a knowledge base's documents.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPage {
    /// The documents, in (`created_at`, `id`) order.
    pub documents: Vec<DocumentInfo>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<DocCursor>,
    /// How many documents of the knowledge base the viewer may see (the
    /// source filter aside), counted through an index.
    pub total: usize,
}

impl DocumentPage {
    /// A page from up to `limit + 1` rows read in order: the extra row only
    /// tells that another page follows.
    pub fn from_rows(mut rows: Vec<DocumentInfo>, limit: usize, total: usize) -> Self {
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(DocCursor::of)
        } else {
            None
        };
        DocumentPage {
            documents: rows,
            next,
            total,
        }
    }
}

/// The size of a knowledge base.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct KbCounts {
    /// Documents.
    pub documents: usize,
    /// Chunks of those documents.
    pub chunks: usize,
    /// FAQ entries (any status).
    pub faqs: usize,
}

/// Read side of a store. Every call is scoped by a tenant.
#[async_trait]
pub trait StoreRead: Send + Sync {
    /// Knowledge bases of a tenant.
    async fn list_kbs(&self, tenant: &TenantId) -> Result<Vec<KnowledgeBase>>;
    /// A knowledge base by name.
    async fn kb_by_name(&self, tenant: &TenantId, name: &str) -> Result<Option<KnowledgeBase>>;
    /// The commit sequence number of a knowledge base; it grows with every write to it.
    async fn kb_seq(&self, tenant: &TenantId, kb: KbId) -> Result<u64>;
    /// Everything the indexes of a knowledge base are built from.
    async fn snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot>;
    /// The snapshot's lexicon only: its commit, facts (as passages), synonym
    /// groups, dictionary and embedding space, without text passages or
    /// vectors, so that reading it costs nothing like the corpus. By
    /// default cut from the whole snapshot.
    async fn lexicon_snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot> {
        let mut snapshot = self.snapshot(tenant, kb).await?;
        snapshot
            .passages
            .retain(|p| p.kind() == crate::model::PassageKind::Fact);
        snapshot.vectors = Vec::new();
        Ok(snapshot)
    }
    /// What the engine's in-memory indexes are built from, with the number
    /// of stored vectors. A store that searches vectors itself (see
    /// [`StoreRead::store_recall`]) leaves `vectors` empty; by default the
    /// whole snapshot.
    async fn index_snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<(KbSnapshot, usize)> {
        let snapshot = self.snapshot(tenant, kb).await?;
        let vectors = snapshot.vectors.len();
        Ok((snapshot, vectors))
    }
    /// [`StoreRead::index_snapshot`] sent in parts to `parts` (whose
    /// receiver runs elsewhere, on another thread): the head, the text
    /// passages in batches of about `batch`, then [`SnapshotPart::End`];
    /// returns the number of stored vectors. Every part is read in one
    /// transaction, so they match the head's commit. A store that reads
    /// rows one by one holds one batch at a time. By default the whole
    /// snapshot is read, then sent from a thread of its own (so that no
    /// task waits on the channel): the parts may still be arriving when
    /// this returns, and a receiver gone stops them.
    async fn index_snapshot_streamed(
        &self,
        tenant: &TenantId,
        kb: KbId,
        batch: usize,
        parts: std::sync::mpsc::SyncSender<crate::model::SnapshotPart>,
    ) -> Result<usize> {
        use crate::model::SnapshotPart;
        let (mut snapshot, vectors) = self.index_snapshot(tenant, kb).await?;
        let mut text = std::mem::take(&mut snapshot.passages);
        snapshot.passages = text
            .extract_if(.., |p| p.kind() == crate::model::PassageKind::Fact)
            .collect();
        let batch = batch.max(1);
        std::thread::Builder::new()
            .name("snapshot-parts".into())
            .spawn(move || {
                // A receiver gone (its build stopped) ends the sending.
                if parts.send(SnapshotPart::Head(snapshot)).is_err() {
                    return;
                }
                let mut rest = text.into_iter().peekable();
                while rest.peek().is_some() {
                    let part: Vec<_> = rest.by_ref().take(batch).collect();
                    if parts.send(SnapshotPart::Passages(part)).is_err() {
                        return;
                    }
                }
                let _ = parts.send(SnapshotPart::End);
            })
            .map_err(|e| crate::CoreError::Store(format!("cannot send the snapshot: {e}")))?;
        Ok(vectors)
    }
    /// One page of a knowledge base's text passages, in the snapshot's
    /// order (document chunks by their document's (`created_at`, id) and
    /// ordinal, then FAQ entries by (`created_at`, id)): at most `limit`
    /// after `after` (from the first when `None`), each with the text hash
    /// of its stored vector. Each page is a read of its own through the
    /// indexes that give that order (keyset pagination: a page costs the
    /// same wherever it lies), so a caller that writes between pages
    /// (`reembed`) holds no read open across its writes and memory holds
    /// one page. Passages written between pages may be missed or seen
    /// twice; one removed is not returned after its removal.
    async fn passages_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        after: Option<&crate::pages::PassageCursor>,
        limit: usize,
    ) -> Result<crate::pages::PassagePage>;
    /// What changed after commit `since` (exclusive) up to the current
    /// commit, or `None` when the store cannot tell (it keeps no change
    /// log, or `since` is older than what it keeps): the caller then builds
    /// from a whole snapshot. The default keeps no change log.
    async fn changes_since(
        &self,
        _tenant: &TenantId,
        _kb: KbId,
        _since: u64,
    ) -> Result<Option<crate::model::KbChanges>> {
        Ok(None)
    }
    /// Documents of a knowledge base, every owner's, in (`created_at`, `id`)
    /// order. Loads them all: listings shown to people use
    /// [`StoreRead::documents_page`].
    async fn documents(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<DocumentInfo>>;
    /// One page of a knowledge base's documents that `query.viewer` may see,
    /// read through the index on (knowledge base, `created_at`, `id`)
    /// from the cursor on (keyset pagination: the cost of a page does not
    /// grow with its position or the knowledge base's size).
    async fn documents_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &DocumentQuery,
    ) -> Result<DocumentPage>;
    /// A document with its chunks in order, if it exists in this tenant's knowledge base.
    async fn document(
        &self,
        tenant: &TenantId,
        kb: KbId,
        doc: DocId,
    ) -> Result<Option<(Document, Vec<Chunk>)>>;
    /// A document with that content hash and owner, if one exists.
    async fn document_by_hash(
        &self,
        tenant: &TenantId,
        kb: KbId,
        hash: &str,
        owner: Option<&str>,
    ) -> Result<Option<DocId>>;
    /// The documents stored from `source` with that owner, oldest first
    /// (normally at most one: a new version of a source replaces the older
    /// one). Stores answer from an index on (knowledge base, source,
    /// owner); the default filters [`StoreRead::documents`].
    async fn document_by_source(
        &self,
        tenant: &TenantId,
        kb: KbId,
        source: &str,
        owner: Option<&str>,
    ) -> Result<Vec<DocId>> {
        Ok(self
            .documents(tenant, kb)
            .await?
            .into_iter()
            .filter(|d| d.source == source && d.owner.as_deref() == owner)
            .map(|d| d.id)
            .collect())
    }
    /// How many documents, chunks and FAQ entries a knowledge base holds
    /// (every owner's). Stores count with their indexes; the default loads
    /// the listings.
    async fn kb_counts(&self, tenant: &TenantId, kb: KbId) -> Result<KbCounts> {
        let docs = self.documents(tenant, kb).await?;
        Ok(KbCounts {
            documents: docs.len(),
            chunks: docs.iter().map(|d| d.chunks).sum(),
            faqs: self.faqs(tenant, kb).await?.len(),
        })
    }
    /// FAQ entries of a knowledge base, oldest first. Loads them all:
    /// listings shown to people and whole-knowledge-base tools (export) use
    /// [`StoreRead::faqs_page`].
    async fn faqs(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<FaqEntry>>;
    /// One FAQ entry of a knowledge base, read by id (primary key).
    async fn faq(&self, tenant: &TenantId, kb: KbId, id: crate::FaqId) -> Result<Option<FaqEntry>>;
    /// One page of a knowledge base's FAQ entries that pass `query`'s
    /// filters, in (`created_at`, `id`) order from the cursor on.
    /// Stores read it through an index on (knowledge base, [status,]
    /// `created_at`, `id`), so that a page costs the same wherever it lies
    /// and whatever the knowledge base's size.
    async fn faqs_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &crate::pages::FaqQuery,
    ) -> Result<crate::pages::FaqPage>;
    /// URL sources of a knowledge base, oldest first.
    async fn sources(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<crate::source::Source>>;
    /// The embedding space of the knowledge base's vectors, if it has any.
    async fn embedding_space(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Option<crate::model::EmbeddingSpace>>;
    /// The stored vectors of these passages of a knowledge base (those that
    /// have one; in no particular order), read by id, so that a tool going
    /// through a knowledge base (export) holds a page of them at a time.
    async fn vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[crate::PassageId],
    ) -> Result<Vec<crate::model::PassageVector>>;
    /// The stored sentence vectors of these passages of a knowledge base
    /// (those that have them; in no particular order). The dense path reads
    /// them for its best candidates only, so they are never held in memory
    /// for a whole knowledge base.
    async fn sentence_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[crate::PassageId],
    ) -> Result<Vec<(crate::PassageId, crate::SentenceVectors)>>;
    /// The stored vectors of a second embedder (`model`) of these passages
    /// ([`WriteOp::PutSecondVectors`]; those that have them, in no
    /// particular order), read for the fused candidates only.
    async fn second_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        model: &str,
        ids: &[crate::PassageId],
    ) -> Result<Vec<(crate::PassageId, crate::SentenceVectors)>>;
    /// Recall the store runs itself (PostgreSQL), if it does; `None` (the
    /// default) leaves every path to the engine's in-memory indexes.
    fn store_recall(&self) -> Option<std::sync::Arc<dyn StoreRecall>> {
        None
    }
}

/// Write side of a store. Every call is atomic and scoped by a tenant.
#[async_trait]
pub trait StoreWrite: Send + Sync {
    /// Creates a knowledge base.
    async fn create_kb(
        &self,
        tenant: &TenantId,
        name: &str,
        settings: KbSettings,
    ) -> Result<KnowledgeBase>;
    /// Deletes a knowledge base and everything in it.
    async fn delete_kb(&self, tenant: &TenantId, kb: KbId) -> Result<()>;
    /// Applies all operations or none; returns the knowledge base's new sequence number.
    async fn apply(&self, tenant: &TenantId, kb: KbId, ops: Vec<WriteOp>) -> Result<u64>;
}

/// A persistent cache of embeddings keyed by model id and text hash, shared
/// across knowledge bases and data directories so the same text is embedded
/// once per model on a machine.
#[async_trait]
pub trait EmbeddingCache: Send + Sync {
    /// Cached vectors for `hashes`, in order (`None` where missing).
    async fn get(&self, model_id: &str, hashes: &[String]) -> Result<Vec<Option<Vec<f32>>>>;
    /// Stores vectors.
    async fn put(&self, model_id: &str, items: &[(String, Vec<f32>)]) -> Result<()>;
}

/// A store that reads and writes.
pub trait Store: StoreRead + StoreWrite + crate::log::QueryLogStore {}
impl<T: StoreRead + StoreWrite + crate::log::QueryLogStore> Store for T {}

/// A query term of a store-side lexical path, by its text: the store looks
/// up its statistics itself (terms it does not hold score nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerm {
    /// The analysed term.
    pub text: String,
    /// 1 for the query's own terms, less for expansions and corrections.
    pub weight: f32,
    /// A Chinese character bigram, scored in the bigram field.
    pub gram: bool,
    /// Whether the term may find a passage on its own; a stop word
    /// ([`crate::TokenKind::retrieves`]) only adds to the score of passages
    /// other terms find.
    pub retrieves: bool,
}

/// What a recall path served by the store needs besides the analysed query.
#[derive(Debug, Clone)]
pub struct StoreQuery<'a> {
    /// The analysed query.
    pub query: &'a AnalyzedQuery,
    /// At most this many hits.
    pub k: usize,
    /// Filters, time and viewer.
    pub ctx: &'a SearchCtx,
    /// Retrieval parameters (BM25 and the typo threshold).
    pub params: &'a crate::params::RetrievalParams,
    /// The synonym path's extra terms and its notes, when a group fired
    /// (synonym groups are matched against the query in the engine).
    pub expansions: Option<(Vec<QueryTerm>, Vec<String>)>,
    /// The dense path's query vector, in the knowledge base's space.
    pub vector: Option<&'a [f32]>,
    /// Search the vectors exactly (small knowledge bases, as the in-memory
    /// index does below its HNSW threshold) instead of approximately.
    pub dense_exact: bool,
}

/// What an engine keeps of a knowledge base whose text is searched inside
/// the store ([`StoreRecall::head`]): everything but its text passages,
/// which stay in the store and are read by id
/// ([`StoreRecall::passages`]). Its size does not grow with the corpus.
#[derive(Debug, Clone, Default)]
pub struct RecallHead {
    /// The snapshot with its commit, facts (the fact path runs in the
    /// engine), synonym groups, user dictionary and embedding space; no
    /// text passage and no vector.
    pub snapshot: KbSnapshot,
    /// Searchable text passages (chunks and FAQ entries) at that commit.
    pub passages: usize,
    /// Stored vectors at that commit.
    pub vectors: usize,
    /// Han characters and ASCII letters of the searchable text: what the
    /// knowledge base's language is judged by, as the in-memory index does.
    pub script: (u64, u64),
}

/// Recall that runs inside the store, where the data is (the PostgreSQL
/// store: BM25 over stored term statistics, pg_trgm, pgvector), instead of
/// over the engine's in-memory indexes. A store that serves the text paths
/// holds the passages: the engine keeps only the [`RecallHead`] and reads
/// the passages it shows by id.
#[async_trait]
pub trait StoreRecall: Send + Sync {
    /// Whether the store serves this path.
    fn serves(&self, path: PathKind) -> bool;
    /// The knowledge base without its text passages, consistent with one
    /// commit.
    async fn head(&self, tenant: &TenantId, kb: KbId) -> Result<RecallHead>;
    /// These passages of a knowledge base, whole, as recall may return
    /// them: searchable chunks and FAQ entries, and facts; ids that name
    /// nothing (or nothing searchable) are left out. In no particular order.
    async fn passages(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[crate::PassageId],
    ) -> Result<Vec<crate::model::Passage>>;
    /// Up to `limit` searchable passages (facts included) of a knowledge
    /// base that the viewer may see and that are not in `except`, in
    /// snapshot order.
    async fn passages_except(
        &self,
        tenant: &TenantId,
        kb: KbId,
        viewer: &crate::auth::Viewer,
        except: &[crate::PassageId],
        limit: usize,
    ) -> Result<Vec<crate::PassageId>>;
    /// Runs one path over a knowledge base of a tenant.
    async fn recall(
        &self,
        tenant: &TenantId,
        kb: KbId,
        path: PathKind,
        q: StoreQuery<'_>,
    ) -> Result<RankedList>;
    /// The stored vectors of these passages of a knowledge base of a tenant
    /// (those that have one; in no particular order). The dense path's
    /// feedback for FAQ matching reads the vectors of its nearest entries.
    async fn vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[crate::PassageId],
    ) -> Result<Vec<(crate::PassageId, Vec<f32>)>>;
}

#[cfg(test)]
mod cursor_tests {
    use super::*;

    #[test]
    fn a_cursor_survives_its_text_form_and_nothing_else_reads_as_one() {
        for created_at in [0, 1, -1, i64::MIN, i64::MAX, 1_700_000_000] {
            let c = DocCursor {
                created_at,
                id: DocId::generate(),
            };
            let text = c.encode();
            assert_eq!(text.len(), 48);
            assert_eq!(DocCursor::decode(&text), Some(c));
        }
        let good = DocCursor {
            created_at: 5,
            id: DocId(uuid::Uuid::from_u128(
                0x0190_abcd_ef01_7000_8000_0000_0000_0001,
            )),
        }
        .encode();
        for bad in [
            "",
            "abc",
            &good[1..],
            &format!("{good}0"),
            &good.to_uppercase(),
            &good.replace(|c: char| c.is_ascii_digit(), "g"),
            "-00000000000000000000000000000000000000000000000",
        ] {
            assert_eq!(DocCursor::decode(bad), None, "{bad:?}");
        }
    }
}
