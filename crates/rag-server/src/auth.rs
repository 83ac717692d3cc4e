//! API keys: creation (shown once, stored as a sha256 hash), lookup, and the
//! [`Caller`] extractor that scopes every handler to its key's tenant.
//!
//! A caller is resolved, in order, from a bearer key (`Authorization` or
//! `x-api-key`), from a browser session cookie (set by `POST /api/v1/session`
//! after the workbench's login; writes must also carry the session's CSRF
//! token in `x-csrf-token`), or, in open mode on loopback, as the admin of the
//! default tenant (cross-origin writes refused).
//!
//! A key scoped to a knowledge base reaches `/kbs/{kb}/…` only. A widget key
//! (always scoped) reaches fewer routes still, listed in
//! [`widget_route_allowed`]: asking and querying its knowledge base and
//! feedback on its own answers; never the query log, conversations,
//! analytics or anything else a public web page should not read.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use rag_core::{ApiKeyInfo, KeyStore, Role, TenantId};
use sha2::{Digest, Sha256};

/// Who is calling: resolved from the API key (or the open local mode).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's id ("open" in open mode).
    pub key_id: String,
    /// The tenant everything is scoped to.
    pub tenant: TenantId,
    /// What the key may do.
    pub role: Role,
    /// The owner the key acts for, if any.
    pub owner: Option<String>,
    /// The one knowledge base the key may reach, when scoped.
    pub kb: Option<String>,
}

impl Caller {
    /// Whose owner-restricted documents this caller sees: its key's owner's.
    pub fn viewer(&self) -> rag_core::Viewer {
        rag_core::Viewer::for_owner(self.owner.as_deref())
    }
    /// Query options for this caller.
    pub fn query_options(&self) -> rag_engine::QueryOptions {
        rag_engine::QueryOptions::for_viewer(self.viewer())
    }
    /// Refuses read-only and widget keys.
    pub fn require_write(&self) -> Result<(), ApiError> {
        if self.role.can_write() {
            Ok(())
        } else {
            Err(ApiError::forbidden("this key is read-only"))
        }
    }
    /// Whether the caller is a widget key.
    pub fn is_widget(&self) -> bool {
        self.role == Role::Widget
    }
    /// Refuses all but admin keys.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.role == Role::Admin {
            Ok(())
        } else {
            Err(ApiError::forbidden("this needs an admin key"))
        }
    }
}

/// sha256 hex of a key.
pub fn hash_key(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh key: `rsk_` and 64 hex digits from two random (v4) UUIDs, 244 random bits.
fn fresh_secret() -> String {
    format!(
        "rsk_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Creates and stores a key; returns the key itself (shown once) and its record.
pub async fn create_key(
    keys: &dyn KeyStore,
    tenant: &TenantId,
    role: Role,
    owner: Option<String>,
    kb: Option<String>,
    label: &str,
) -> Result<(String, ApiKeyInfo), rag_core::CoreError> {
    let secret = fresh_secret();
    let info = ApiKeyInfo {
        // Random, not time-ordered: two keys made in the same millisecond
        // must not share an id (60 random bits).
        id: uuid::Uuid::new_v4().simple().to_string()[..16].to_owned(),
        tenant: tenant.clone(),
        role,
        owner,
        kb,
        label: label.to_owned(),
        prefix: secret[..10].to_owned(),
        created_at: rag_core::now(),
        revoked: false,
    };
    keys.put_key(&info, &hash_key(&secret)).await?;
    Ok((secret, info))
}

/// On first start: when no admin key exists, creates one and returns it (to be printed once).
pub async fn ensure_admin_key(keys: &dyn KeyStore) -> Result<Option<String>, rag_core::CoreError> {
    let existing = keys.keys(None).await?;
    if existing.iter().any(|k| k.role == Role::Admin && !k.revoked) {
        return Ok(None);
    }
    let tenant = TenantId::default_tenant();
    keys.create_tenant(&tenant, rag_core::now()).await?;
    let (secret, _) = create_key(
        keys,
        &tenant,
        Role::Admin,
        None,
        None,
        "admin (created on first start)",
    )
    .await?;
    Ok(Some(secret))
}

fn bearer(parts: &Parts) -> Option<&str> {
    if let Some(v) = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim();
        if let Some(rest) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            return Some(rest.trim());
        }
    }
    parts
        .headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Name of the browser session cookie (HttpOnly, SameSite=Strict).
pub(crate) const SESSION_COOKIE: &str = "ragscope_session";
/// Header a cookie-authenticated write must carry: the session's CSRF token.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// Starts a session for a key (already checked); returns (session id, CSRF token).
pub(crate) fn start_session(state: &AppState, key_hash: String) -> (String, String) {
    state.sessions.start(key_hash)
}

/// Ends the session named by the request's cookie, if any.
pub(crate) fn end_session(state: &AppState, headers: &HeaderMap) {
    if let Some(id) = cookie(headers, SESSION_COOKIE) {
        state.sessions.end(id);
    }
}

/// The CSRF token of the request's live session, if it has one.
pub(crate) fn session_csrf(state: &AppState, headers: &HeaderMap) -> Option<String> {
    state.sessions.csrf(cookie(headers, SESSION_COOKIE)?)
}

/// A cookie's value from the `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Methods that change nothing and need no CSRF token.
fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Constant-time comparison of two tokens.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// In open mode, a write from a page of another origin is refused: browsers
/// send `Origin` on cross-site requests, and a form on any web site could
/// otherwise post files to a key-less server on loopback.
pub(crate) fn cross_origin(parts: &Parts) -> bool {
    let Some(origin) = parts.headers.get("origin").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = parts
        .headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(origin);
    origin_host != host
}

pub(crate) async fn caller_for_hash(state: &AppState, hash: &str) -> Result<Caller, ApiError> {
    match state.keys.key_by_hash(hash).await.map_err(ApiError::from)? {
        Some(k) if !k.revoked => Ok(Caller {
            key_id: k.id,
            tenant: k.tenant,
            role: k.role,
            owner: k.owner,
            kb: k.kb,
        }),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "key_revoked",
            "this API key was revoked",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_key",
            "unknown API key",
        )),
    }
}

