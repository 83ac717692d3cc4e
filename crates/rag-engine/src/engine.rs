//! The engine and its components.

use crate::chunk::ChunkParams;
use crate::dense::DenseIndex;
use crate::embed::CachedEmbedder;
use rag_core::{
    CoreError, Embedder, EmbeddingCache, EmbeddingSpace, KbId, KbSettings, KnowledgeBase, Reranker,
    Store, TenantId, UserError,
};
use rag_lexical::LexicalIndex;
use rag_text::Analyzer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use crate::kb_index::KbIndex;

/// Implementations the engine works with, as trait objects.
#[derive(Clone)]
pub struct Components {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The reranker ([`rag_core::IdentityReranker`] when none is configured).
    pub reranker: Arc<dyn Reranker>,
    /// The embedder of the dense path, when one is configured.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// A second, English-only embedder whose vectors of English passages
    /// rescore the fused candidates of English questions (`second.rs`);
    /// used only beside `embedder`.
    pub second_embedder: Option<Arc<dyn Embedder>>,
    /// The bilingual dictionary of the translated path; without one the
    /// path returns nothing.
    pub dictionary: Option<Arc<crate::Dictionary>>,
    /// The shared embedding cache, when one is configured.
    pub cache: Option<Arc<dyn EmbeddingCache>>,
    /// The LLM answering questions; `None` uses the extractive generator.
    pub generator: Option<Arc<dyn rag_core::Generator>>,
    /// Reads web pages for URL sources; `None`: URL sources cannot sync.
    pub fetcher: Option<Arc<dyn rag_core::Fetcher>>,
    /// Turns uploaded and fetched files into text; `None`: in this process
    /// ([`crate::InProcessExtractor`]). Servers reading untrusted files pass
    /// an isolating one (`rag_sandbox::SandboxExtractor`).
    pub extractor: Option<Arc<dyn crate::Extractor>>,
    /// Calls intent webhooks; `None`: a matched intent falls back to the
    /// knowledge base.
    pub webhook: Option<Arc<dyn rag_core::Webhook>>,
}

impl Components {
    /// Store and reranker only: the lexical paths.
    pub fn lexical(store: Arc<dyn Store>) -> Self {
        Components {
            store,
            reranker: Arc::new(rag_core::IdentityReranker),
            embedder: None,
            second_embedder: None,
            dictionary: None,
            cache: None,
            generator: None,
            fetcher: None,
            extractor: None,
            webhook: None,
        }
    }
}

/// Engine limits and defaults.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Longest accepted query, in bytes.
    pub max_query_bytes: usize,
    /// Largest accepted input file, in bytes.
    pub max_file_bytes: usize,
    /// Chunk sizes.
    pub chunk: ChunkParams,
    /// Vector index: exact below the threshold, HNSW above.
    pub vectors: rag_ann::VectorIndexParams,
    /// Texts per embedding call.
    pub embed_batch: usize,
    /// Whether document passages of several sentences are embedded
    /// sentence by sentence too, for the dense path's rescoring
    /// (`sentences.rs`): better dense recall for about twice the
    /// embedding time of documents.
    pub sentence_vectors: bool,
    /// Caps on URL sources.
    pub sources: crate::sources::SourceLimits,
    /// Where lexical indexes are kept between runs (see
    /// `index_files.rs`); `None` keeps them in memory only.
    pub index_dir: Option<std::path::PathBuf>,
    /// Whether a full build answers the dense path by exact search while
    /// the HNSW graph is built in the background (a server: the first
    /// query does not wait for the graph), or builds the graph before it
    /// answers (an evaluation: every query is answered by the same index).
    pub graph_in_background: bool,
    /// How long a caller waits for the first build of a knowledge base's
    /// indexes in this process (no index in memory, none read from a file
    /// yet) before it gets [`CoreError::IndexBuilding`] while the build
    /// goes on (see `first_build.rs`); `None` waits however long it takes.
    pub first_build_wait: Option<std::time::Duration>,
    /// Whether, after writing its index files, the process reads their bulk
    /// bytes in place too (`in_place.rs`): a server, which lives on.
    pub read_saved_in_place: bool,
    /// Commits applied in memory before the index files are written again
    /// (a full build writes them at once). A lexical save writes only the
    /// segments made since the last one; the dense file is written whole.
    pub save_every_commits: u64,
    /// Passages per segment of a full build that writes its segments out
    /// as it goes (with `index_dir` set, for a knowledge base larger than
    /// one segment: `segmented_build.rs`). Smaller segments hold less in
    /// memory while building; more of them cost queries a little more.
    pub segment_passages: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_query_bytes: 4096,
            max_file_bytes: 64 * 1024 * 1024,
            chunk: ChunkParams::default(),
            vectors: rag_ann::VectorIndexParams::default(),
            embed_batch: 16,
            sentence_vectors: true,
            sources: crate::sources::SourceLimits::default(),
            index_dir: None,
            graph_in_background: true,
            first_build_wait: None,
            read_saved_in_place: false,
            save_every_commits: 64,
            segment_passages: rag_lexical::SEGMENT_PASSAGES,
        }
    }
}

