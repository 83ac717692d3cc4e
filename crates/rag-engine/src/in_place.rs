//! After a dense index file is written, the process that wrote it reads its
//! large parts' full-precision vectors from the file too, as a process
//! starting over it would: the heap copy of the vectors built from the
//! store is released, so a server's memory does not depend on whether it
//! built its indexes or read them.

use crate::dense::{DenseIndex, Part};
use crate::engine::{Engine, KbIndex};
use crate::index_files::IndexFile;
use rag_core::KbId;
use std::path::Path;
use std::sync::Arc;

impl Engine {
    /// Maps the dense file just written for `saved` (the index it was
    /// encoded from) and, under the knowledge base's lock, replaces each of
    /// its graph-sized parts that holds its vectors on the heap, in the current
    /// index, by the same part reading them from the file. Runs on a
    /// blocking thread; any failure leaves the index as it is.
    pub(crate) fn read_saved_vectors_in_place(&self, dir: &Path, kb: KbId, saved: &DenseIndex) {
        let owned: Vec<usize> = saved
            .parts
            .iter()
            .enumerate()
            // Parts large enough for a graph; the small parts of recent
            // writes are merged and replaced too often to be worth it.
            .filter(|(_, p)| {
                !p.index.store().is_shared() && p.ids.len() >= saved.params.hnsw_threshold
            })
            .map(|(i, _)| i)
            .collect();
        if owned.is_empty() {
            return;
        }
        let Some(bytes) = crate::index_files::open_mapped(dir, kb, IndexFile::Dense) else {
            return;
        };
        let mapped = match DenseIndex::decode_shared(&bytes, &saved.space, saved.params, false) {
            Ok((m, _)) => m,
            Err(e) => {
                tracing::warn!(kb = %kb, error = %e, "cannot read the dense file just written");
                return;
            }
        };
        if mapped.parts.len() != saved.parts.len() {
            return;
        }
        let lock = self.build_lock(kb);
        let _guard = lock.blocking_lock();
        let Some(current) = self.cached_any(kb) else {
            return;
        };
        let Some(Ok(mut dense)) = current.dense.clone() else {
            return;
        };
        let mut replaced = 0;
        for i in owned {
            let (old, new): (&Arc<Part>, &Arc<Part>) = (&saved.parts[i], &mapped.parts[i]);
            if old.ids != new.ids || !new.index.store().is_shared() {
                continue;
            }
            // A part merged away since is no longer in the current index.
            if let Some(next) = dense.with_part_replaced(old, new.clone()) {
                dense = next;
                replaced += 1;
            }
        }
        if replaced == 0 {
            return;
        }
        let next = Arc::new(KbIndex {
            lexical: current.lexical.clone(),
            vectors: dense.len(),
            dense: Some(Ok(dense)),
            space: current.space.clone(),
            store_dense: current.store_dense,
        });
        // Same commit as the cached index: `install` replaces it.
        self.install(kb, next);
        tracing::debug!(kb = %kb, parts = replaced, "dense vectors now read from the index file");
    }
}
