//! The HTTP API of ragscope.
//!
//! `ragscope serve` builds an [`AppState`] over the engine and the key store
//! and calls [`serve`]. Routes live under `/api/v1` ([`api`]); every query can
//! be watched as Server-Sent Events, one per pipeline stage, or fetched as one
//! JSON document. The OpenAPI document at `/api/openapi.json` is generated from
//! the same route table the router is built from, so the two cannot drift.
//!
//! Every request gets an id (`x-request-id`, also in its log line and in every
//! error body). Handlers resolve the caller's API key to a tenant and pass it
//! down; the store scopes every query by it.

mod api;
mod auth;
mod drafts;
mod error;
mod extract;
mod metrics;
mod ops;
mod protocols;
mod redact;
mod sessions;
mod sources;
mod state;
mod web;

pub use auth::{create_key, ensure_admin_key, hash_key, Caller};
pub use error::{ApiError, ErrorBody};
pub use protocols::mcp::stdio::serve_mcp_stdio;
pub use state::{AppState, Limits, ServerConfig};

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use error::{code_for_status, PendingError};
use std::sync::atomic::Ordering;
use std::time::Instant;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

#[derive(OpenApi)]
#[openapi(
    info(title = "ragscope", description = "Hybrid-retrieval RAG engine: every step of every query as an event."),
    servers((url = "/api/v1")),
    components(schemas(ErrorBody)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![SecurityRequirement::new(
            "api_key",
            Vec::<String>::new(),
        )]);
    }
}

/// The router and the OpenAPI document generated from it.
pub fn router(state: AppState) -> (Router, utoipa::openapi::OpenApi) {
    let (v1, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(api::routes())
        .split_for_parts();
    let doc_json = serde_json::to_value(&doc).unwrap_or_default();
    let limits = state.config.limits.clone();
    let cors = cors_layer(&state.config.cors_origins);
    let app = Router::new()
        .nest(
            "/api/v1",
            v1.layer(DefaultBodyLimit::max(
                limits.max_json_bytes.max(limits.max_upload_bytes),
            )),
        )
        .route(
            "/api/openapi.json",
            get(move || async move { Json(doc_json.clone()) }),
        )
        .merge(web::pages())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            json_limit,
        ))
        // MCP, OpenAI-compatible and Dify routes bound their bodies
        // themselves, answering in their protocols' shapes.
        .merge(protocols::routes(&state))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            request_context,
        ))
        .layer(cors)
        .with_state(state);
    (app, doc)
}

/// Cross-origin access for the listed origins only (bearer keys, no cookies):
/// the chat widget on a customer's site calls the API from the browser.
fn cors_layer(origins: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{header, HeaderValue, Method};
    let allowed: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok())
        .collect();
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::AllowOrigin::list(allowed))
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([header::HeaderName::from_static("x-request-id")])
        .max_age(std::time::Duration::from_secs(600))
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        "ready".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting").into_response()
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    (
        [("content-type", "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

/// JSON bodies get the small limit; multipart uploads the large one.
async fn json_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let is_multipart = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let limit = if is_multipart {
        state.config.limits.max_upload_bytes
    } else {
        state.config.limits.max_json_bytes
    };
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return error::ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body exceeds the limit of {limit} bytes"),
        )
        .into_response();
    }
    // Bodies without a content-length (chunked) are bounded as they are read:
    // JSON by `ApiJson` at `max_json_bytes`, multipart by `DefaultBodyLimit`.
    next.run(req).await
}

/// Request id, structured log line, metrics, and the uniform error body.
async fn request_context(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = uuid::Uuid::now_v7().to_string();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let span =
        tracing::info_span!("request", request_id = %request_id, method = %method, route = %route);
    let mut res = {
        let _e = span.enter();
        drop(_e);
        tracing::Instrument::instrument(next.run(req), span.clone()).await
    };
    let status = res.status();
    if let Some(pending) = res.extensions_mut().remove::<PendingError>() {
        res = with_error_body(res, pending.code, &pending.message, &request_id);
    } else if (status.is_client_error() || status.is_server_error()) && !is_json(&res) {
        let (code, message) = code_for_status(status);
        res = with_error_body(res, code, message, &request_id);
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert("x-request-id", v);
    }
    let secs = started.elapsed().as_secs_f64();
    state
        .metrics
        .request(&method, &route, status.as_u16(), secs);
    let _e = span.enter();
    if status.is_server_error() {
        tracing::error!(
            status = status.as_u16(),
            ms = secs * 1000.0,
            "request failed"
        );
    } else {
        tracing::info!(status = status.as_u16(), ms = secs * 1000.0, "request");
    }
    res
}

fn is_json(res: &Response) -> bool {
    res.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

fn with_error_body(res: Response, code: &str, message: &str, request_id: &str) -> Response {
    let (mut parts, _) = res.into_parts();
    let body = serde_json::json!({ "code": code, "message": message, "request_id": request_id });
    parts
        .headers
        .insert("content-type", HeaderValue::from_static("application/json"));
    parts.headers.remove("content-length");
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Serves until `shutdown` resolves, then stops accepting and lets in-flight
/// requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (app, _) = router(state.clone());
    state.ready.store(true, Ordering::Relaxed);
    let ready = state.ready.clone();
    let shutdown = async move {
        shutdown.await;
        ready.store(false, Ordering::Relaxed);
        tracing::info!("shutting down: finishing in-flight requests");
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