/// The engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) components: Components,
    pub(crate) config: EngineConfig,
    pub(crate) analyzer: Analyzer,
    /// Indexes by knowledge base, each tagged with the commit sequence it reflects.
    indexes: Mutex<HashMap<KbId, Arc<KbIndex>>>,
    /// Per knowledge base, serialises index work so two queries do not
    /// build or update the same index twice.
    build: Mutex<HashMap<KbId, Arc<tokio::sync::Mutex<()>>>>,
    /// The commit of each knowledge base's stored index file, and whether
    /// a save is under way.
    saved: Arc<Mutex<HashMap<KbId, (u64, bool)>>>,
    /// Index files being written.
    pending: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// First builds under way, by knowledge base (see `first_build.rs`).
    pub(crate) first_builds: Mutex<HashMap<KbId, crate::first_build::FirstBuild>>,
    /// Intent indexes by intent list (see `intents.rs`).
    pub(crate) intents: Mutex<HashMap<u64, Arc<crate::intents::IntentIndex>>>,
}

/// An index task that panicked or was cancelled.
pub(crate) fn index_task_failed(e: tokio::task::JoinError) -> CoreError {
    CoreError::Component {
        component: "index".into(),
        message: e.to_string(),
    }
}

/// Knowledge-base names: 1–64 characters, no control characters or slashes,
/// no bidirectional-control marks (which make a name display as another),
/// and not `.` or `..` (which a path or a URL would read as a directory).
fn validate_kb_name(name: &str) -> Result<(), UserError> {
    let n = name.chars().count();
    // U+202A–U+202E (embeddings, overrides), U+2066–U+2069 (isolates),
    // U+200E, U+200F and U+061C (marks).
    let bidi =
        |c: char| matches!(c as u32, 0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C);
    if n == 0
        || n > 64
        || name.trim() != name
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c.is_control() || bidi(c) || c == '/' || c == '\\')
    {
        return Err(UserError::InvalidParam {
            name: "kb",
            reason: "a knowledge-base name has 1 to 64 characters, is not \".\" or \"..\", and has no surrounding spaces, slashes, control or bidirectional-control characters".into(),
        });
    }
    Ok(())
}