/// The caller of a request with a session cookie: `None` when it has none.
async fn session_caller(parts: &Parts, state: &AppState) -> Result<Option<Caller>, ApiError> {
    let Some(id) = cookie(&parts.headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let found = state.sessions.touch(id);
    let Some((hash, csrf)) = found else {
        // A stale cookie in open mode is no reason to refuse; elsewhere it is a clear 401.
        if state.config.open {
            return Ok(None);
        }
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "session_expired",
            "the session expired; log in again",
        ));
    };
    if !is_safe(&parts.method) {
        let sent = parts
            .headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !same_token(sent, &csrf) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf_failed",
                format!("a write with a session cookie needs the session's `{CSRF_HEADER}` header"),
            ));
        }
    }
    let caller = caller_for_hash(state, &hash).await;
    if caller.is_err() {
        state.sessions.end(id);
    }
    caller.map(Some)
}

/// Whether a request path stays inside knowledge base `kb`: `/kbs/{kb}` or
/// below it (with or without the `/api/v1` prefix; the name percent-decoded).
pub(crate) fn kb_path_allowed(path: &str, kb: &str) -> bool {
    let p = path.strip_prefix("/api/v1").unwrap_or(path);
    let Some(rest) = p.strip_prefix("/kbs/") else {
        return false;
    };
    let segment = rest.split('/').next().unwrap_or("");
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .is_ok_and(|name| name == kb)
}

