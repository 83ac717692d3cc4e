//! API keys: creation (shown once, stored as a sha256 hash), lookup, and the
//! [`Caller`] extractor that scopes every handler to its key's tenant.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
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
}

impl Caller {
    /// Refuses read-only keys.
    pub fn require_write(&self) -> Result<(), ApiError> {
        if self.role.can_write() {
            Ok(())
        } else {
            Err(ApiError::forbidden("this key is read-only"))
        }
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
    format!("rsk_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Creates and stores a key; returns the key itself (shown once) and its record.
pub async fn create_key(
    keys: &dyn KeyStore,
    tenant: &TenantId,
    role: Role,
    owner: Option<String>,
    label: &str,
) -> Result<(String, ApiKeyInfo), rag_core::CoreError> {
    let secret = fresh_secret();
    let info = ApiKeyInfo {
        id: uuid::Uuid::now_v7().simple().to_string()[..16].to_owned(),
        tenant: tenant.clone(),
        role,
        owner,
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
    let (secret, _) = create_key(keys, &tenant, Role::Admin, None, "admin (created on first start)").await?;
    Ok(Some(secret))
}

fn bearer(parts: &Parts) -> Option<&str> {
    if let Some(v) = parts.headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if let Some(rest) = v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")) {
            return Some(rest.trim());
        }
    }
    parts.headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(c) = parts.extensions.get::<Caller>() {
            return Ok(c.clone());
        }
        let caller = match bearer(parts) {
            Some(key) if !key.is_empty() => {
                let info = state.keys.key_by_hash(&hash_key(key)).await.map_err(ApiError::from)?;
                match info {
                    Some(k) if !k.revoked => Caller { key_id: k.id, tenant: k.tenant, role: k.role, owner: k.owner },
                    Some(_) => return Err(ApiError::new(axum::http::StatusCode::UNAUTHORIZED, "key_revoked", "this API key was revoked")),
                    None => return Err(ApiError::new(axum::http::StatusCode::UNAUTHORIZED, "invalid_key", "unknown API key")),
                }
            }
            _ if state.config.open => Caller {
                key_id: "open".into(),
                tenant: TenantId::default_tenant(),
                role: Role::Admin,
                owner: None,
            },
            _ => {
                return Err(ApiError::new(
                    axum::http::StatusCode::UNAUTHORIZED,
                    "missing_key",
                    "send an API key as `Authorization: Bearer <key>`",
                ))
            }
        };
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