impl Engine {
    /// An engine over these components.
    pub fn new(components: Components, config: EngineConfig) -> Self {
        // The models were just loaded: the buffers their files were read
        // and converted in are free now, and go back to the system.
        crate::heap::release_free_memory();
        Engine {
            inner: Arc::new(Inner {
                components,
                config,
                analyzer: Analyzer::new(),
                indexes: Mutex::new(HashMap::new()),
                build: Mutex::new(HashMap::new()),
                saved: Arc::new(Mutex::new(HashMap::new())),
                pending: Mutex::new(Vec::new()),
                first_builds: Mutex::new(HashMap::new()),
                intents: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Drops the cached indexes of a knowledge base (after it was deleted).
    pub(crate) fn forget_index(&self, kb: KbId) {
        self.inner
            .indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&kb);
        if let Some(dir) = &self.inner.config.index_dir {
            crate::index_files::remove_lexical(dir, kb);
            crate::index_files::remove_dense(dir, kb);
        }
    }

    /// The extractor of uploaded and fetched files.
    pub fn extractor(&self) -> Arc<dyn crate::Extractor> {
        self.inner
            .components
            .extractor
            .clone()
            .unwrap_or_else(|| Arc::new(crate::InProcessExtractor))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.components.store
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Creates a knowledge base.
    pub async fn create_kb(
        &self,
        tenant: &TenantId,
        name: &str,
        settings: KbSettings,
    ) -> Result<KnowledgeBase, CoreError> {
        validate_kb_name(name)?;
        settings.retrieval.validate()?;
        settings.answer.validate()?;
        rag_core::validate_intents(&settings.intents)?;
        settings.drafts.validate()?;
        self.store().create_kb(tenant, name, settings).await
    }

    /// A knowledge base by name, or [`UserError::UnknownKb`].
    pub async fn kb(&self, tenant: &TenantId, name: &str) -> Result<KnowledgeBase, CoreError> {
        self.store().kb_by_name(tenant, name).await?.ok_or_else(|| {
            UserError::UnknownKb {
                name: name.to_owned(),
            }
            .into()
        })
    }

    /// The embedder with its cache, when one is configured.
    pub fn embedder(&self) -> Option<CachedEmbedder> {
        let c = &self.inner.components;
        c.embedder
            .clone()
            .map(|e| CachedEmbedder::new(e, c.cache.clone()))
    }

    /// The second embedder behind the cache, when one is configured beside
    /// the first.
    pub fn second_embedder(&self) -> Option<CachedEmbedder> {
        let c = &self.inner.components;
        c.embedder.as_ref()?;
        c.second_embedder
            .clone()
            .map(|e| CachedEmbedder::new(e, c.cache.clone()))
    }

    /// The translated path's bilingual dictionary, when one is configured.
    pub fn dictionary(&self) -> Option<Arc<crate::Dictionary>> {
        self.inner.components.dictionary.clone()
    }

    /// The configured LLM, if any (the extractive generator answers otherwise).
    pub fn generator(&self) -> Option<Arc<dyn rag_core::Generator>> {
        self.inner.components.generator.clone()
    }

    /// The reranker ([`rag_core::IdentityReranker`] when none is configured).
    pub fn reranker(&self) -> Arc<dyn Reranker> {
        self.inner.components.reranker.clone()
    }

    /// [`Engine::index`] without the first-build bound: waits for a
    /// build however long it takes.
    pub(crate) async fn index_now(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
    ) -> Result<Arc<KbIndex>, CoreError> {
        let seq = self.store().kb_seq(tenant, kb.id).await?;
        if let Some(ix) = self.cached(kb.id, seq) {
            return Ok(ix);
        }
        let lock = self.build_lock(kb.id);
        let _guard = lock.lock().await;
        let seq = self.store().kb_seq(tenant, kb.id).await?;
        let previous = self.cached_any(kb.id);
        if let Some(ix) = previous.as_ref().filter(|ix| ix.seq() == seq) {
            return Ok(ix.clone());
        }
        let started = std::time::Instant::now();
        if let Some(recall) = self.text_in_store() {
            // The store holds the text: read the head of its commit.
            let head = recall.head(tenant, kb.id).await?;
            let analyzer = self.inner.analyzer.clone();
            let index = tokio::task::spawn_blocking(move || KbIndex::of_head(&analyzer, head))
                .await
                .map_err(index_task_failed)?;
            tracing::debug!(kb = %kb.name, seq = index.seq(), passages = index.text_passages(), us = started.elapsed().as_micros() as u64, "read the head");
            return Ok(self.install(kb.id, Arc::new(index)));
        }
        let previous = match previous {
            Some(p) => Some(p),
            None => self.load_stored(tenant, kb, seq).await?,
        };
        if let Some(ix) = previous.as_ref().filter(|ix| ix.seq() == seq) {
            return Ok(self.install(kb.id, ix.clone()));
        }
        if let Some(old) = previous.filter(|ix| ix.seq() < seq) {
            if let Some(changes) = self.store().changes_since(tenant, kb.id, old.seq()).await? {
                let updated = tokio::task::spawn_blocking(move || old.apply(&changes))
                    .await
                    .map_err(index_task_failed)?;
                if let Some((index, report)) = updated {
                    tracing::debug!(kb = %kb.name, seq = index.seq(), analysed = report.analysed, removed = report.removed, merged = report.merged, segments = report.segments, us = started.elapsed().as_micros() as u64, "updated indexes");
                    let index = self.install(kb.id, Arc::new(index));
                    self.save_in_background(kb.id, &index, false);
                    return Ok(index);
                }
            }
        }
        let analyzer = self.inner.analyzer.clone();
        let vector_params = self.inner.config.vectors;
        let store_dense = self.store_dense();
        let background = self.inner.config.graph_in_background;
        // A store that searches vectors itself sends only their number.
        let (snapshot, vector_count, lexical) = match self.inner.config.index_dir.clone() {
            // Streamed into segments written as they are built.
            Some(dir) => {
                let per_segment = self.inner.config.segment_passages;
                crate::segmented_build::build_streamed(
                    self.store().clone(),
                    tenant,
                    kb.id,
                    analyzer,
                    dir,
                    per_segment,
                )
                .await?
            }
            None => {
                let (mut snapshot, vectors) = self.store().index_snapshot(tenant, kb.id).await?;
                tokio::task::spawn_blocking(move || {
                    // A build that never ends, for the first-build tests.
                    rag_core::failpoint::hit("index.build");
                    // The passages move into the index: the dense build
                    // reads only the snapshot's vectors.
                    let lexical = LexicalIndex::build_taking(&analyzer, &mut snapshot);
                    (snapshot, vectors, lexical)
                })
                .await
                .map_err(index_task_failed)?
            }
        };
        let index = tokio::task::spawn_blocking(move || {
            let dense = if store_dense {
                None
            } else {
                DenseIndex::build(&snapshot, &lexical, vector_params).map(|r| {
                    r.and_then(|mut d| {
                        if !background {
                            d.build_graph_now()?;
                        }
                        Ok(d)
                    })
                    .map_err(|e| e.to_string())
                })
            };
            KbIndex {
                lexical,
                dense,
                space: snapshot.space.clone(),
                vectors: vector_count,
                store_dense,
                store_passages: None,
            }
        })
        .await
        .map_err(index_task_failed)?;
        tracing::debug!(kb = %kb.name, seq = index.seq(), passages = index.lexical.len(), ms = started.elapsed().as_millis() as u64, "built indexes");
        let pending = match &index.dense {
            Some(Ok(d)) => d.graph_pending(),
            _ => None,
        };
        let storable =
            index.store_dense || index.space.is_none() || matches!(index.dense, Some(Ok(_)));
        let index = self.install(kb.id, Arc::new(index));
        match pending {
            // Saved once the graph is in (a file without it would make the
            // next process build the graph before its first query).
            Some(part) => self.build_graph_in_background(kb.id, part),
            None if storable => self.save_in_background(kb.id, &index, true),
            None => {}
        }
        Ok(index)
    }

    /// Builds the graph of a freshly built dense part off the query path,
    /// then, under the knowledge base's lock, swaps it into the current
    /// index (whatever commit it has reached, as long as the part is still
    /// one of its parts) and stores the indexes.
    fn build_graph_in_background(&self, kb: KbId, part: Arc<crate::dense::Part>) {
        let engine = self.clone();
        let params = self.inner.config.vectors;
        let handle = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let graph = match DenseIndex::graph_part(&part, params) {
                Ok(g) => Arc::new(g),
                Err(e) => {
                    tracing::warn!(kb = %kb, error = %e, "cannot build the vector graph; exact search goes on");
                    return;
                }
            };
            let lock = engine.build_lock(kb);
            let guard = lock.blocking_lock();
            let Some(current) = engine.cached_any(kb) else {
                return;
            };
            let Some(Ok(dense)) = &current.dense else {
                return;
            };
            let Some(dense) = dense.with_part_replaced(&part, graph) else {
                return;
            };
            let next = Arc::new(KbIndex {
                lexical: current.lexical.clone(),
                vectors: dense.len(),
                dense: Some(Ok(dense)),
                space: current.space.clone(),
                store_dense: current.store_dense,
                store_passages: current.store_passages,
            });
            // Same commit as the cached index: `install` replaces it.
            let next = engine.install(kb, next);
            drop(guard);
            tracing::debug!(kb = %kb, seq = next.seq(), ms = started.elapsed().as_millis() as u64, "built the vector graph");
            engine.save_in_background(kb, &next, true);
        });
        let mut pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|h| !h.is_finished());
        pending.push(handle);
    }

    /// Waits for the index files being written (a short-lived process calls
    /// this before it exits, so its builds are not lost).
    pub async fn flush_index_files(&self) {
        // A graph built in the background queues its own save: loop until
        // nothing is left.
        loop {
            let pending: Vec<_> =
                std::mem::take(&mut *self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()));
            if pending.is_empty() {
                break;
            }
            for handle in pending {
                let _ = handle.await;
            }
        }
    }

