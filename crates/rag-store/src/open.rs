//! Opening the embedded store: the data directory, its lock, the SQLite
//! connection and its schema, and the tenant check every operation runs
//! first.

use crate::error::StoreError;
use crate::lock::DirLock;
use crate::readers::{Readers, MAX_READERS};
use crate::rows::sql;
use crate::schema::{
    FORMAT_VERSION, SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, V3_COLUMNS, V4_COLUMNS, V5_COLUMNS,
};
use rag_core::{CoreError, KbId, TenantId, UserError};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How to open a data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Take the directory's lock; create it if needed.
    ReadWrite,
    /// No lock; the database must exist. Readers never block the writer.
    ReadOnly,
}

/// What the store found when it opened.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreInfo {
    /// Store format on disk.
    pub format_version: u32,
    /// Analyzer recorded by the last writer, if any.
    pub recorded_analyzer: Option<String>,
    /// Whether the recorded analyzer differs from the running one (derived
    /// indexes are then rebuilt, which the engine does on every open anyway).
    pub analyzer_changed: bool,
}

/// The embedded store. Cheap to clone; all clones share one writing
/// connection and a few reading ones ([`crate::readers`]).
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    readers: Readers,
    dir: PathBuf,
    info: StoreInfo,
    /// How many of each knowledge base's latest commits the change log keeps.
    retain: AtomicU64,
    _lock: Option<DirLock>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Creates `dir` and its missing parents, on unix readable by their owner
