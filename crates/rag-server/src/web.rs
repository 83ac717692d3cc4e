//! The workbench: a browser UI served by the server itself.
//!
//! The page and its ES modules are embedded in the binary (`assets/`, plain
//! JavaScript, no build step and nothing third-party). Every page talks to the
//! same `/api/v1` routes as any other client. Browsers authenticate either in
//! open mode (loopback, no key) or with a session cookie set by
//! `POST /api/v1/session` after the page asked for an API key once; see
//! [`crate::auth`] for the CSRF rule on writes.

use crate::auth::{self, Caller, SESSION_COOKIE, SESSION_MAX};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rag_core::{PassageId, Role, TenantId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// An embedded file: name under `/assets/`, content type, bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX_HTML: &str = include_str!("../assets/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/app.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/app.js"),
    },
    Asset {
        name: "core.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/core.js"),
    },
    Asset {
        name: "ask.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/ask.js"),
    },
    Asset {
        name: "lab.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/lab.js"),
    },
    Asset {
        name: "corpus.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/corpus.js"),
    },
    Asset {
        name: "ingest.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/ingest.js"),
    },
    Asset {
        name: "map.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/map.js"),
    },
    Asset {
        name: "widget.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/widget.css"),
    },
    Asset {
        name: "widget-demo.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/widget-demo.css"),
    },
    Asset {
        name: "settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/settings.js"),
    },
    Asset {
        name: "insights.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/insights.js"),
    },
];

/// Scripts and styles come from this origin only; no inline script or handler
/// can run, so even a rendering bug could not execute a document's HTML.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn with_headers(content_type: &'static str, body: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

async fn index() -> Response {
    with_headers("text/html; charset=utf-8", INDEX_HTML)
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => with_headers(a.content_type, a.body),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

const WIDGET_JS: &str = include_str!("../assets/widget.js");
const WIDGET_DEMO: &str = include_str!("../assets/widget-demo.html");

/// The page and its assets (outside `/api`), the embeddable chat widget
/// (`/widget.js`) and a mock shop page showing it (`/widget-demo`).
pub(crate) fn pages() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
        .route(
            "/widget.js",
            get(|| async { with_headers("text/javascript; charset=utf-8", WIDGET_JS) }),
        )
        .route(
            "/widget-demo",
            get(|| async { with_headers("text/html; charset=utf-8", WIDGET_DEMO) }),
        )
}

/// Workbench routes under `/api/v1` (listed in the OpenAPI document).
pub(crate) fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(whoami, login, logout))
        .routes(routes!(embedding_map))
        .routes(routes!(system_info))
        .routes(routes!(test_embedder))
        .routes(routes!(test_llm))
        .routes(routes!(test_reranker))
}

/// How the browser is authenticated.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionInfo {
    /// `open` (key-less local mode), `session` (cookie) or `key` (a bearer key on the request).
    pub mode: String,
    /// The role of the key behind the request.
    pub role: Role,
    /// The tenant everything is scoped to.
    pub tenant: String,
    /// Whether editing is allowed.
    pub can_write: bool,
    /// The token cookie-authenticated writes send in `x-csrf-token` (session mode only).
    pub csrf_token: Option<String>,
    /// Seconds the session lasts at most (session mode only).
    pub expires_in_s: Option<u64>,
}

fn info(caller: &Caller, mode: &str, csrf_token: Option<String>) -> SessionInfo {
    SessionInfo {
        mode: mode.to_owned(),
        role: caller.role,
        tenant: caller.tenant.0.clone(),
        can_write: caller.role.can_write(),
        expires_in_s: csrf_token.as_ref().map(|_| SESSION_MAX.as_secs()),
        csrf_token,
    }
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION) || headers.contains_key("x-api-key")
}

/// Who the request acts as, and the CSRF token of its browser session.
#[utoipa::path(get, path = "/session", tag = "workbench",
    responses((status = 200, body = SessionInfo), (status = 401, body = ErrorBody)))]
async fn whoami(caller: Caller, headers: HeaderMap) -> Json<SessionInfo> {
    let mode = if has_bearer(&headers) {
        "key"
    } else if let Some(csrf) = auth::session_csrf(&headers) {
        return Json(info(&caller, "session", Some(csrf)));
    } else if caller.key_id == "open" {
        "open"
    } else {
        "key"
    };
    Json(info(&caller, mode, None))
}

