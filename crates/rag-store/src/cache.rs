//! [`SqliteEmbeddingCache`]: embeddings by model id and text hash, in a
//! database of their own that many data directories and processes share.

use crate::error::StoreError;
use crate::rows::{vector_bytes, vector_from_bytes};
use crate::schema::CACHE_SCHEMA;
use async_trait::async_trait;
use rag_core::{CoreError, EmbeddingCache};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The embedding cache. Cheap to clone.
#[derive(Clone)]
pub struct SqliteEmbeddingCache {
    conn: Arc<Mutex<Connection>>,
}

impl std::fmt::Debug for SqliteEmbeddingCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteEmbeddingCache")
    }
}

impl SqliteEmbeddingCache {
    /// Opens (creating) `dir/embeddings.sqlite3`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            op: "create",
            path: dir.to_owned(),
            source,
        })?;
        let conn = Connection::open(dir.join("embeddings.sqlite3"))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(CACHE_SCHEMA)?;
        Ok(SqliteEmbeddingCache {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Result<T, CoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut c).map_err(|e| CoreError::from(StoreError::Sqlite(e)))
        })
        .await
        .map_err(|e| CoreError::Store(format!("cache task failed: {e}")))?
    }
}

#[async_trait]
impl EmbeddingCache for SqliteEmbeddingCache {
    async fn get(
        &self,
        model_id: &str,
        hashes: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, CoreError> {
        let (model, hashes) = (model_id.to_owned(), hashes.to_vec());
        self.blocking(move |c| {
            let mut stmt =
                c.prepare_cached("SELECT vector FROM embeddings WHERE model = ?1 AND hash = ?2")?;
            hashes
                .iter()
                .map(|h| {
                    let b: Option<Vec<u8>> =
                        stmt.query_row(params![model, h], |r| r.get(0)).optional()?;
                    Ok(b.and_then(|b| vector_from_bytes(&b)))
                })
                .collect()
        })
        .await
    }

    async fn put(&self, model_id: &str, items: &[(String, Vec<f32>)]) -> Result<(), CoreError> {
        let (model, items) = (model_id.to_owned(), items.to_vec());
        self.blocking(move |c| {
            let tx = c.transaction()?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?1, ?2, ?3)",
                )?;
                for (h, v) in &items {
                    stmt.execute(params![model, h, vector_bytes(v)])?;
                }
            }
            tx.commit()
        })
        .await
    }
}
