//! Shared server state.

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::sessions::Sessions;
use crate::web::pca::MapCache;
use rag_core::{KeyStore, RankedList};
use rag_engine::Engine;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Server limits. Every limit answers with a clear error code.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest JSON body, in bytes.
    pub max_json_bytes: usize,
    /// Largest upload body, in bytes.
    pub max_upload_bytes: usize,
    /// Most files in one upload.
    pub max_files_per_upload: usize,
    /// Largest per-path candidate count or top-k a request may ask for.
    pub max_top_k: usize,
    /// Queries one key may run at the same time.
    pub max_concurrent_queries_per_key: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_json_bytes: 1024 * 1024,
            max_upload_bytes: 64 * 1024 * 1024,
            max_files_per_upload: 32,
            max_top_k: 200,
            max_concurrent_queries_per_key: 16,
        }
    }
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// Key-less local mode (loopback only).
    pub open: bool,
    /// Whether query texts appear in request logs.
    pub log_queries: bool,
    /// Limits.
    pub limits: Limits,
    /// Web origins (e.g. `https://shop.example`) whose pages may call the API
    /// from the browser (the chat widget on a customer's site). None by default.
    pub cors_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 3210)),
            open: false,
            log_queries: false,
            limits: Limits::default(),
            cors_origins: Vec::new(),
        }
    }
}

/// Candidate lists of one retrieval, kept for re-fusing with new weights.
#[derive(Debug, Clone)]
pub(crate) struct CachedCandidates {
    pub tenant: rag_core::TenantId,
    /// The lists hold what this viewer may see; other viewers may not re-fuse them.
    pub viewer: rag_core::Viewer,
    pub kb: String,
    pub lists: Vec<RankedList>,
    /// The λ the retrieval applied, if any.
    pub applied_lambda: Option<f64>,
    pub created: Instant,
}

/// Everything handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: Engine,
    /// API keys.
    pub keys: Arc<dyn KeyStore>,
    /// Configuration.
    pub config: Arc<ServerConfig>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) ready: Arc<AtomicBool>,
    slots: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    pub(crate) candidates: Arc<Mutex<HashMap<String, CachedCandidates>>>,
    /// Browser login sessions.
    pub(crate) sessions: Arc<Sessions>,
    /// Embedding-map projections, by knowledge base and commit sequence.
    pub(crate) maps: Arc<MapCache>,
}

/// How long cached candidate lists stay available for re-fusion.
pub(crate) const CANDIDATES_TTL: Duration = Duration::from_secs(15 * 60);
/// Most cached candidate sets.
const CANDIDATES_MAX: usize = 1024;

impl AppState {
    /// State over an engine and a key store.
    pub fn new(engine: Engine, keys: Arc<dyn KeyStore>, config: ServerConfig) -> Self {
        AppState {
            engine,
            keys,
            config: Arc::new(config),
            metrics: Arc::new(Metrics::default()),
            ready: Arc::new(AtomicBool::new(false)),
            slots: Arc::new(Mutex::new(HashMap::new())),
            candidates: Arc::new(Mutex::new(HashMap::new())),
            sessions: Arc::new(Sessions::default()),
            maps: Arc::new(MapCache::default()),
        }
    }

    /// A query slot for this key, or 429 when it has too many queries running.
    pub(crate) fn query_slot(&self, key_id: &str) -> Result<OwnedSemaphorePermit, ApiError> {
        let sem = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .entry(key_id.to_owned())
                .or_insert_with(|| {
                    Arc::new(Semaphore::new(
                        self.config.limits.max_concurrent_queries_per_key,
                    ))
                })
                .clone()
        };
        sem.try_acquire_owned().map_err(|_| {
            let mut e = ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_queries",
                format!(
                    "this key already runs {} queries; retry when one finishes",
                    self.config.limits.max_concurrent_queries_per_key
                ),
            );
            e.retry_after = Some(1);
            e
        })
    }

    /// Keeps candidate lists for re-fusion; returns their id.
    pub(crate) fn keep_candidates(&self, c: CachedCandidates) -> String {
        let id = uuid::Uuid::now_v7().to_string();
        let mut map = self.candidates.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, v| v.created.elapsed() < CANDIDATES_TTL);
        if map.len() >= CANDIDATES_MAX {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, v)| v.created)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(id.clone(), c);
        id
    }
}
