//! Who calls a protocol route (`/mcp`, `/v1`, `/dify`), and what it may reach.
//!
//! The same API keys as `/api/v1` (`Authorization: Bearer <key>` or
//! `x-api-key`), looked up by the same function. Two differences, because
//! these clients always send a token: in `--open` mode a token that is not a
//! live ragscope key is treated as absent (the caller is the default tenant's
//! admin, as for a request without one), and a key scoped to one knowledge
//! base is not refused by path (these routes name no knowledge base in the
//! path) but sees only that one: every other name is "not found"
//! ([`Access::check_kb`]). Widget keys, meant for a public web page, reach
//! none of these routes.

use crate::auth::{caller_for_hash, cross_origin, hash_key, Caller};
use crate::error::ApiError;
use crate::state::AppState;
use axum::http::request::Parts;
use axum::http::StatusCode;
use rag_core::{CoreError, Role, TenantId, UserError, Viewer};

/// Why a protocol request has no caller.
#[derive(Debug)]
pub(crate) enum Denied {
    /// No key where one is needed.
    Missing,
    /// An `Authorization` header that is not `Bearer <token>`.
    Malformed,
    /// A key that is unknown, revoked or not allowed here (the error says which).
    Refused(ApiError),
}

impl Denied {
    /// The error as `/api/v1` would state it (status, code, message).
    pub(crate) fn error(&self) -> ApiError {
        match self {
            Denied::Missing => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing_key",
                "send an API key as `Authorization: Bearer <key>`",
            ),
            Denied::Malformed => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing_key",
                "the Authorization header must be `Bearer <key>`",
            ),
            Denied::Refused(e) => e.clone(),
        }
    }
}

/// A resolved caller and whose owner-restricted documents it sees.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// The key (or open mode, or the local operator).
    pub caller: Caller,
    /// The viewer every read and run goes through.
    pub viewer: Viewer,
}

impl Access {
    /// A caller of the HTTP API: its key's owner's view.
    pub(crate) fn of(caller: Caller) -> Self {
        let viewer = caller.viewer();
        Access { caller, viewer }
    }

    /// The local operator of `ragscope mcp` over stdio: like the command
    /// line, the tenant's admin seeing everything.
    pub(crate) fn operator(tenant: TenantId) -> Self {
        Access {
            caller: Caller {
                key_id: "stdio".into(),
                tenant,
                role: Role::Admin,
                owner: None,
                kb: None,
            },
            viewer: Viewer::Everything,
        }
    }

    /// Query options for this caller.
    pub(crate) fn options(&self) -> rag_engine::QueryOptions {
        rag_engine::QueryOptions::for_viewer(self.viewer.clone())
    }

    /// Whether the caller may see knowledge base `name` at all.
    pub(crate) fn sees_kb(&self, name: &str) -> bool {
        self.caller.kb.as_deref().is_none_or(|k| k == name)
    }

    /// A knowledge base outside the key's scope is "not found", with the
    /// same code and message as one that does not exist.
    pub(crate) fn check_kb(&self, name: &str) -> Result<(), ApiError> {
        if self.sees_kb(name) {
            Ok(())
        } else {
            Err(CoreError::from(UserError::UnknownKb {
                name: name.to_owned(),
            })
            .into())
        }
    }
}

/// The bearer token of a request: `Ok(None)` without one, `Err` for an
/// `Authorization` header of another scheme.
fn token(parts: &Parts) -> Result<Option<&str>, Denied> {
    if let Some(v) = parts.headers.get("authorization") {
        let v = v.to_str().map_err(|_| Denied::Malformed)?.trim();
        let (scheme, rest) = v.split_once(' ').ok_or(Denied::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") || rest.trim().is_empty() {
            return Err(Denied::Malformed);
        }
        return Ok(Some(rest.trim()));
    }
    Ok(parts
        .headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty()))
}

/// Resolves the caller of a protocol request.
pub(crate) async fn resolve(state: &AppState, parts: &Parts) -> Result<Access, Denied> {
    let open = state.config.open;
    let token = match token(parts) {
        Ok(t) => t,
        // Open mode: whatever the client sent is not a key.
        Err(_) if open => None,
        Err(e) => return Err(e),
    };
    let found = match token {
        Some(t) => match caller_for_hash(state, &hash_key(t)).await {
            Ok(c) => Some(c),
            Err(_) if open => None,
            Err(e) => return Err(Denied::Refused(e)),
        },
        None => None,
    };
    let caller = match found {
        Some(c) => c,
        None if open => {
            // Browsers send Origin on cross-site requests: a page on another
            // site must not drive a key-less server on loopback (MCP's DNS
            // rebinding warning applies to every route here).
            if cross_origin(parts) {
                return Err(Denied::Refused(ApiError::forbidden(
                    "cross-origin requests are refused in open mode",
                )));
            }
            Caller {
                key_id: "open".into(),
                tenant: TenantId::default_tenant(),
                role: Role::Admin,
                owner: None,
                kb: None,
            }
        }
        None => return Err(Denied::Missing),
    };
    if caller.is_widget() {
        return Err(Denied::Refused(ApiError::forbidden(
            "a widget key only reaches the widget's routes under /api/v1",
        )));
    }
    Ok(Access::of(caller))
}
