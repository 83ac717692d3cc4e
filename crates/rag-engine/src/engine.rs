//! The engine and its components.

use crate::chunk::ChunkParams;
use rag_core::{CoreError, KbId, KbSettings, KnowledgeBase, Reranker, Store, TenantId, UserError};
use rag_lexical::LexicalIndex;
use rag_text::Analyzer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Implementations the engine works with, as trait objects.
#[derive(Clone)]
pub struct Components {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The reranker ([`rag_core::IdentityReranker`] when none is configured).
    pub reranker: Arc<dyn Reranker>,
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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { max_query_bytes: 4096, max_file_bytes: 64 * 1024 * 1024, chunk: ChunkParams::default() }
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
    /// Lexical indexes by knowledge base, each tagged with the commit sequence it reflects.
    indexes: Mutex<HashMap<KbId, Arc<LexicalIndex>>>,
    /// Serialises index builds so two queries do not build the same index twice.
    build: tokio::sync::Mutex<()>,
}

/// Knowledge-base names: 1–64 characters, no control characters or slashes.
fn validate_kb_name(name: &str) -> Result<(), UserError> {
    let n = name.chars().count();
    if n == 0 || n > 64 || name.trim() != name || name.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Err(UserError::InvalidParam {
            name: "kb",
            reason: "a knowledge-base name has 1 to 64 characters, no surrounding spaces, slashes or control characters".into(),
        });
    }
    Ok(())
}

impl Engine {
    /// An engine over these components.
    pub fn new(components: Components, config: EngineConfig) -> Self {
        Engine {
            inner: Arc::new(Inner {
                components,
                config,
                analyzer: Analyzer::new(),
                indexes: Mutex::new(HashMap::new()),
                build: tokio::sync::Mutex::new(()),
            }),
        }
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
    pub async fn create_kb(&self, tenant: &TenantId, name: &str, settings: KbSettings) -> Result<KnowledgeBase, CoreError> {
        validate_kb_name(name)?;
        settings.retrieval.validate()?;
        self.store().create_kb(tenant, name, settings).await
    }

    /// A knowledge base by name, or [`UserError::UnknownKb`].
    pub async fn kb(&self, tenant: &TenantId, name: &str) -> Result<KnowledgeBase, CoreError> {
        self.store()
            .kb_by_name(tenant, name)
            .await?
            .ok_or_else(|| UserError::UnknownKb { name: name.to_owned() }.into())
    }

    /// The lexical index of a knowledge base at its current commit; built
    /// (off the async runtime) when missing or stale.
    pub async fn index(&self, tenant: &TenantId, kb: &KnowledgeBase) -> Result<Arc<LexicalIndex>, CoreError> {
        let seq = self.store().kb_seq(tenant, kb.id).await?;
        if let Some(ix) = self.cached(kb.id, seq) {
            return Ok(ix);
        }
        let _guard = self.inner.build.lock().await;
        if let Some(ix) = self.cached(kb.id, seq) {
            return Ok(ix);
        }
        let snapshot = self.store().snapshot(tenant, kb.id).await?;
        let analyzer = self.inner.analyzer.clone();
        let started = std::time::Instant::now();
        let index = tokio::task::spawn_blocking(move || LexicalIndex::build(&analyzer, &snapshot))
            .await
            .map_err(|e| CoreError::Component { component: "lexical index".into(), message: e.to_string() })?;
        tracing::debug!(kb = %kb.name, seq = index.seq(), passages = index.len(), ms = started.elapsed().as_millis() as u64, "built lexical index");
        let index = Arc::new(index);
        self.inner.indexes.lock().unwrap_or_else(|p| p.into_inner()).insert(kb.id, index.clone());
        Ok(index)
    }

    fn cached(&self, kb: KbId, seq: u64) -> Option<Arc<LexicalIndex>> {
        let map = self.inner.indexes.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&kb).filter(|ix| ix.seq() == seq).cloned()
    }
}