/// A login.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    /// An API key.
    pub key: String,
}

/// Exchanges an API key for a browser session: sets an HttpOnly, SameSite=Strict
/// cookie and returns the CSRF token that writes must send in `x-csrf-token`.
#[utoipa::path(post, path = "/session", tag = "workbench", request_body = LoginBody,
    responses((status = 200, body = SessionInfo), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Response, ApiError> {
    let key = body.key.trim();
    if key.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_key",
            "unknown API key",
        ));
    }
    let hash = auth::hash_key(key);
    let k =
        state.keys.key_by_hash(&hash).await?.ok_or_else(|| {
            ApiError::new(StatusCode::UNAUTHORIZED, "invalid_key", "unknown API key")
        })?;
    if k.revoked {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "key_revoked",
            "this API key was revoked",
        ));
    }
    auth::end_session(&headers);
    let caller = Caller {
        key_id: k.id,
        tenant: k.tenant,
        role: k.role,
        owner: k.owner,
        kb: k.kb,
    };
    let (id, csrf) = auth::start_session(hash);
    tracing::info!(key_id = %caller.key_id, "browser session started");
    let cookie = format!(
        "{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
        SESSION_MAX.as_secs()
    );
    let mut res = Json(info(&caller, "session", Some(csrf))).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(res)
}

/// Ends the browser session and clears its cookie.
#[utoipa::path(delete, path = "/session", tag = "workbench", responses((status = 204)))]
async fn logout(headers: HeaderMap) -> Response {
    // Ending a session needs no CSRF token: the worst a forged logout does is log the user out.
    auth::end_session(&headers);
    let mut res = StatusCode::NO_CONTENT.into_response();
    let clear = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&clear) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

// ---------------------------------------------------------------- embedding map

/// A 2-D projection (PCA) of a knowledge base's vectors: two principal axes
/// found by power iteration with deflation over the centred vectors.
struct Projection {
    seq: u64,
    model_id: String,
    mean: Vec<f32>,
    axes: [Vec<f32>; 2],
    explained: [f64; 2],
    /// Normalised vectors, for the query's nearest neighbours.
    vectors: Vec<Vec<f32>>,
    points: Vec<MapPoint>,
}

/// Projections by (tenant, knowledge base id), recomputed when the
/// knowledge base's commit sequence moves.
/// (tenant, knowledge base id) → its latest projection.
type MapCache = HashMap<(String, String), Arc<Projection>>;
static MAPS: LazyLock<Mutex<MapCache>> = LazyLock::new(|| Mutex::new(HashMap::new()));
/// Most cached projections.
const MAPS_MAX: usize = 64;

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

fn normalise(v: &mut [f64]) -> f64 {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    n
}

/// The top two principal axes of the rows (each of length `dims`) and the
/// share of the variance each explains. Deterministic: starts from a fixed vector.
pub(crate) fn pca2(rows: &[Vec<f32>], dims: usize) -> (Vec<f32>, [Vec<f32>; 2], [f64; 2]) {
    let n = rows.len().max(1) as f64;
    let mut mean = vec![0f64; dims];
    for r in rows {
        for (m, x) in mean.iter_mut().zip(r) {
            *m += f64::from(*x) / n;
        }
    }
    let centred: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(&mean)
                .map(|(x, m)| f64::from(*x) - m)
                .collect()
        })
        .collect();
    let total: f64 = centred
        .iter()
        .map(|r| r.iter().map(|x| x * x).sum::<f64>())
        .sum();
    let mut axes: Vec<Vec<f64>> = Vec::new();
    let mut explained = [0.0; 2];
    for (c, share) in explained.iter_mut().enumerate() {
        let mut v: Vec<f64> = (0..dims)
            .map(|i| 1.0 + ((i * 7 + c * 13) % 11) as f64 / 11.0)
            .collect();
        normalise(&mut v);
        let mut eigen = 0.0;
        for _ in 0..100 {
            // w = Xᵀ (X v), minus the axes already found.
            let mut w = vec![0f64; dims];
            for r in &centred {
                let p: f64 = r.iter().zip(&v).map(|(a, b)| a * b).sum();
                for (wi, ri) in w.iter_mut().zip(r) {
                    *wi += p * ri;
                }
            }
            for a in &axes {
                let p: f64 = w.iter().zip(a).map(|(x, y)| x * y).sum();
                w.iter_mut().zip(a).for_each(|(x, y)| *x -= p * y);
            }
            let norm = normalise(&mut w);
            if norm == 0.0 {
                break;
            }
            let delta: f64 = w.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
            v = w;
            eigen = norm;
            if delta < 1e-9 {
                break;
            }
        }
        *share = if total > 0.0 { eigen / total } else { 0.0 };
        axes.push(v);
    }
    let to32 = |v: &Vec<f64>| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
    (
        mean.iter().map(|x| *x as f32).collect(),
        [to32(&axes[0]), to32(&axes[1])],
        explained,
    )
}

