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
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rag_core::Role;
use serde::{Deserialize, Serialize};
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
    Asset { name: "app.css", content_type: "text/css; charset=utf-8", body: include_str!("../assets/app.css") },
    Asset { name: "app.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/app.js") },
    Asset { name: "core.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/core.js") },
    Asset { name: "ask.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/ask.js") },
    Asset { name: "lab.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/lab.js") },
    Asset { name: "corpus.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/corpus.js") },
    Asset { name: "ingest.js", content_type: "text/javascript; charset=utf-8", body: include_str!("../assets/ingest.js") },
];

/// Scripts and styles come from this origin only; no inline script or handler
/// can run, so even a rendering bug could not execute a document's HTML.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

fn with_headers(content_type: &'static str, body: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
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

/// The page and its assets (outside `/api`).
pub(crate) fn pages() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/assets/{name}", get(asset))
}

/// Workbench routes under `/api/v1` (listed in the OpenAPI document).
pub(crate) fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(whoami, login, logout))
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
    responses((status = 200, body = SessionInfo), (status = 401, body = ErrorBody)))]
async fn login(State(state): State<AppState>, headers: HeaderMap, ApiJson(body): ApiJson<LoginBody>) -> Result<Response, ApiError> {
    let key = body.key.trim();
    if key.is_empty() {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "invalid_key", "unknown API key"));
    }
    let hash = auth::hash_key(key);
    let k = state
        .keys
        .key_by_hash(&hash)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "invalid_key", "unknown API key"))?;
    if k.revoked {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "key_revoked", "this API key was revoked"));
    }
    auth::end_session(&headers);
    let caller = Caller { key_id: k.id, tenant: k.tenant, role: k.role, owner: k.owner };
    let (id, csrf) = auth::start_session(hash);
    tracing::info!(key_id = %caller.key_id, "browser session started");
    let cookie = format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}", SESSION_MAX.as_secs());
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
