//! The PostgreSQL store of ragscope (issue 8, foundation): the same store
//! seam as the embedded SQLite store (`StoreRead`, `StoreWrite`,
//! `QueryLogStore`, `KeyStore`), with the same orderings, errors and tenant
//! scoping, over PostgreSQL with pgvector.
//!
//! * **Migrations** ([`migrate()`]) are SQL files in `migrations/`, embedded
//!   in the binary, recorded in `ragscope.schema_migrations` and applied in one
//!   transaction under an advisory lock, as the admin (owner) role.
//! * **Tenant isolation** holds twice: every statement names its tenant (as
//!   the embedded store does), and row-level security, forced on every tenant
//!   table, shows a transaction only the rows of the tenant in its
//!   `ragscope.tenant` setting, which the store sets first in every
//!   transaction (`set_config('ragscope.tenant', $1, true)`).
//! * **The application role** `ragscope_app` (created by the first migration:
//!   LOGIN, NOSUPERUSER, NOINHERIT, NOBYPASSRLS) owns nothing;
//!   [`PgStore::connect`] refuses a role that is a superuser, may bypass
//!   row-level security or owns the tables. Key lookup by hash, the tenant
//!   list and the operator's list of all keys cross tenants through three
//!   `SECURITY DEFINER` functions owned by `ragscope_auth` (see `keys.rs`).
//!   The migration creates the role with LOGIN and no password;
//!   [`set_app_password()`] gives it one (only a SCRAM verifier is sent).
//!   Migrating needs a superuser (extensions `vector` and `pg_trgm`, roles).
//!   Roles are the cluster's: several databases of one cluster share them.
//! * **Ids** are assigned by the engine (UUID v7), never by the database.
//!
//! Tests that need a server are behind the `pg-tests` feature (which
//! `scripts/test` turns on after starting one) and read the admin URL from
//! `PG_TEST_URL`; with the feature and without the variable they fail
//! and say how to start a server:
//!
//! ```text
//! export PG_TEST_URL="$(scripts/pg/start.sh)"
//! cargo test -p rag-store-pg --features pg-tests
//! scripts/pg/stop.sh
//! ```

// The modules mirror rag-store's, so the two stores can be read side by
// side: open (connecting, the role and schema checks, transactions and the
// tenant check), rows (stored values to domain types), write (the atomic
// writes), snapshot (index snapshots), read (the other reads), changes (the
// change feed), sources, keys and log. Only here: migrate, pool, lex (the recall tables), recall and
// vector; only there: cache, lock and schema.
mod analyze;
mod changes;
mod error;
mod head;
mod keys;
mod lex;
mod log;
mod migrate;
mod open;
mod pages;
mod pool;
mod read;
mod recall;
mod rows;
mod snapshot;
mod sources;
mod tls;
mod vector;
mod write;

pub use analyze::ANALYZE_MIN_PASSAGES;
pub use changes::CHANGE_LOG_COMMITS;
pub use error::PgStoreError;
pub use migrate::{
    latest_version, migrate, set_app_password, Migration, MigrationReport, MIGRATIONS,
};
pub use open::{parse_config, probe, PgStore, ServerProbe, DEFAULT_POOL_SIZE};
pub use recall::HNSW_EF_SEARCH;

/// The documents listing's SQL and the passages read by id, for the tests
/// that check their query plans.
pub mod read_sql {
    pub use crate::head::{chunks_by_id_sql, faqs_by_id_sql};
    pub use crate::pages::{
        chunks_page_sql, faq_by_id_sql, faq_page_sql, faqs_page_sql, faqs_status_page_sql,
        FAQ_COUNT_SQL, FAQ_STATUS_COUNT_SQL,
    };
    pub use crate::read::{
        COUNT_ALL_SQL, COUNT_VISIBLE_SQL, PAGE_BY_SOURCE_SQL, PAGE_SQL, VECTORS_BY_ID_SQL,
    };
}
pub use tls::{PgConfig, TlsMode};
pub use tokio_postgres::Config;

/// The role the application connects as (created by the first migration).
pub const APP_ROLE: &str = "ragscope_app";

/// The role owning the cross-tenant authentication functions.
pub const AUTH_ROLE: &str = "ragscope_auth";

/// The per-transaction setting row-level security reads.
pub const TENANT_SETTING: &str = "ragscope.tenant";