/// The routes a widget key may call, all `POST`: `/kbs/{kb}/query`,
/// `/kbs/{kb}/query/sync`, `/kbs/{kb}/retrieve` and `/kbs/{kb}/refuse` of its
/// own knowledge base, and `/log/{id}/feedback` (whose handler accepts only
/// the answers given to that key). Everything else is refused, so a route
/// added later stays closed to widgets until it is listed here.
pub(crate) fn widget_route_allowed(method: &Method, path: &str, kb: &str) -> bool {
    if *method != Method::POST || kb.is_empty() {
        return false;
    }
    let p = path.strip_prefix("/api/v1").unwrap_or(path);
    let segments: Vec<&str> = p.strip_prefix('/').unwrap_or("").split('/').collect();
    match segments.as_slice() {
        ["log", id, "feedback"] => !id.is_empty(),
        ["kbs", _, rest @ ..] => {
            kb_path_allowed(path, kb)
                && matches!(
                    rest,
                    ["query"] | ["query", "sync"] | ["retrieve"] | ["refuse"]
                )
        }
        _ => false,
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(c) = parts.extensions.get::<Caller>() {
            return Ok(c.clone());
        }
        let caller = match bearer(parts) {
            Some(key) if !key.is_empty() => caller_for_hash(state, &hash_key(key)).await?,
            _ => match session_caller(parts, state).await? {
                Some(c) => c,
                None if state.config.open => {
                    if !is_safe(&parts.method) && cross_origin(parts) {
                        return Err(ApiError::forbidden(
                            "cross-origin writes are refused in open mode",
                        ));
                    }
                    Caller {
                        key_id: "open".into(),
                        tenant: TenantId::default_tenant(),
                        role: Role::Admin,
                        owner: None,
                        kb: None,
                    }
                }
                None => {
                    return Err(ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "missing_key",
                        "send an API key as `Authorization: Bearer <key>`",
                    ))
                }
            },
        };
        let path = || {
            parts
                .extensions
                .get::<axum::extract::OriginalUri>()
                .map_or_else(|| parts.uri.path().to_owned(), |u| u.path().to_owned())
        };
        if caller.role == Role::Widget {
            let path = path();
            let kb = caller.kb.as_deref().unwrap_or("");
            if !widget_route_allowed(&parts.method, &path, kb) {
                return Err(if kb_path_allowed(&path, kb) {
                    ApiError::forbidden(
                        "a widget key only asks and queries its knowledge base and leaves feedback on its answers",
                    )
                } else {
                    ApiError::not_found(
                        "not found for this key (it is scoped to one knowledge base)",
                    )
                });
            }
        } else if let Some(kb) = &caller.kb {
            if !kb_path_allowed(&path(), kb) {
                return Err(ApiError::not_found(
                    "not found for this key (it is scoped to one knowledge base)",
                ));
            }
        }
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_key_stays_inside_its_knowledge_base() {
        assert!(kb_path_allowed("/api/v1/kbs/shop/query", "shop"));
        assert!(kb_path_allowed("/kbs/shop", "shop"));
        assert!(kb_path_allowed(
            "/api/v1/kbs/%E5%95%86%E5%BA%97/faqs",
            "商店"
        ));
        for p in [
            "/api/v1/kbs",
            "/api/v1/kbs/shop2/query",
            "/api/v1/kbs/sho/query",
            "/api/v1/log/x",
            "/api/v1/system",
            "/kbs/%ZZ/faqs",
            "/api/v1/kbsshop",
        ] {
            assert!(!kb_path_allowed(p, "shop"), "{p}");
        }
    }

    #[test]
    fn a_widget_key_reaches_its_question_routes_only() {
        for p in [
            "/api/v1/kbs/shop/query",
            "/api/v1/kbs/shop/query/sync",
            "/api/v1/kbs/shop/retrieve",
            "/api/v1/kbs/shop/refuse",
            "/api/v1/log/0190-abc/feedback",
            "/api/v1/kbs/%E5%95%86%E5%BA%97/query",
        ] {
            let kb = if p.contains("%E5") { "商店" } else { "shop" };
            assert!(widget_route_allowed(&Method::POST, p, kb), "{p}");
            assert!(!widget_route_allowed(&Method::GET, p, kb), "GET {p}");
        }
        for p in [
            "/api/v1/kbs/shop/log",
            "/api/v1/kbs/shop/analytics",
            "/api/v1/kbs/shop/conversations",
            "/api/v1/kbs/shop/conversations/c1",
            "/api/v1/kbs/shop/faqs",
            "/api/v1/kbs/shop/faq-tool",
            "/api/v1/kbs/shop/map",
            "/api/v1/kbs/shop",
            "/api/v1/kbs/shop/query/sync/x",
            "/api/v1/kbs/other/query",
            "/api/v1/log/abc",
            "/api/v1/log/abc/replay",
            "/api/v1/log//feedback",
            "/api/v1/session",
            "/api/v1/system",
            "/api/v1/keys",
        ] {
            assert!(!widget_route_allowed(&Method::POST, p, "shop"), "{p}");
        }
        assert!(!widget_route_allowed(
            &Method::POST,
            "/api/v1/kbs/shop/query",
            ""
        ));
    }

    #[test]
    fn tokens_compare_exactly_and_cookies_are_found_among_others() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd") && !same_token("abc", "ab") && !same_token("", "a"));
        let mut h = HeaderMap::new();
        h.append("cookie", "a=1; ragscope_session=xyz; b=2".parse().unwrap());
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("xyz"));
        assert_eq!(cookie(&h, "ragscope"), None);
    }
}