fn project(p: &Projection, v: &[f32]) -> (f32, f32) {
    let centred: Vec<f32> = v.iter().zip(&p.mean).map(|(x, m)| x - m).collect();
    (
        dot(&centred, &p.axes[0]) as f32,
        dot(&centred, &p.axes[1]) as f32,
    )
}

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter().map(|x| x / n).collect()
    } else {
        v.to_vec()
    }
}

/// The projection of the passages `viewer` may see: owner-restricted
/// documents appear on their owner's map only (one cached map per owner).
async fn projection(
    state: &AppState,
    tenant: &TenantId,
    kb: &rag_core::KnowledgeBase,
    viewer: &rag_core::Viewer,
) -> Result<Option<Arc<Projection>>, ApiError> {
    let key = (
        tenant.0.clone(),
        format!("{}/{}", kb.id, viewer.row_owner().unwrap_or_default()),
    );
    let snapshot = state.engine.store().snapshot(tenant, kb.id).await?;
    let viewer = viewer.clone();
    if let Some(p) = MAPS.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        if p.seq == snapshot.seq {
            return Ok(Some(p.clone()));
        }
    }
    let Some(space) = snapshot.space.clone() else {
        return Ok(None);
    };
    let computed = tokio::task::spawn_blocking(move || {
        let vectors: HashMap<PassageId, &rag_core::PassageVector> =
            snapshot.vectors.iter().map(|v| (v.id, v)).collect();
        let mut rows = Vec::new();
        let mut points = Vec::new();
        for p in snapshot
            .passages
            .iter()
            .filter(|p| p.searchable && viewer.sees(p.owner.as_deref()))
        {
            let Some(v) = vectors.get(&p.id) else {
                continue;
            };
            if v.vector.len() != space.dims {
                continue;
            }
            rows.push(unit(&v.vector));
            let kind = match p.id {
                PassageId::Chunk(_) => "chunk",
                PassageId::Faq(_) => "faq",
                PassageId::Fact(_) => "fact",
            }
            .to_owned();
            let group = match (&p.source, kind.as_str()) {
                (_, "faq") => "FAQ".to_owned(),
                (Some(s), _) => s.clone(),
                (None, k) => k.to_owned(),
            };
            let language = match rag_text::detect_language(&format!("{} {}", p.title, p.body)) {
                rag_core::Language::Zh => "zh",
                rag_core::Language::En => "en",
                rag_core::Language::Mixed => "mixed",
                _ => "other",
            }
            .to_owned();
            points.push(MapPoint {
                id: p.id,
                kind,
                title: p.title.clone(),
                group,
                language,
                x: 0.0,
                y: 0.0,
            });
        }
        if rows.is_empty() {
            return None;
        }
        let (mean, axes, explained) = pca2(&rows, space.dims);
        let mut proj = Projection {
            seq: snapshot.seq,
            model_id: space.model_id.clone(),
            mean,
            axes,
            explained,
            vectors: rows,
            points,
        };
        let coords: Vec<(f32, f32)> = proj.vectors.iter().map(|v| project(&proj, v)).collect();
        for (pt, (x, y)) in proj.points.iter_mut().zip(coords) {
            pt.x = x;
            pt.y = y;
        }
        Some(Arc::new(proj))
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    if let Some(p) = &computed {
        let mut map = MAPS.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAPS_MAX && !map.contains_key(&key) {
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        map.insert(key, p.clone());
    }
    Ok(computed)
}

/// One passage on the map.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MapPoint {
    /// The passage.
    pub id: PassageId,
    /// `chunk`, `faq` or `fact`.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Colour group: the document's source, or `FAQ`.
    pub group: String,
    /// Language of the passage's text: `zh`, `en`, `mixed` or `other`.
    pub language: String,
    /// First principal coordinate.
    pub x: f32,
    /// Second principal coordinate.
    pub y: f32,
}

/// A nearest passage of the query.
#[derive(Debug, Serialize, ToSchema)]
pub struct MapNeighbour {
    /// Index into `points`.
    pub point: usize,
    /// Cosine similarity.
    pub cosine: f64,
}

/// The query on the map.
#[derive(Debug, Serialize, ToSchema)]
pub struct MapQueryPoint {
    /// First principal coordinate.
    pub x: f32,
    /// Second principal coordinate.
    pub y: f32,
    /// Its nearest passages by cosine, best first.
    pub nearest: Vec<MapNeighbour>,
}

/// A 2-D projection of a knowledge base's vectors.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddingMap {
    /// The embedding model of the vectors (none when the knowledge base has none).
    pub model_id: Option<String>,
    /// Share of the variance along each axis.
    pub explained: [f64; 2],
    /// Every passage with a vector.
    pub points: Vec<MapPoint>,
    /// The query, when one was given and an embedder is configured.
    pub query: Option<MapQueryPoint>,
    /// Why something is missing.
    pub notes: Vec<String>,
}

