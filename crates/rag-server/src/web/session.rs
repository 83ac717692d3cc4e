//! The browser session: who the request acts as, login with an API key
//! (sets the session cookie), and logout.

use crate::auth::{self, Caller, SESSION_COOKIE};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::sessions::SESSION_MAX;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rag_core::Role;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
pub(super) async fn whoami(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> Json<SessionInfo> {
    let mode = if has_bearer(&headers) {
        "key"
    } else if let Some(csrf) = auth::session_csrf(&state, &headers) {
        return Json(info(&caller, "session", Some(csrf)));
    } else if caller.key_id == "open" {
        "open"
    } else {
        "key"
    };
    Json(info(&caller, mode, None))
}

/// A login.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
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
pub(super) async fn login(
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
    auth::end_session(&state, &headers);
    let caller = Caller {
        key_id: k.id,
        tenant: k.tenant,
        role: k.role,
        owner: k.owner,
        kb: k.kb,
    };
    let (id, csrf) = auth::start_session(&state, hash);
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
pub(super) async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    // Ending a session needs no CSRF token: the worst a forged logout does is log the user out.
    auth::end_session(&state, &headers);
    let mut res = StatusCode::NO_CONTENT.into_response();
    let clear = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&clear) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}
