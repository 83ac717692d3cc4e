//! MCP's streamable HTTP transport at `/mcp`.
//!
//! - `POST /mcp` carries one JSON-RPC message. A request is answered in the
//!   response body, as `application/json`, or as one Server-Sent Event when
//!   the client accepts only `text/event-stream`; a notification or a
//!   response gets `202 Accepted` without a body.
//! - `initialize` starts a session: its id comes back in `Mcp-Session-Id`
//!   and every later request must send it (else 400; an unknown or ended
//!   session is 404, so the client starts again). A session belongs to the
//!   key that started it: another key's requests do not find it. Sessions
//!   live in memory and end after an hour without requests.
//! - `GET /mcp` is 405: this server sends no messages of its own.
//! - `DELETE /mcp` ends the session.
//!
//! Every request is authenticated as the rest of the API ([`access`]), so a
//! revoked key stops working at once, session or not. Errors are JSON-RPC
//! error objects with the matching HTTP status.
//!
//! [`access`]: crate::protocols::access

use super::jsonrpc::{self, Incoming, INTERNAL_ERROR, INVALID_REQUEST, UNAUTHORIZED};
use super::server::{self, PROTOCOL_VERSIONS};
use crate::protocols::access::{self, Access};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated revision, sent by clients after `initialize`.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// A session ends after this long without requests.
const IDLE_TTL: Duration = Duration::from_secs(60 * 60);
/// At most this many sessions; beyond it the least recently used one ends.
const MAX_SESSIONS: usize = 10_000;

struct Session {
    key_id: String,
    tenant: rag_core::TenantId,
    last_seen: Instant,
}

#[derive(Default)]
struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    fn start(&self, access: &Access) -> String {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| s.last_seen.elapsed() < IDLE_TTL);
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            id.clone(),
            Session {
                key_id: access.caller.key_id.clone(),
                tenant: access.caller.tenant.clone(),
                last_seen: Instant::now(),
            },
        );
        id
    }

    /// Whether `id` is a live session of this caller (and marks it used).
    fn touch(&self, id: &str, access: &Access) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get_mut(id) {
            Some(s) if s.last_seen.elapsed() >= IDLE_TTL => {
                map.remove(id);
                false
            }
            Some(s) if s.key_id == access.caller.key_id && s.tenant == access.caller.tenant => {
                s.last_seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    fn end(&self, id: &str, access: &Access) -> bool {
        let owned = self.touch(id, access);
        if owned {
            self.map
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(id);
        }
        owned
    }
}

#[derive(Clone)]
struct McpHttp {
    app: AppState,
    sessions: Arc<Sessions>,
}

/// The `/mcp` route.
pub(crate) fn routes(app: AppState) -> Router<AppState> {
    Router::new()
        .route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp))
        .with_state(McpHttp {
            app,
            sessions: Arc::default(),
        })
}

/// A JSON-RPC error with an HTTP status.
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    let mut res = json_response(status, jsonrpc::error(&Value::Null, code, message));
    if status == StatusCode::UNAUTHORIZED {
        res.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    res
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The caller, or the response refusing it.
async fn caller(h: &McpHttp, parts: &axum::http::request::Parts) -> Result<Access, Response> {
    access::resolve(&h.app, parts).await.map_err(|d| {
        let e = d.error();
        let code = if e.status == StatusCode::UNAUTHORIZED {
            UNAUTHORIZED
        } else {
            INVALID_REQUEST
        };
        rpc_error(e.status, code, &e.message)
    })
}

/// Whether the client takes only Server-Sent Events (`None`: it takes
/// neither JSON nor events).
fn wants_events_only(headers: &HeaderMap) -> Option<bool> {
    let accept: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|t| !t.is_empty())
        .collect();
    if accept.is_empty() {
        return Some(false);
    }
    let json = accept
        .iter()
        .any(|t| matches!(t.as_str(), "application/json" | "application/*" | "*/*"));
    let events = accept.iter().any(|t| t == "text/event-stream");
    match (json, events) {
        (true, _) => Some(false),
        (false, true) => Some(true),
        (false, false) => None,
    }
}

