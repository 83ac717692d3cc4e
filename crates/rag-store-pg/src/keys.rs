//! Tenants and hashed API keys in the PostgreSQL store.
//!
//! Rows are tenant-scoped by row-level security like everything else. Three
//! reads must cross tenants — finding a key by the hash of the secret a caller
//! presents (authentication happens before the tenant is known), listing
//! tenants, and listing every tenant's keys for the operator — and go through
//! `SECURITY DEFINER` functions owned by the `ragscope_auth` role, whose only
//! privilege is reading `api_keys` and `tenants` (a policy for that role
//! alone). The application role may execute them but is no member of
//! `ragscope_auth`, and they never return key hashes.

use crate::error::pg;
use crate::open::{begin, PgStore};
use async_trait::async_trait;
use rag_core::{ApiKeyInfo, CoreError, KeyStore, Role, TenantId, Timestamp};
use tokio_postgres::Row;

const KEY_COLUMNS: &str = "id, tenant, role, owner, label, prefix, created_at, revoked, kb";

fn key_from_row(r: &Row) -> ApiKeyInfo {
    let role: String = r.get(2);
    ApiKeyInfo {
        id: r.get(0),
        tenant: TenantId(r.get(1)),
        // An unknown role reads as the weakest one rather than failing open.
        role: Role::parse(&role).unwrap_or(Role::ReadOnly),
        owner: r.get(3),
        label: r.get(4),
        prefix: r.get(5),
        created_at: r.get(6),
        revoked: r.get(7),
        kb: r.get(8),
    }
}

#[async_trait]
impl KeyStore for PgStore {
    async fn create_tenant(
        &self,
        tenant: &TenantId,
        created_at: Timestamp,
    ) -> Result<bool, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let n = tx
            .execute("INSERT INTO tenants (tenant, created_at) VALUES ($1, $2) ON CONFLICT (tenant) DO NOTHING", &[&tenant.0, &created_at])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(n == 1)
    }

    async fn tenants(&self) -> Result<Vec<TenantId>, CoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query("SELECT tenant FROM auth_tenants()", &[])
            .await
            .map_err(pg)?;
        Ok(rows.iter().map(|r| TenantId(r.get(0))).collect())
    }

    async fn put_key(&self, key: &ApiKeyInfo, hash: &str) -> Result<(), CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &key.tenant.0, false).await?;
        tx.execute(
            "INSERT INTO api_keys (id, hash, tenant, role, owner, label, prefix, created_at, revoked, kb)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[&key.id, &hash, &key.tenant.0, &key.role.as_str(), &key.owner, &key.label, &key.prefix, &key.created_at, &key.revoked, &key.kb],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKeyInfo>, CoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!("SELECT {KEY_COLUMNS} FROM auth_key_by_hash($1)"),
                &[&hash],
            )
            .await
            .map_err(pg)?;
        Ok(row.as_ref().map(key_from_row))
    }

    async fn keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKeyInfo>, CoreError> {
        let mut conn = self.conn().await?;
        let rows = match tenant {
            Some(t) => {
                let tx = begin(&mut conn, &t.0, false).await?;
                let rows = tx
                    .query(&format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at, id"), &[&t.0])
                    .await
                    .map_err(pg)?;
                tx.commit().await.map_err(pg)?;
                rows
            }
            None => conn
                .query(&format!("SELECT {KEY_COLUMNS} FROM auth_keys()"), &[])
                .await
                .map_err(pg)?,
        };
        Ok(rows.iter().map(key_from_row).collect())
    }

    async fn revoke_key(&self, tenant: &TenantId, id: &str) -> Result<bool, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let n = tx
            .execute(
                "UPDATE api_keys SET revoked = true WHERE id = $1 AND tenant = $2",
                &[&id, &tenant.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(n == 1)
    }
}
