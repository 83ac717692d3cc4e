//! Connecting the PostgreSQL store: the pool, the checks of the role and the
//! schema version, and the transactions every operation runs in (the
//! tenant setting row-level security reads, the tenant check).

use crate::error::{pg, PgStoreError};
use crate::migrate::latest_version;
use crate::pool::{Conn, Pool};
use crate::tls::PgConfig;
use rag_core::{CoreError, KbId, TenantId, UserError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_postgres::error::SqlState;
use tokio_postgres::{IsolationLevel, Transaction};

/// How many connections a store opens at most unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The PostgreSQL store. Cheap to clone; clones share one pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Arc<Pool>,
    /// The analysis behind the stored term statistics (the engine's own).
    pub(crate) analyzer: rag_text::Analyzer,
    /// How many of each knowledge base's latest commits the change log keeps.
    retain: Arc<AtomicU64>,
    /// Planner statistics after large loads (`analyze.rs`).
    pub(crate) analyses: Arc<crate::analyze::Analyses>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

/// Parses a `postgres://…` URL or a `key=value` connection string, with
/// its TLS settings ([`crate::tls`]).
pub fn parse_config(url: &str) -> Result<PgConfig, PgStoreError> {
    PgConfig::parse(url)
}

/// What a connection reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerProbe {
    /// The server's `server_version`.
    pub version: String,
    /// Whether the connection is encrypted (the server's own `pg_stat_ssl`).
    pub tls: bool,
}

/// Connects once as `config` says and asks the server what it is and
/// whether the connection is encrypted; needs no schema.
pub async fn probe(config: &PgConfig) -> Result<ServerProbe, PgStoreError> {
    let client = crate::pool::connect(config).await?;
    let row = client
        .query_one(
            "SELECT current_setting('server_version'),
                    coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
            &[],
        )
        .await?;
    Ok(ServerProbe {
        version: row.get(0),
        tls: row.get(1),
    })
}

impl PgStore {
    /// Connects as the application role named in `url`; see [`PgStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self, PgStoreError> {
        Self::connect_with(parse_config(url)?, DEFAULT_POOL_SIZE).await
    }

    /// Connects with at most `pool_size` connections. Refuses a role that is
    /// a superuser, may bypass row-level security or owns the schema's tables
    /// (row-level security would then protect nothing), and a schema older or
    /// newer than this build's migrations.
    pub async fn connect_with(
        mut config: PgConfig,
        pool_size: usize,
    ) -> Result<Self, PgStoreError> {
        let options = match config.get_options() {
            Some(o) if !o.is_empty() => format!("{o} -c search_path=ragscope,public"),
            _ => "-c search_path=ragscope,public".to_owned(),
        };
        config.options(&options);
        let pool = Pool::new(config, pool_size);
        let may_analyze = {
            let conn = pool.get().await?;
            check_role(&conn).await?;
            check_schema(&conn).await?;
            crate::analyze::may_analyze(&conn).await?
        };
        Ok(PgStore {
            pool: Arc::new(pool),
            analyzer: rag_text::Analyzer::new(),
            retain: Arc::new(AtomicU64::new(crate::changes::CHANGE_LOG_COMMITS)),
            analyses: Arc::new(crate::analyze::Analyses::new(may_analyze)),
        })
    }

    /// Keeps the change log of each knowledge base to its last `commits`
    /// commits (at least 1; by default [`crate::CHANGE_LOG_COMMITS`]), from
    /// this store's next write on (a setting of this process: another
    /// process writing the same database prunes by its own).
    /// `changes_since` an older commit is `None`.
    pub fn set_change_log_retention(&self, commits: u64) {
        self.retain.store(commits.max(1), Ordering::Relaxed);
    }

    /// Whether this store analyses the recall tables after large loads
    /// (PostgreSQL 17 or later, with migration 11's MAINTAIN privilege).
    pub fn analyses_allowed(&self) -> bool {
        self.analyses.allowed()
    }

    /// How many times this store analysed the recall tables after a load
    /// that doubled a knowledge base (`analyze.rs`).
    pub fn analyses_run(&self) -> u64 {
        self.analyses.count()
    }

    pub(crate) fn change_log_retention(&self) -> u64 {
        self.retain.load(Ordering::Relaxed)
    }

    pub(crate) async fn conn(&self) -> Result<Conn<'_>, CoreError> {
        Ok(self.pool.get().await?)
    }
}

async fn check_role(conn: &Conn<'_>) -> Result<(), PgStoreError> {
    let row = conn.query_one("SELECT current_user::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user", &[]).await?;
    let (role, superuser, bypass): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
    let unsafe_role = |reason: &str| {
        Err(PgStoreError::UnsafeRole {
            role: role.clone(),
            reason: reason.to_owned(),
        })
    };
    if superuser {
        return unsafe_role("it is a superuser, which bypasses row-level security");
    }
    if bypass {
        return unsafe_role("it has BYPASSRLS");
    }
    let owns: i64 = conn
        .query_one(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'ragscope' AND pg_has_role(current_user, c.relowner, 'USAGE')",
            &[],
        )
        .await?
        .get(0);
    if owns > 0 {
        return unsafe_role("it owns (or is a member of the owner of) the ragscope tables");
    }
    // The definer roles read across tenants (their functions confine them).
    let definer: bool = conn
        .query_one(
            "SELECT coalesce(bool_or(pg_has_role(current_user, r.oid, 'USAGE')), false)
             FROM pg_roles r WHERE r.rolname IN ('ragscope_auth', 'ragscope_search')",
            &[],
        )
        .await?
        .get(0);
    if definer {
        return unsafe_role(
            "it is a member of ragscope_auth or ragscope_search, which read across tenants",
        );
    }
    Ok(())
}

async fn check_schema(conn: &Conn<'_>) -> Result<(), PgStoreError> {
    let found: i32 = match conn
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ragscope.schema_migrations",
            &[],
        )
        .await
    {
        Ok(row) => row.get(0),
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
        {
            0
        }
        Err(e) => return Err(e.into()),
    };
    let wanted = latest_version();
    if found < wanted {
        return Err(PgStoreError::SchemaBehind { found, wanted });
    }
    if found > wanted {
        return Err(PgStoreError::NewerSchema {
            found,
            supported: wanted,
        });
    }
    Ok(())
}

/// Starts a transaction in which row-level security sees `tenant` only.
pub(crate) async fn begin<'c>(
    conn: &'c mut Conn<'_>,
    tenant: &str,
    snapshot: bool,
) -> Result<Transaction<'c>, CoreError> {
    let tx = if snapshot {
        conn.build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
    } else {
        conn.transaction().await
    }
    .map_err(pg)?;
    tx.execute("SELECT set_config('ragscope.tenant', $1, true)", &[&tenant])
        .await
        .map_err(pg)?;
    Ok(tx)
}

/// Checks that `kb` belongs to `tenant` (the application's own scoping; row
/// level security holds beneath it).
pub(crate) async fn owned(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
) -> Result<(), CoreError> {
    match tx
        .query_opt(
            "SELECT 1 FROM kbs WHERE id = $1 AND tenant = $2",
            &[&kb.0, &tenant.0],
        )
        .await
        .map_err(pg)?
    {
        Some(_) => Ok(()),
        None => Err(UserError::UnknownKb {
            name: kb.to_string(),
        }
        .into()),
    }
}