fn reply(status: StatusCode, message: Value, events_only: bool, session: Option<&str>) -> Response {
    let mut res = if events_only {
        let body = format!("event: message\ndata: {message}\n\n");
        (
            status,
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            body,
        )
            .into_response()
    } else {
        json_response(status, message)
    };
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        res.headers_mut().insert(SESSION_HEADER, id);
    }
    res
}

async fn post_mcp(State(h): State<McpHttp>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let access = match caller(&h, &parts).await {
        Ok(a) => a,
        Err(res) => return res,
    };
    let Some(events_only) = wants_events_only(&parts.headers) else {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "accept application/json or text/event-stream",
        );
    };
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !is_json {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_REQUEST,
            "send one JSON-RPC message with content-type: application/json",
        );
    }
    if let Some(v) = parts.headers.get(VERSION_HEADER) {
        let v = v.to_str().unwrap_or("");
        if !PROTOCOL_VERSIONS.contains(&v) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                &format!(
                    "unsupported MCP-Protocol-Version {v:?}; this server speaks {}",
                    PROTOCOL_VERSIONS.join(", ")
                ),
            );
        }
    }
    let limit = h.app.config.limits.max_json_bytes;
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_REQUEST,
            &format!("the message exceeds the limit of {limit} bytes"),
        );
    };
    let message = match jsonrpc::parse(&bytes) {
        Ok(m) => m,
        Err(error) => return reply(StatusCode::BAD_REQUEST, error, events_only, None),
    };
    let session = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Incoming::Request { id, method, params } = &message {
        if method == "initialize" {
            let (result, version) = server::initialize(params);
            let session = h.sessions.start(&access);
            tracing::info!(version, "mcp session initialized (http)");
            return reply(
                StatusCode::OK,
                jsonrpc::result(id, result),
                events_only,
                Some(&session),
            );
        }
    }
    match session {
        Some(s) if !h.sessions.touch(&s, &access) => {
            return rpc_error(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "no such session (it ended or expired): initialize again",
            )
        }
        Some(_) => {}
        None => match &message {
            Incoming::Request { method, .. } if method == "ping" => {}
            // A probe for another revision (`server/discover`) learns that
            // this server does not know the method, and falls back to
            // `initialize`.
            Incoming::Request { id, method, .. }
                if !matches!(method.as_str(), "tools/list" | "tools/call") =>
            {
                return reply(
                    StatusCode::NOT_FOUND,
                    jsonrpc::error(
                        id,
                        jsonrpc::METHOD_NOT_FOUND,
                        &format!("method {method:?} is not served here"),
                    ),
                    events_only,
                    None,
                );
            }
            _ => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    "missing Mcp-Session-Id header: send initialize first",
                )
            }
        },
    }
    match message {
        Incoming::Request { id, method, params } => {
            let outcome = server::call(&h.app, &access, &method, &params).await;
            if let Err(e) = &outcome {
                if e.code == INTERNAL_ERROR {
                    tracing::error!(message = %e.message, "mcp request failed");
                }
            }
            reply(
                StatusCode::OK,
                jsonrpc::respond(&id, outcome),
                events_only,
                None,
            )
        }
        Incoming::Notification { .. } | Incoming::Response => {
            (StatusCode::ACCEPTED, Body::empty()).into_response()
        }
    }
}

async fn get_mcp() -> Response {
    let mut res = rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        INVALID_REQUEST,
        "this server sends no messages of its own: POST requests to /mcp",
    );
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    res
}

async fn delete_mcp(State(h): State<McpHttp>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let access = match caller(&h, &parts).await {
        Ok(a) => a,
        Err(res) => return res,
    };
    let Some(session) = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "missing Mcp-Session-Id header",
        );
    };
    if h.sessions.end(session, &access) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        rpc_error(StatusCode::NOT_FOUND, INVALID_REQUEST, "no such session")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_json_or_events() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT, v.parse().unwrap());
            wants_events_only(&m)
        };
        assert_eq!(wants_events_only(&HeaderMap::new()), Some(false));
        assert_eq!(h("application/json, text/event-stream"), Some(false));
        assert_eq!(h("text/event-stream"), Some(true));
        assert_eq!(h("text/event-stream;q=1"), Some(true));
        assert_eq!(h("*/*"), Some(false));
        assert_eq!(h("text/html"), None);
    }
}
