//! Administration: tenants and API keys (admin keys only).

use crate::auth::{create_key, Caller};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use rag_core::{ApiKeyInfo, Role, TenantId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A tenant.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    /// Name: 1–64 of a–z, 0–9, `-`, `_`.
    pub name: String,
}

/// All tenants (admin).
#[utoipa::path(get, path = "/tenants", tag = "admin",
    responses((status = 200, body = Vec<TenantBody>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn list_tenants(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<TenantBody>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(
        state
            .keys
            .tenants()
            .await?
            .into_iter()
            .map(|t| TenantBody { name: t.0 })
            .collect(),
    ))
}

/// Creates a tenant (admin).
#[utoipa::path(post, path = "/tenants", tag = "admin", request_body = TenantBody,
    responses((status = 201, body = TenantBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn create_tenant(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(b): ApiJson<TenantBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let ok = !b.name.is_empty()
        && b.name.len() <= 64
        && b.name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        return Err(ApiError::bad_request(
            "invalid_param",
            "a tenant name has 1 to 64 of a-z, 0-9, '-' and '_'",
        ));
    }
    if !state
        .keys
        .create_tenant(&TenantId(b.name.clone()), rag_core::now())
        .await?
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "tenant_exists",
            format!("tenant {:?} exists", b.name),
        ));
    }
    Ok((StatusCode::CREATED, Json(b)))
}

/// A new key.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKeyBody {
    /// The tenant the key acts for (default: the calling admin key's).
    /// Not for admin keys, which are global.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Role: `read_write`, `read_only`, `widget` (needs `kb`), or `admin`
    /// (global: takes neither `tenant` nor `kb`).
    pub role: Role,
    /// Owner inside the tenant.
    #[serde(default)]
    pub owner: Option<String>,
    /// Scope the key to this one knowledge base (by name): it reaches
    /// `/kbs/{kb}/…` only. Required for `widget` keys (the chat widget's
    /// public key), which reach only the question routes and feedback there.
    #[serde(default)]
    pub kb: Option<String>,
    /// Label for people.
    #[serde(default)]
    pub label: Option<String>,
}

/// A key as created: the secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    /// The key; store it now, it cannot be shown again.
    pub key: String,
    /// Its record.
    pub info: ApiKeyInfo,
}

/// Keys of the caller's tenant (admin: of all tenants). Secrets are never returned.
#[utoipa::path(get, path = "/keys", tag = "admin",
    responses((status = 200, body = Vec<ApiKeyInfo>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<ApiKeyInfo>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(state.keys.keys(None).await?))
}

/// Creates an API key (admin): a tenant's `read_write`, `read_only` or
/// `widget` key, or another global admin key.
#[utoipa::path(post, path = "/keys", tag = "admin", request_body = NewKeyBody,
    responses((status = 201, body = CreatedKey), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn create_api_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(b): ApiJson<NewKeyBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    match b.role {
        // Admin keys are global (they list and create tenants and keys of
        // every tenant): naming a tenant would suggest a tenant admin, which
        // does not exist, so it is refused rather than ignored.
        Role::Admin if b.tenant.is_some() || b.kb.is_some() => {
            return Err(ApiError::bad_request(
                "invalid_param",
                "admin keys are global: they take no tenant and no kb (create a read_write key for a tenant instead)",
            ));
        }
        r if r.needs_kb() && b.kb.is_none() => {
            return Err(ApiError::bad_request(
                "invalid_param",
                format!(
                    "a {} key needs the knowledge base it serves (`kb`)",
                    r.as_str()
                ),
            ));
        }
        _ => {}
    }
    let tenant = TenantId(b.tenant.unwrap_or_else(|| caller.tenant.0.clone()));
    if !state.keys.tenants().await?.contains(&tenant) {
        return Err(ApiError::not_found(format!(
            "tenant {:?} not found; create it first",
            tenant.0
        )));
    }
    if let Some(o) = &b.owner {
        if !rag_core::Viewer::valid_owner(o) {
            return Err(ApiError::bad_request(
                "invalid_param",
                "owner has 1 to 128 bytes, no control characters, and is not \"*\"",
            ));
        }
    }
    if let Some(kb) = &b.kb {
        // The knowledge base must exist in that tenant (its name is the scope).
        state.engine.kb(&tenant, kb).await?;
    }
    let (key, info) = create_key(
        state.keys.as_ref(),
        &tenant,
        b.role,
        b.owner,
        b.kb,
        b.label.as_deref().unwrap_or(""),
    )
    .await?;
    tracing::info!(key_id = %info.id, tenant = %info.tenant, role = info.role.as_str(), "API key created");
    Ok((StatusCode::CREATED, Json(CreatedKey { key, info })))
}

/// Revokes a key (admin).
#[utoipa::path(delete, path = "/keys/{id}", tag = "admin", params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub(super) async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    let all = state.keys.keys(None).await?;
    let key = all.iter().find(|k| k.id == id).cloned();
    if id == caller.key_id {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "own_key",
            "a key cannot revoke itself; use another admin key",
        ));
    }
    let live_admins = all
        .iter()
        .filter(|k| k.role == Role::Admin && !k.revoked)
        .count();
    if key
        .as_ref()
        .is_some_and(|k| k.role == Role::Admin && !k.revoked)
        && live_admins <= 1
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "last_admin_key",
            "the last admin key cannot be revoked",
        ));
    }
    match key {
        Some(k) if state.keys.revoke_key(&k.tenant, &id).await? => Ok(StatusCode::NO_CONTENT),
        _ => Err(ApiError::not_found(format!("key {id:?} not found"))),
    }
}
