//! Versioned migrations: SQL files embedded in the binary, recorded in
//! `ragscope.schema_migrations`, applied in one transaction under an advisory
//! lock (so two processes starting at once do not race).

use crate::error::PgStoreError;
use crate::tls::PgConfig;

/// One migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its version; versions are applied in increasing order.
    pub version: i32,
    /// A short name.
    pub name: &'static str,
    /// The SQL.
    pub sql: &'static str,
}

/// Every migration this build knows, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("../migrations/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "faq_drafts",
        sql: include_str!("../migrations/0002_faq_drafts.sql"),
    },
    Migration {
        version: 3,
        name: "recall",
        sql: include_str!("../migrations/0003_recall.sql"),
    },
    Migration {
        version: 4,
        name: "change_log",
        sql: include_str!("../migrations/0004_change_log.sql"),
    },
    Migration {
        version: 5,
        name: "restricted",
        sql: include_str!("../migrations/0005_restricted.sql"),
    },
    Migration {
        version: 6,
        name: "sentence_vectors",
        sql: include_str!("../migrations/0006_sentence_vectors.sql"),
    },
    Migration {
        version: 7,
        name: "scripts",
        sql: include_str!("../migrations/0007_scripts.sql"),
    },
    Migration {
        version: 8,
        name: "passages_by_group",
        sql: include_str!("../migrations/0008_passages_by_group.sql"),
    },
    Migration {
        version: 9,
        name: "postings_covering",
        sql: include_str!("../migrations/0009_postings_covering.sql"),
    },
    Migration {
        version: 10,
        name: "substring_sample",
        sql: include_str!("../migrations/0010_substring_sample.sql"),
    },
    Migration {
        version: 11,
        name: "maintain",
        sql: include_str!("../migrations/0011_maintain.sql"),
    },
    Migration {
        version: 12,
        name: "faqs_by_status",
        sql: include_str!("../migrations/0012_faqs_by_status.sql"),
    },
    Migration {
        version: 13,
        name: "second_vectors",
        sql: include_str!("../migrations/0013_second_vectors.sql"),
    },
];

/// The schema version this build needs.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The schema version before.
    pub from: i32,
    /// Versions applied now (empty when the schema was current).
    pub applied: Vec<i32>,
}

/// An arbitrary constant naming the migration lock.
const LOCK_KEY: i64 = 0x7261_6773_636f_7065; // "ragscope"

/// Applies the pending migrations as the admin role of `config` (the owner of
/// the schema; creating the extensions and roles needs a superuser or
/// equivalent). Idempotent.
pub async fn migrate(config: &PgConfig) -> Result<MigrationReport, PgStoreError> {
    let mut client = crate::pool::connect(config).await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS ragscope;
         CREATE TABLE IF NOT EXISTS ragscope.schema_migrations (
             version    integer PRIMARY KEY,
             name       text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );",
    )
    .await?;
    let from: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ragscope.schema_migrations",
            &[],
        )
        .await?
        .get(0);
    if from > latest_version() {
        return Err(PgStoreError::NewerSchema {
            found: from,
            supported: latest_version(),
        });
    }
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        let failed = |source| PgStoreError::Migration {
            version: m.version,
            name: m.name,
            source,
        };
        tx.batch_execute(m.sql).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO ragscope.schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .await
        .map_err(failed)?;
        applied.push(m.version);
    }
    tx.commit().await?;
    if !applied.is_empty() {
        tracing::info!(from, to = latest_version(), "applied PostgreSQL migrations");
    }
    Ok(MigrationReport { from, applied })
}

/// Sets the password of the application role (as the admin of `config`), so
/// it can log in where the server asks for one. Only a SCRAM-SHA-256 verifier
/// computed here reaches the server, never the password itself (so it cannot
/// end up in a statement log).
pub async fn set_app_password(config: &PgConfig, password: &str) -> Result<(), PgStoreError> {
    let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
    let client = crate::pool::connect(config).await?;
    // ALTER ROLE takes no parameters: the server quotes the values itself.
    let statement: String = client
        .query_one(
            "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)",
            &[&crate::APP_ROLE, &verifier],
        )
        .await?
        .get(0);
    client.batch_execute(&statement).await?;
    Ok(())
}
