//! Errors of the PostgreSQL store.

use thiserror::Error;

/// What can go wrong connecting to, migrating or using the PostgreSQL store.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PgStoreError {
    /// The connection string could not be parsed.
    #[error("invalid PostgreSQL connection string: {0}")]
    Url(String),
    /// The TLS settings could not be used (an unreadable root file, say).
    #[error("PostgreSQL TLS: {0}")]
    Tls(String),
    /// The server or the driver failed.
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// A stored value could not be decoded.
    #[error("corrupt value in {table}.{column}: {detail}")]
    Corrupt {
        /// Table.
        table: &'static str,
        /// Column.
        column: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The database has no ragscope schema, or an older one.
    #[error("the database schema is at version {found}, this ragscope needs version {wanted}; run `ragscope migrate` with the admin connection")]
    SchemaBehind {
        /// Version found (0: none).
        found: i32,
        /// Version this build needs.
        wanted: i32,
    },
    /// The database was migrated by a newer ragscope.
    #[error("the database schema is at version {found}, newer than this ragscope supports ({supported}); upgrade ragscope")]
    NewerSchema {
        /// Version found.
        found: i32,
        /// Newest version this build knows.
        supported: i32,
    },
    /// The store was asked to run as a role that could bypass row-level security.
    #[error("refusing to use PostgreSQL role {role:?}: {reason}; connect as the application role (ragscope_app)")]
    UnsafeRole {
        /// The role.
        role: String,
        /// Why it is unsafe.
        reason: String,
    },
    /// A migration failed (nothing of it was applied).
    #[error("migration {version} ({name}) failed: {}", describe(.source))]
    Migration {
        /// Its version.
        version: i32,
        /// Its name.
        name: &'static str,
        /// The error.
        source: tokio_postgres::Error,
    },
    /// A failpoint fired.
    #[error("failpoint {0} fired")]
    Failpoint(&'static str),
}

/// The server's own message when there is one (the driver's `Display` says
/// only "db error").
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
            if let Some(d) = db.detail() {
                s.push_str(" (");
                s.push_str(d);
                s.push(')');
            }
            s
        }
        None => match std::error::Error::source(e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

impl From<PgStoreError> for rag_core::CoreError {
    fn from(e: PgStoreError) -> Self {
        rag_core::CoreError::Store(e.to_string())
    }
}

/// A driver error as a core error.
pub(crate) fn pg(e: tokio_postgres::Error) -> rag_core::CoreError {
    PgStoreError::Postgres(e).into()
}

/// A corrupt stored value as a core error.
pub(crate) fn corrupt(
    table: &'static str,
    column: &'static str,
    detail: impl Into<String>,
) -> rag_core::CoreError {
    PgStoreError::Corrupt {
        table,
        column,
        detail: detail.into(),
    }
    .into()
}