/// Optional query for the map.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct MapParams {
    /// A query to place on the map with lines to its nearest passages.
    pub query: Option<String>,
    /// How many nearest passages (default 5, at most 50).
    pub k: Option<usize>,
}

/// The knowledge base's vectors projected to 2-D by PCA (cached; recomputed
/// when the knowledge base changes), with an optional query placed on it.
#[utoipa::path(get, path = "/kbs/{kb}/map", tag = "workbench", params(("kb" = String, Path), MapParams),
    responses((status = 200, body = EmbeddingMap), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn embedding_map(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(params): Query<MapParams>,
) -> Result<Json<EmbeddingMap>, ApiError> {
    let kb_row = state.engine.kb(&caller.tenant, &kb).await?;
    let Some(p) = projection(&state, &caller.tenant, &kb_row, &caller.viewer()).await? else {
        return Ok(Json(EmbeddingMap {
            model_id: None,
            explained: [0.0, 0.0],
            points: vec![],
            query: None,
            notes: vec!["this knowledge base has no vectors (no embedder was configured when it was ingested)".into()],
        }));
    };
    let mut notes = Vec::new();
    let mut query = None;
    if let Some(q) = params
        .query
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
    {
        state.engine.check_query(q)?;
        match state.engine.embedder() {
            None => notes.push("no embedder is configured: the query cannot be placed".into()),
            Some(e) => {
                // A failing provider is reported, not turned into a server error.
                match e.embed_query(q).await.map(|v| unit(&v)) {
                    Err(err) => notes.push(format!("the query could not be embedded: {err}")),
                    Ok(v) if v.len() != p.mean.len() => notes.push(format!(
                        "the embedder's vectors ({}) do not match the stored ones ({})",
                        v.len(),
                        p.mean.len()
                    )),
                    Ok(v) => {
                        let (x, y) = project(&p, &v);
                        let k = params.k.unwrap_or(5).clamp(1, 50);
                        let mut scored: Vec<(usize, f64)> = p
                            .vectors
                            .iter()
                            .enumerate()
                            .map(|(i, r)| (i, dot(r, &v)))
                            .collect();
                        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
                        let nearest = scored
                            .into_iter()
                            .take(k)
                            .map(|(point, cosine)| MapNeighbour { point, cosine })
                            .collect();
                        query = Some(MapQueryPoint { x, y, nearest });
                    }
                }
            }
        }
    }
    Ok(Json(EmbeddingMap {
        model_id: Some(p.model_id.clone()),
        explained: p.explained,
        points: p.points.clone(),
        query,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::pca2;

    #[test]
    fn pca_finds_the_axes_of_largest_variance_in_order() {
        // Points spread 10 along e0, 3 along e2, 0.1 along e1.
        let mut rows = Vec::new();
        for i in -5i32..=5 {
            for j in -2i32..=2 {
                let (a, b) = (i as f32 * 2.0, j as f32 * 1.5);
                rows.push(vec![a, 0.1 * ((i + j) % 2) as f32, b, 0.0]);
            }
        }
        let (mean, axes, explained) = pca2(&rows, 4);
        assert!(mean.iter().all(|m| m.abs() < 0.1), "{mean:?}");
        assert!(axes[0][0].abs() > 0.99, "first axis is e0: {:?}", axes[0]);
        assert!(axes[1][2].abs() > 0.99, "second axis is e2: {:?}", axes[1]);
        let d: f32 = axes[0].iter().zip(&axes[1]).map(|(a, b)| a * b).sum();
        assert!(d.abs() < 1e-4, "orthogonal axes");
        assert!(
            explained[0] > explained[1] && explained[0] + explained[1] <= 1.0 + 1e-9,
            "{explained:?}"
        );
    }
}

// ---------------------------------------------------------------- system

/// The configured embedder.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbedderInfo {
    /// Model id recorded next to stored vectors.
    pub model_id: String,
    /// Vector length.
    pub dimensions: usize,
}

/// What the server runs with (no secrets).
#[derive(Debug, Serialize, ToSchema)]
pub struct SystemInfo {
    /// ragscope's version.
    pub version: String,
    /// Key-less local mode.
    pub open: bool,
    /// The embedder of the dense path, if any.
    pub embedder: Option<EmbedderInfo>,
    /// The LLM answering questions (its name), if any; answers are extractive otherwise.
    pub llm: Option<String>,
    /// The reranker (`identity` when none is configured).
    pub reranker: String,
    /// Largest query, in bytes.
    pub max_query_bytes: usize,
    /// Largest upload, in bytes.
    pub max_upload_bytes: usize,
    /// Largest top-k a request may ask for.
    pub max_top_k: usize,
}

/// The server's models and limits.
#[utoipa::path(get, path = "/system", tag = "workbench", responses((status = 200, body = SystemInfo), (status = 401, body = ErrorBody)))]
async fn system_info(State(state): State<AppState>, _caller: Caller) -> Json<SystemInfo> {
    let embedder = state.engine.embedder().map(|e| EmbedderInfo {
        model_id: e.model().model_id().to_owned(),
        dimensions: e.model().dimensions(),
    });
    Json(SystemInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        open: state.config.open,
        embedder,
        llm: state.engine.generator().map(|g| g.name().to_owned()),
        reranker: state.engine.reranker().name().to_owned(),
        max_query_bytes: state.engine.config().max_query_bytes,
        max_upload_bytes: state.config.limits.max_upload_bytes,
        max_top_k: state.config.limits.max_top_k,
    })
}

/// The outcome of a connection test.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionTest {
    /// Whether the provider answered correctly.
    pub ok: bool,
    /// Milliseconds the request took.
    pub ms: f64,
    /// What came back, or what went wrong.
    pub detail: String,
}

/// Embeds a short text with the configured embedder (a real request to the
/// provider) and reports the time and the vector's length. Admin only: it
/// may cost money.
#[utoipa::path(post, path = "/system/test-embedder", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn test_embedder(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let Some(e) = state.engine.embedder() else {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no embedder is configured".into(),
        }));
    };
    let started = std::time::Instant::now();
    // Not through the cache: the point is to reach the provider.
    let result = e
        .model()
        .embed_query("ragscope connection test 连接测试")
        .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(Json(match result {
        Ok(v) if v.len() == e.model().dimensions() && v.iter().all(|x| x.is_finite()) => {
            ConnectionTest {
                ok: true,
                ms,
                detail: format!(
                    "{} returned a {}-dimensional vector",
                    e.model().model_id(),
                    v.len()
                ),
            }
        }
        Ok(v) => ConnectionTest {
            ok: false,
            ms,
            detail: format!(
                "expected {} dimensions, got {} (or non-finite values)",
                e.model().dimensions(),
                v.len()
            ),
        },
        Err(err) => ConnectionTest {
            ok: false,
            ms,
            detail: err.to_string(),
        },
    }))
}