    /// The stored indexes of a knowledge base, when there are ones this
    /// build can read, of a commit not after `seq`: the lexical index, and
    /// the dense one of the same commit when the engine searches the
    /// vectors itself (without it, nothing stored is used).
    async fn load_stored(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
        seq: u64,
    ) -> Result<Option<Arc<KbIndex>>, CoreError> {
        let Some(dir) = self.inner.config.index_dir.clone() else {
            return Ok(None);
        };
        let store_dense = self.store_dense();
        let space = self.store().embedding_space(tenant, kb.id).await?;
        let analyzer = self.inner.analyzer.clone();
        let kb_id = kb.id;
        let started = std::time::Instant::now();
        let params = self.inner.config.vectors;
        let want_dense = space.clone().filter(|_| !store_dense);
        let loaded = tokio::task::spawn_blocking(move || {
            // Mapped too: the tables are read into memory, the postings,
            // n-gram lists and match texts stay in the files' pages.
            let (manifest, segments, releases) =
                crate::index_files::open_lexical(&dir, kb_id, true)?;
            let lex_seq = manifest.seq;
            if lex_seq > seq {
                return None;
            }
            let dense = match &want_dense {
                None => None,
                Some(space) => {
                    // Mapped: the full-precision vectors stay on disk and
                    // only the rows searches rescore are paged in.
                    let vec = crate::index_files::open_dense(&dir, kb_id, true)?;
                    if DenseIndex::encoded_seq((*vec).as_ref()) != Some(lex_seq) {
                        return None;
                    }
                    match DenseIndex::decode_shared(&vec, space, params) {
                        Ok((d, _)) => Some(d),
                        Err(e) => {
                            tracing::warn!(kb = %kb_id, error = %e, "the stored dense index is not usable; building it");
                            return None;
                        }
                    }
                }
            };
            match LexicalIndex::decode_manifest(&analyzer, manifest, &segments, false) {
                Ok(ix) => {
                    // The tables are on the heap now: their pages need not stay.
                    releases.iter().for_each(crate::mapped::Release::pages);
                    Some((ix, dense))
                }
                Err(e) => {
                    tracing::warn!(kb = %kb_id, error = %e, "the stored index is not usable; building it");
                    None
                }
            }
        })
        .await
        .map_err(index_task_failed)?;
        let Some((lexical, dense)) = loaded else {
            return Ok(None);
        };
        tracing::debug!(kb = %kb.name, seq = lexical.seq(), vectors = dense.as_ref().map_or(0, |d| d.len()), ms = started.elapsed().as_millis() as u64, "read the stored indexes");
        self.inner
            .saved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kb.id, (lexical.seq(), false));
        Ok(Some(Arc::new(KbIndex {
            lexical,
            vectors: dense.as_ref().map_or(0, |d| d.len()),
            dense: dense.map(Ok),
            space,
            store_dense,
            store_passages: None,
        })))
    }

    /// Writes the index to its file, off the runtime and without making
    /// anyone wait: after a full build (`now`), else once enough commits
    /// were applied since the last write.
    fn save_in_background(&self, kb: KbId, index: &Arc<KbIndex>, now: bool) {
        let Some(dir) = self.inner.config.index_dir.clone() else {
            return;
        };
        // While a graph is being built the task that swaps it in saves;
        // a file without it would make the next process build it first.
        if matches!(&index.dense, Some(Ok(d)) if d.graph_pending().is_some()) {
            return;
        }
        {
            let mut saved = self.inner.saved.lock().unwrap_or_else(|p| p.into_inner());
            let entry = saved.entry(kb).or_insert((0, false));
            if entry.1
                || (!now && index.seq() < entry.0 + self.inner.config.save_every_commits.max(1))
            {
                return;
            }
            entry.1 = true;
        }
        let (index, saved, engine) = (index.clone(), self.inner.saved.clone(), self.clone());
        let handle = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            // The dense file first: a crash between the two leaves files
            // of different commits, which are not used together.
            let result = match (&index.dense, index.store_dense) {
                (Some(Ok(d)), false) => d
                    .encode(index.seq())
                    .map_err(std::io::Error::other)
                    .and_then(|b| {
                        crate::index_files::save_dense(&dir, kb, &b).map(|()| b.len() as u64)
                    }),
                _ => {
                    crate::index_files::remove_dense(&dir, kb);
                    Ok(0)
                }
            }
            .and_then(|dense| {
                crate::index_files::save_lexical(&dir, kb, &index.lexical, None).map(|l| (dense, l))
            });
            if let Ok((dense, lexical)) = &result {
                tracing::info!(
                    kb = %kb,
                    seq = index.seq(),
                    segments_written = lexical.written.len(),
                    lexical_bytes = lexical.bytes,
                    dense_bytes = *dense,
                    ms = started.elapsed().as_millis() as u64,
                    "stored the index files"
                );
                if engine.inner.config.read_saved_in_place {
                    engine.read_saved_in_place(&dir, kb, &index, &lexical.written);
                }
            }
            let mut saved = saved.lock().unwrap_or_else(|p| p.into_inner());
            let entry = saved.entry(kb).or_insert((0, false));
            entry.1 = false;
            match result {
                Ok(_) => entry.0 = entry.0.max(index.seq()),
                Err(e) => tracing::warn!(kb = %kb, error = %e, "cannot store the index"),
            }
        });
        let mut pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|h| !h.is_finished());
        pending.push(handle);
    }

    /// The store's recall when it serves every text path, and so holds the
    /// text: the engine then keeps each knowledge base's head only.
    pub(crate) fn text_in_store(&self) -> Option<Arc<dyn rag_core::StoreRecall>> {
        use rag_core::PathKind::{Bm25, Fuzzy, Substring, Synonym};
        self.store().store_recall().filter(|r| {
            [Bm25, Substring, Fuzzy, Synonym]
                .iter()
                .all(|p| r.serves(*p))
        })
    }

    fn store_dense(&self) -> bool {
        self.store()
            .store_recall()
            .is_some_and(|r| r.serves(rag_core::PathKind::Dense))
    }

    pub(crate) fn install(&self, kb: KbId, index: Arc<KbIndex>) -> Arc<KbIndex> {
        let mut map = self.inner.indexes.lock().unwrap_or_else(|p| p.into_inner());
        // Never replace a newer index with an older one.
        if map.get(&kb).is_none_or(|ix| ix.seq() <= index.seq()) {
            map.insert(kb, index.clone());
        }
        index
    }

    /// The lock serialising index work on one knowledge base.
    pub(crate) fn build_lock(&self, kb: KbId) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.inner.build.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(kb).or_default().clone()
    }

    pub(crate) fn cached_any(&self, kb: KbId) -> Option<Arc<KbIndex>> {
        let map = self.inner.indexes.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&kb).cloned()
    }

    fn cached(&self, kb: KbId, seq: u64) -> Option<Arc<KbIndex>> {
        let map = self.inner.indexes.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&kb).filter(|ix| ix.seq() == seq).cloned()
    }
}

