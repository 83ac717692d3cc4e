//! The read connections of the embedded store.
//!
//! SQLite in write-ahead-log mode lets readers run beside the one writer:
//! each read transaction sees the database as of its first statement, and
//! neither side waits for the other. The store keeps its writes on one
//! connection (one writer is all SQLite allows) and serves reads from a few
//! more, opened on first use and kept. A listing, a snapshot or a query-log
//! page then no longer waits behind a bulk-ingest transaction, and a write
//! no longer waits behind a snapshot of a large knowledge base.

use crate::error::StoreError;
use rusqlite::{Connection, OpenFlags};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex};

/// Read connections kept at most. Reads run on the blocking-thread pool,
/// and two cores gain nothing from more than a few SQLite readers at once.
pub(crate) const MAX_READERS: usize = 4;

/// A pool of read-only connections to one database file.
pub(crate) struct Readers {
    db: PathBuf,
    /// Whether the store itself was opened read-only (then the file may not
    /// be writable at all, and readers open it with the read-only flag).
    read_only: bool,
    max: usize,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    idle: Vec<Connection>,
    opened: usize,
}

/// A connection taken from the pool; given back when dropped.
pub(crate) struct Reader<'a> {
    pool: &'a Readers,
    conn: Option<Connection>,
}

impl std::ops::Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
            .as_ref()
            .expect("a reader holds its connection until dropped")
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("a reader holds its connection until dropped")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let mut state = self.pool.lock();
            state.idle.push(conn);
            drop(state);
            self.pool.freed.notify_one();
        }
    }
}

impl Readers {
    pub(crate) fn new(db: PathBuf, read_only: bool, max: usize) -> Self {
        Readers {
            db,
            read_only,
            max: max.max(1),
            state: Mutex::new(State {
                idle: Vec::new(),
                opened: 0,
            }),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections opened so far.
    pub(crate) fn opened(&self) -> usize {
        self.lock().opened
    }

    /// An idle connection, a new one while fewer than the maximum are open,
    /// or else the next one given back.
    pub(crate) fn take(&self) -> Result<Reader<'_>, StoreError> {
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Reader {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.opened < self.max {
                state.opened += 1;
                drop(state);
                return match self.open() {
                    Ok(conn) => Ok(Reader {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.lock().opened -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            state = self.freed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn open(&self) -> Result<Connection, StoreError> {
        let flags = if self.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            // Read-write at the file level so that the shared-memory index of
            // the write-ahead log can be mapped; `query_only` refuses writes.
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.db, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "query_only", "ON")?;
        Ok(conn)
    }
}