/// Asks the configured LLM a one-line question (a real request to the
/// provider) and reports the time, the model that answered and the reply's
/// start. Admin only: it may cost money.
#[utoipa::path(post, path = "/system/test-llm", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn test_llm(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let Some(g) = state.engine.generator() else {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no LLM is configured: answers are extractive (quoted from the sources)".into(),
        }));
    };
    let request = rag_core::GenerateRequest {
        question: "connection test".into(),
        sources: Vec::new(),
        messages: vec![
            rag_core::ChatMessage::system(
                "You are a connection test. Reply with the single word OK.",
            ),
            rag_core::ChatMessage::user("Reply with OK."),
        ],
        json: false,
    };
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut stream = g.generate(request).await?;
        let (mut text, mut model) = (String::new(), None);
        while let Some(ev) = futures::StreamExt::next(&mut stream).await {
            match ev? {
                rag_core::GenEvent::Delta(d) => text.push_str(&d),
                rag_core::GenEvent::Usage { model: m, .. } => model = Some(m),
                rag_core::GenEvent::Done => break,
            }
        }
        Ok::<_, rag_core::CoreError>((text, model))
    })
    .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(Json(match outcome {
        Err(_) => ConnectionTest {
            ok: false,
            ms,
            detail: "no complete answer within 60 s".into(),
        },
        Ok(Err(e)) => ConnectionTest {
            ok: false,
            ms,
            detail: e.to_string(),
        },
        Ok(Ok((text, _))) if text.trim().is_empty() => ConnectionTest {
            ok: false,
            ms,
            detail: format!("{} answered with no text", g.name()),
        },
        Ok(Ok((text, model))) => {
            let reply: String = text.trim().chars().take(80).collect();
            let who = model.unwrap_or_else(|| g.name().to_owned());
            ConnectionTest {
                ok: true,
                ms,
                detail: format!("{who} replied {reply:?}"),
            }
        }
    }))
}