impl Engine {
    /// Checks that the configured embedder may write into a knowledge base
    /// whose vectors are in `space`.
    pub(crate) fn check_space(
        &self,
        space: Option<&EmbeddingSpace>,
        embedder: &CachedEmbedder,
        dims: usize,
    ) -> Result<(), CoreError> {
        match space {
            Some(s)
                if s.model_id != embedder.model().model_id() || (dims != 0 && s.dims != dims) =>
            {
                Err(UserError::EmbeddingSpaceMismatch {
                    stored_model: s.model_id.clone(),
                    stored_dims: s.dims,
                    configured_model: embedder.model().model_id().to_owned(),
                    configured_dims: dims,
                }
                .into())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::validate_kb_name;

    #[test]
    fn knowledge_base_names_refuse_dot_names_controls_and_bidi_marks() {
        for ok in [
            "shop",
            "商店",
            "faq-2024",
            "a.b",
            "...",
            "Ünïcödé name",
            "שלום",
        ] {
            assert!(validate_kb_name(ok).is_ok(), "{ok:?}");
        }
        let long = "x".repeat(65);
        let mut bad = vec![
            "",
            ".",
            "..",
            " shop",
            "shop ",
            "a/b",
            "a\\b",
            "a\nb",
            "a\u{7f}b",
            "a\u{85}b",
            long.as_str(),
        ];
        let bidi: Vec<String> = ('\u{202A}'..='\u{202E}')
            .chain('\u{2066}'..='\u{2069}')
            .chain(['\u{200E}', '\u{200F}', '\u{061C}'])
            .map(|c| format!("shop{c}txt"))
            .collect();
        bad.extend(bidi.iter().map(String::as_str));
        for name in bad {
            assert!(validate_kb_name(name).is_err(), "{name:?} was accepted");
        }
    }
}
