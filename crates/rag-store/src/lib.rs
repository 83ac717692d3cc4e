//! The embedded store: one SQLite database in a data directory.
//!
//! SQLite (WAL, `synchronous=FULL`) is the single transactional source of
//! truth; the lexical index is derived from it in memory and rebuilt whenever a
//! knowledge base's commit sequence moves. Every write is one transaction, so an
//! ingest is all of a document or none of it, also when the process dies
//! mid-write. A lock file stops a second process from opening the directory for
//! writing, and the database records its format version and the analyzer that
//! indexed it.
//!
//! ```
//! # tokio_test();
//! # fn tokio_test() {
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! # rt.block_on(async {
//! use rag_core::{StoreRead, StoreWrite, TenantId, KbSettings};
//! let dir = tempfile::tempdir().unwrap();
//! let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
//! let tenant = TenantId::default_tenant();
//! store.create_kb(&tenant, "demo", KbSettings::default()).await.unwrap();
//! assert_eq!(store.list_kbs(&tenant).await.unwrap().len(), 1);
//! # });
//! # }
//! ```

// The modules mirror rag-store-pg's, so the two stores can be read side by
// side: open (opening, schema, lock, the tenant check), rows (stored values
// to domain types), write (the atomic writes), snapshot (index snapshots),
// read (the other reads), changes (the change feed), sources, keys and log.
// Only here: cache, lock and schema; only there: migrate, pool, lex, recall
// and vector.
mod cache;
mod changes;
#[cfg(feature = "testing")]
pub mod conformance;
mod error;
mod keys;
mod lock;
mod log;
mod open;
mod pages;
mod read;
mod readers;
mod rows;
mod schema;
mod snapshot;
mod sources;
mod write;

pub use cache::SqliteEmbeddingCache;
pub use error::StoreError;
pub use open::{EmbeddedStore, OpenMode, StoreInfo};
pub use schema::{CHANGE_LOG_COMMITS, FORMAT_VERSION};