/// only (0700). An existing directory keeps its mode.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the empty file `path` if it does not exist, on unix readable by
/// its owner only (0600). An existing file is not opened (closing it would
/// drop this process's SQLite locks on it) and keeps its mode.
///
/// SQLite takes an empty file for a new database and gives the write-ahead
/// log and shared-memory files it creates beside a database the database
/// file's mode, so they are 0600 too.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl EmbeddedStore {
    /// Opens (and in read-write mode creates) the store in `dir`, recording
    /// the analyzer `analyzer` ("name:version") as the one indexing it.
    pub fn open_with_analyzer(
        dir: &Path,
        mode: OpenMode,
        analyzer: &str,
    ) -> Result<Self, StoreError> {
        let db = dir.join("ragscope.sqlite3");
        let (conn, lock) = match mode {
            OpenMode::ReadWrite => {
                create_private_dir(dir).map_err(io("create", dir))?;
                let lock = DirLock::acquire(dir)?;
                create_private_file(&db).map_err(io("create", &db))?;
                (Connection::open(&db)?, Some(lock))
            }
            OpenMode::ReadOnly => {
                if !db.exists() {
                    return Err(StoreError::Missing(dir.to_owned()));
                }
                (
                    Connection::open_with_flags(
                        &db,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?,
                    None,
                )
            }
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let info = if mode == OpenMode::ReadWrite {
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            Self::init_schema(&conn, analyzer)?
        } else {
            Self::read_info(&conn, analyzer)?
        };
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                readers: Readers::new(db, mode == OpenMode::ReadOnly, MAX_READERS),
                dir: dir.to_owned(),
                info,
                retain: AtomicU64::new(crate::schema::CHANGE_LOG_COMMITS),
                _lock: lock,
            }),
        })
    }

    /// Opens with the current analyzer name and version recorded.
    pub fn open(dir: &Path, mode: OpenMode) -> Result<Self, StoreError> {
        Self::open_with_analyzer(dir, mode, "unspecified")
    }

    /// What the store found when it opened.
    pub fn info(&self) -> &StoreInfo {
        &self.inner.info
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Keeps the change log of each knowledge base to its last `commits`
    /// commits (at least 1; by default [`crate::CHANGE_LOG_COMMITS`]), from
    /// its next write on. `changes_since` an older commit is `None`.
    pub fn set_change_log_retention(&self, commits: u64) {
        self.inner.retain.store(commits.max(1), Ordering::Relaxed);
    }

    pub(crate) fn change_log_retention(&self) -> u64 {
        self.inner.retain.load(Ordering::Relaxed)
    }

    fn read_info(conn: &Connection, analyzer: &str) -> Result<StoreInfo, StoreError> {
        let get = |k: &str| -> Result<Option<String>, rusqlite::Error> {
            conn.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
                .optional()
        };
        let format_version = get("format_version")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if format_version > FORMAT_VERSION {
            return Err(StoreError::NewerFormat {
                found: format_version,
                supported: FORMAT_VERSION,
            });
        }
        let recorded_analyzer = get("analyzer")?;
        let analyzer_changed = recorded_analyzer.as_deref().is_some_and(|a| a != analyzer);
        Ok(StoreInfo {
            format_version,
            recorded_analyzer,
            analyzer_changed,
        })
    }

    fn init_schema(conn: &Connection, analyzer: &str) -> Result<StoreInfo, StoreError> {
        let has_meta: bool = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
            [],
            |r| r.get::<_, i64>(0),
        )? > 0;
        let info = if has_meta {
            Some(Self::read_info(conn, analyzer)?)
        } else {
            None
        };
        // Format 1 is the first; future formats migrate here, step by step.
        conn.execute_batch(SCHEMA_V1)?;
        conn.execute_batch(SCHEMA_V2)?;
        conn.execute_batch(SCHEMA_V3)?;
        for (table, column, decl) in V3_COLUMNS.iter().chain(V4_COLUMNS).chain(V5_COLUMNS) {
            let present: bool = conn.query_row(
                &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
                [column],
                |r| r.get::<_, i64>(0),
            )? > 0;
            if !present {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            }
        }
        conn.execute_batch(SCHEMA_V4)?;
        // Commits before the change log are not in it.
        conn.execute("UPDATE kbs SET log_from = seq WHERE log_from IS NULL", [])?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('format_version', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [FORMAT_VERSION.to_string()],
        )?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('analyzer', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [analyzer],
        )?;
        if let Some(i) = &info {
            if i.analyzer_changed {
                tracing::info!(from = ?i.recorded_analyzer, to = analyzer, "analyzer changed; lexical indexes are rebuilt from the stored text");
            }
        }
        Ok(info
            .map(|i| StoreInfo {
                format_version: FORMAT_VERSION,
                ..i
            })
            .unwrap_or(StoreInfo {
                format_version: FORMAT_VERSION,
                recorded_analyzer: None,
                analyzer_changed: false,
            }))
    }

    /// Runs `f` with the connection on a blocking thread.
    pub(crate) async fn with_conn<T, F>(&self, f: F) -> Result<T, CoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, CoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| CoreError::Store(format!("store task failed: {e}")))?
    }

    /// Runs `f` on a blocking thread with a read connection, inside one read
    /// transaction: everything `f` reads is as of one commit, and neither a
    /// write in progress nor other reads make it wait.
    pub(crate) async fn with_read<T, F>(&self, f: F) -> Result<T, CoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, CoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.readers.take()?;
            let tx = conn.transaction().map_err(sql)?;
            let out = f(&tx)?;
            // Nothing was written: ending the transaction either way is the same.
            tx.finish().map_err(sql)?;
            Ok(out)
        })
        .await
        .map_err(|e| CoreError::Store(format!("store task failed: {e}")))?
    }

    /// Read connections opened so far (at most a few; see [`crate::readers`]).
    #[doc(hidden)]
    pub fn read_connections(&self) -> usize {
        self.inner.readers.opened()
    }

    /// Test hook: runs `f` on the writing connection while the caller waits,
    /// e.g. to hold a write transaction open while reads run.
    #[doc(hidden)]
    pub fn with_writer_blocking<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        let mut conn = self.inner.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn)
    }
}

/// Checks that `kb` belongs to `tenant`. Every content query goes through it,
/// so one tenant can never read or write another's knowledge base.
pub(crate) fn owned(conn: &Connection, tenant: &TenantId, kb: KbId) -> Result<(), CoreError> {
    let found: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM kbs WHERE id = ?1 AND tenant = ?2",
            params![kb.to_string(), tenant.0],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    match found {
        Some(_) => Ok(()),
        None => Err(UserError::UnknownKb {
            name: kb.to_string(),
        }
        .into()),
    }
}
