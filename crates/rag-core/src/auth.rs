//! Tenants and API keys: who may call the server, and as whom.
//!
//! Keys are stored hashed (sha256 of the whole key); the key itself is shown
//! once, when it is created. Every key belongs to exactly one tenant, and
//! everything a key does is scoped to that tenant by the store queries.

use crate::model::Timestamp;
use crate::TenantId;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What a key may do.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything, including creating tenants and keys: global, over every
    /// tenant (its own tenant is where its knowledge-base calls act). An
    /// admin key is never created for another tenant.
    Admin,
    /// Read and write the tenant's knowledge.
    ReadWrite,
    /// Query and read only.
    ReadOnly,
    /// For a public web page (the chat widget): asks and queries its one
    /// knowledge base and leaves feedback on the answers given to it;
    /// reads nothing else (no query log, conversations or analytics).
    Widget,
}

impl Role {
    /// The stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::ReadWrite => "read_write",
            Role::ReadOnly => "read_only",
            Role::Widget => "widget",
        }
    }
    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(Role::Admin),
            "read_write" => Some(Role::ReadWrite),
            "read_only" => Some(Role::ReadOnly),
            "widget" => Some(Role::Widget),
            _ => None,
        }
    }
    /// Whether the role may change knowledge.
    pub fn can_write(self) -> bool {
        matches!(self, Role::Admin | Role::ReadWrite)
    }
    /// Whether the role is bound to one knowledge base (a key of it must
    /// name one).
    pub fn needs_kb(self) -> bool {
        matches!(self, Role::Widget)
    }
}

/// Whose owner-restricted documents a caller may see. Documents without an
/// owner are visible to every caller of their tenant; a document restricted to
/// an owner is visible to keys issued for that owner only (and to the local
/// operator's CLI, which reads the data directory anyway).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Viewer {
    /// A caller with no owner: unrestricted documents only.
    #[default]
    Public,
    /// A caller acting for this owner: unrestricted documents and the owner's own.
    Owner(String),
    /// The local operator (CLI): every document.
    Everything,
}

/// The owner marker of query-log rows written by [`Viewer::Everything`]; no
/// key may be issued for it, so such rows are visible to the operator only.
pub const OPERATOR_OWNER: &str = "*";

impl Viewer {
    /// The viewer of a key with this owner.
    pub fn for_owner(owner: Option<&str>) -> Self {
        match owner {
            Some(o) => Viewer::Owner(o.to_owned()),
            None => Viewer::Public,
        }
    }

    /// Whether a document with this owner is visible.
    pub fn sees(&self, owner: Option<&str>) -> bool {
        match (self, owner) {
            (_, None) | (Viewer::Everything, _) => true,
            (Viewer::Owner(me), Some(o)) => me == o,
            (Viewer::Public, Some(_)) => false,
        }
    }

    /// The parameters of the stores' visibility condition `(everything OR
    /// owner IS NULL OR owner = viewer)`: every row, or rows without an owner
    /// and the viewer's own.
    pub fn sql_visibility(&self) -> (bool, Option<&str>) {
        match self {
            Viewer::Everything => (true, None),
            Viewer::Owner(o) => (false, Some(o.as_str())),
            Viewer::Public => (false, None),
        }
    }

    /// The owner recorded on rows this viewer writes (query log): what was
    /// seen through an owner's eyes stays that owner's.
    pub fn row_owner(&self) -> Option<String> {
        match self {
            Viewer::Public => None,
            Viewer::Owner(o) => Some(o.clone()),
            Viewer::Everything => Some(OPERATOR_OWNER.to_owned()),
        }
    }

    /// Whether a valid owner name: 1 to 128 bytes, no control characters, not the operator marker.
    pub fn valid_owner(owner: &str) -> bool {
        !owner.is_empty()
            && owner.len() <= 128
            && owner != OPERATOR_OWNER
            && !owner.chars().any(char::is_control)
    }
}

/// An API key as stored (never the key itself).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyInfo {
    /// Public identifier of the key.
    pub id: String,
    /// The tenant it acts for.
    pub tenant: TenantId,
    /// What it may do.
    pub role: Role,
    /// The owner it acts for inside the tenant: documents restricted to an
    /// owner are visible to keys of that owner only.
    pub owner: Option<String>,
    /// The one knowledge base the key may reach (by name), when scoped: a
    /// scoped key reaches nothing else of its tenant; a widget key always
    /// has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kb: Option<String>,
    /// A label for people.
    pub label: String,
    /// The first characters of the key, so a person can tell keys apart.
    pub prefix: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Revoked keys are refused.
    pub revoked: bool,
}

/// Storage of tenants and hashed keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Creates a tenant; `false` when it exists already.
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        created_at: Timestamp,
    ) -> crate::error::Result<bool>;
    /// All tenants.
    async fn tenants(&self) -> crate::error::Result<Vec<TenantId>>;
    /// Stores a new key under the sha256 hex of its secret.
    async fn put_key(&self, key: &ApiKeyInfo, hash: &str) -> crate::error::Result<()>;
    /// The key with this hash, if any (revoked keys included, flagged).
    async fn key_by_hash(&self, hash: &str) -> crate::error::Result<Option<ApiKeyInfo>>;
    /// Keys of one tenant, or of all tenants.
    async fn keys(&self, tenant: Option<&TenantId>) -> crate::error::Result<Vec<ApiKeyInfo>>;
    /// Revokes a key of `tenant`; `false` when no such key exists there.
    async fn revoke_key(&self, tenant: &TenantId, id: &str) -> crate::error::Result<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_through_their_stored_form() {
        for r in [Role::Admin, Role::ReadWrite, Role::ReadOnly, Role::Widget] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::Value::String(r.as_str().to_owned())
            );
        }
        assert!(!Role::Widget.can_write() && Role::Widget.needs_kb());
        assert!(!Role::ReadOnly.needs_kb());
        assert_eq!(Role::parse("tenant_admin"), None);
    }
}
