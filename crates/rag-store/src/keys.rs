//! Tenants and hashed API keys in the embedded store.

use crate::open::EmbeddedStore;
use crate::rows::sql;
use async_trait::async_trait;
use rag_core::{ApiKeyInfo, CoreError, KeyStore, Role, TenantId, Timestamp};
use rusqlite::{params, OptionalExtension};

const KEY_COLUMNS: &str = "id, tenant, role, owner, label, prefix, created_at, revoked, kb";

fn key_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyInfo> {
    let role: String = r.get(2)?;
    Ok(ApiKeyInfo {
        id: r.get(0)?,
        tenant: TenantId(r.get(1)?),
        // An unknown role reads as the weakest one rather than failing open.
        role: Role::parse(&role).unwrap_or(Role::ReadOnly),
        owner: r.get(3)?,
        label: r.get(4)?,
        prefix: r.get(5)?,
        created_at: r.get(6)?,
        revoked: r.get::<_, i64>(7)? != 0,
        kb: r.get(8)?,
    })
}

#[async_trait]
impl KeyStore for EmbeddedStore {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        created_at: Timestamp,
    ) -> Result<bool, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            let n = c
                .execute(
                    "INSERT OR IGNORE INTO tenants(name, created_at) VALUES (?1, ?2)",
                    params![tenant.0, created_at],
                )
                .map_err(sql)?;
            Ok(n == 1)
        })
        .await
    }

    async fn tenants(&self) -> Result<Vec<TenantId>, CoreError> {
        self.with_read(|c| {
            let mut stmt = c
                .prepare("SELECT name FROM tenants ORDER BY name")
                .map_err(sql)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(sql)?;
            rows.map(|r| r.map(TenantId).map_err(sql)).collect()
        })
        .await
    }

    async fn put_key(&self, key: &ApiKeyInfo, hash: &str) -> Result<(), CoreError> {
        let (key, hash) = (key.clone(), hash.to_owned());
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO api_keys(id, hash, tenant, role, owner, label, prefix, created_at, revoked, kb) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![key.id, hash, key.tenant.0, key.role.as_str(), key.owner, key.label, key.prefix, key.created_at, key.revoked as i64, key.kb],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKeyInfo>, CoreError> {
        let hash = hash.to_owned();
        self.with_read(move |c| {
            c.query_row(
                &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1"),
                [hash],
                key_from_row,
            )
            .optional()
            .map_err(sql)
        })
        .await
    }

    async fn keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKeyInfo>, CoreError> {
        let tenant = tenant.cloned();
        self.with_read(move |c| {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE (?1 IS NULL OR tenant = ?1) ORDER BY created_at, id"
                ))
                .map_err(sql)?;
            let rows = stmt.query_map([tenant.map(|t| t.0)], key_from_row).map_err(sql)?;
            rows.map(|r| r.map_err(sql)).collect()
        })
        .await
    }

    async fn revoke_key(&self, tenant: &TenantId, id: &str) -> Result<bool, CoreError> {
        let (tenant, id) = (tenant.clone(), id.to_owned());
        self.with_conn(move |c| {
            let n = c
                .execute(
                    "UPDATE api_keys SET revoked = 1 WHERE id = ?1 AND tenant = ?2",
                    params![id, tenant.0],
                )
                .map_err(sql)?;
            Ok(n == 1)
        })
        .await
    }
}