/// Reranks two short passages with the configured reranker (a real request
/// to the provider) and checks that the relevant one comes first. Admin only.
#[utoipa::path(post, path = "/system/test-reranker", tag = "workbench",
    responses((status = 200, body = ConnectionTest), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn test_reranker(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<ConnectionTest>, ApiError> {
    caller.require_admin()?;
    let r = state.engine.reranker();
    if r.name() == "identity" {
        return Ok(Json(ConnectionTest {
            ok: false,
            ms: 0.0,
            detail: "no reranker is configured: the fused order is kept".into(),
        }));
    }
    let raw = "How long does a refund take?";
    // Rerankers read the raw question; the analysis is not needed here.
    let query = rag_core::AnalyzedQuery {
        raw: raw.into(),
        normalized: raw.to_lowercase(),
        language: rag_core::Language::En,
        tokens: Vec::new(),
        key_terms: Vec::new(),
    };
    let candidate = |n: usize, text: &str| rag_core::RerankCandidate {
        hit: rag_core::FusedHit {
            id: PassageId::Faq(rag_core::FaqId::generate()),
            rank: n as u32,
            score: 0.0,
            normalized: 0.0,
            contributions: Vec::new(),
        },
        text: text.to_owned(),
    };
    let candidates = vec![
        candidate(1, "The shop opens at nine every morning and closes at ten."),
        candidate(
            2,
            "Refunds reach the original payment method within three working days.",
        ),
    ];
    let relevant = candidates[1].hit.id;
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        r.rerank(&query, candidates, 2),
    )
    .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(Json(match outcome {
        Err(_) => ConnectionTest {
            ok: false,
            ms,
            detail: "no answer within 60 s".into(),
        },
        Ok(Err(e)) => ConnectionTest {
            ok: false,
            ms,
            detail: e.to_string(),
        },
        Ok(Ok(out)) if out.first().map(|h| h.hit.id) == Some(relevant) => ConnectionTest {
            ok: true,
            ms,
            detail: format!("{} put the relevant passage first", r.name()),
        },
        Ok(Ok(out)) if out.is_empty() => ConnectionTest {
            ok: false,
            ms,
            detail: format!("{} returned no passages", r.name()),
        },
        Ok(Ok(_)) => ConnectionTest {
            ok: false,
            ms,
            detail: format!(
                "{} answered, but ranked the irrelevant passage first",
                r.name()
            ),
        },
    }))
}
