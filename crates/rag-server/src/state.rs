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
    /// Ingests (uploads, URL-source syncs) one key may run at the same time.
    pub max_concurrent_ingests_per_key: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_json_bytes: 1024 * 1024,
            max_upload_bytes: 64 * 1024 * 1024,
            max_files_per_upload: 32,
            max_top_k: 200,
            max_concurrent_queries_per_key: 16,
            max_concurrent_ingests_per_key: 2,
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
    /// The factor the automatic λ rule put on the second embedder's weight.
    pub second_weight_factor: Option<f64>,
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
    ingest_slots: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    /// Which widget key each recent answer was given to (feedback check).
    pub(crate) answers: Arc<Mutex<Answers>>,
    pub(crate) candidates: Arc<Mutex<HashMap<String, CachedCandidates>>>,
    /// Browser login sessions.
    pub(crate) sessions: Arc<Sessions>,
    /// Embedding-map projections, by knowledge base and commit sequence.
    pub(crate) maps: Arc<MapCache>,
}

/// A permit of a per-key semaphore of `max` permits, if one is free.
fn slot(
    slots: &Mutex<HashMap<String, Arc<Semaphore>>>,
    key_id: &str,
    max: usize,
) -> Option<OwnedSemaphorePermit> {
    let sem = {
        let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(key_id.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(max)))
            .clone()
    };
    sem.try_acquire_owned().ok()
}

/// 429 with `retry-after: 1`.
fn busy(code: &'static str, message: String) -> ApiError {
    let mut e = ApiError::new(axum::http::StatusCode::TOO_MANY_REQUESTS, code, message);
    e.retry_after = Some(1);
    e
}

/// How long a widget may leave feedback on an answer it was given.
pub(crate) const ANSWERS_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Most answers remembered (the oldest are forgotten first).
const ANSWERS_MAX: usize = 100_000;

/// The widget key each recent answer (query-log id) was given to, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    by_id: HashMap<String, (String, Instant)>,
    order: std::collections::VecDeque<(String, Instant)>,
}

impl Answers {
    fn insert(&mut self, query_id: &str, key_id: &str, now: Instant) {
        while let Some((id, at)) = self.order.front() {
            if self.order.len() < ANSWERS_MAX && now.duration_since(*at) < ANSWERS_TTL {
                break;
            }
            if self.by_id.get(id).is_some_and(|(_, a)| a == at) {
                self.by_id.remove(id);
            }
            self.order.pop_front();
        }
        self.by_id
            .insert(query_id.to_owned(), (key_id.to_owned(), now));
        self.order.push_back((query_id.to_owned(), now));
    }

    fn given_to(&self, query_id: &str, now: Instant) -> Option<&str> {
        self.by_id
            .get(query_id)
            .filter(|(_, at)| now.duration_since(*at) < ANSWERS_TTL)
            .map(|(k, _)| k.as_str())
    }
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
            ingest_slots: Arc::new(Mutex::new(HashMap::new())),
            answers: Arc::new(Mutex::new(Answers::default())),
            candidates: Arc::new(Mutex::new(HashMap::new())),
            sessions: Arc::new(Sessions::default()),
            maps: Arc::new(MapCache::default()),
        }
    }

    /// A query slot for this key, or 429 when it has too many queries running.
    pub(crate) fn query_slot(&self, key_id: &str) -> Result<OwnedSemaphorePermit, ApiError> {
        let max = self.config.limits.max_concurrent_queries_per_key;
        slot(&self.slots, key_id, max).ok_or_else(|| {
            busy(
                "too_many_queries",
                format!("this key already runs {max} queries; retry when one finishes"),
            )
        })
    }

    /// An ingest slot for this key (an upload or a URL-source sync), or 429
    /// when it has too many ingests running.
    pub(crate) fn ingest_slot(&self, key_id: &str) -> Result<OwnedSemaphorePermit, ApiError> {
        let max = self.config.limits.max_concurrent_ingests_per_key;
        slot(&self.ingest_slots, key_id, max).ok_or_else(|| {
            busy(
                "too_many_ingests",
                format!("this key already runs {max} ingests; retry when one finishes"),
            )
        })
    }

    /// Notes that the answer logged as `query_id` was given to widget key `key_id`.
    pub(crate) fn remember_answer(&self, query_id: &str, key_id: &str) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(query_id, key_id, Instant::now());
    }

    /// Whether the answer logged as `query_id` was given to widget key `key_id`
    /// (within [`ANSWERS_TTL`], by this process).
    pub(crate) fn answered_to(&self, query_id: &str, key_id: &str) -> bool {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .given_to(query_id, Instant::now())
            == Some(key_id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_remembered_for_their_key_for_a_day_and_bounded() {
        let mut a = Answers::default();
        let t0 = Instant::now();
        a.insert("q1", "widget-a", t0);
        assert_eq!(a.given_to("q1", t0), Some("widget-a"));
        assert_eq!(a.given_to("q2", t0), None);
        let later = t0 + ANSWERS_TTL + Duration::from_secs(1);
        assert_eq!(a.given_to("q1", later), None, "expired");
        a.insert("q2", "widget-b", later);
        assert_eq!(a.by_id.len(), 1, "the expired answer is forgotten");
        for i in 0..ANSWERS_MAX + 10 {
            a.insert(&format!("n{i}"), "widget-a", later);
        }
        assert!(a.by_id.len() <= ANSWERS_MAX && a.order.len() <= ANSWERS_MAX);
        assert_eq!(a.given_to("q2", later), None, "the oldest went first");
        let last = format!("n{}", ANSWERS_MAX + 9);
        assert_eq!(a.given_to(&last, later), Some("widget-a"));
    }
}
