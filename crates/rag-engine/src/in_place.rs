//! After the index files are written, a long-lived process (a server) reads
//! their bulk bytes from them too, as a process starting over them would:
//! the dense graph parts' full-precision vectors, and the lexical segments'
//! postings, n-gram lists and match texts. The heap copies built from the
//! store are released, so a server's memory does not depend on whether it
//! built its indexes or read them.

use crate::dense::{DenseIndex, Part};
use crate::engine::{Engine, KbIndex};
use rag_core::KbId;
use rag_lexical::{LexicalIndex, SegmentFile};
use std::path::Path;
use std::sync::Arc;

impl Engine {
    /// Maps the files just written for `saved` (the index they were encoded
    /// from: its dense file, and the lexical segments `written`) and, under
    /// the knowledge base's lock, replaces in the current index each part
    /// and segment it still holds by the same one read from the files. Runs
    /// on a blocking thread; any failure leaves the index as it is.
    pub(crate) fn read_saved_in_place(
        &self,
        dir: &Path,
        kb: KbId,
        saved: &KbIndex,
        written: &[(usize, SegmentFile)],
    ) {
        let segments: Vec<rag_lexical::ReadSegment> = written
            .iter()
            .filter_map(|(_, file)| {
                let (bytes, release) = crate::index_files::open_segment(dir, kb, *file, false)?;
                let read = LexicalIndex::read_segment(*file, &bytes, false)
                    .map_err(|e| tracing::warn!(kb = %kb, error = %e, "cannot read the index file just written"))
                    .ok();
                release.iter().for_each(crate::mapped::Release::pages);
                read
            })
            .collect();
        let dense = match &saved.dense {
            Some(Ok(d)) if !saved.store_dense => self.read_dense(dir, kb, d),
            _ => None,
        };
        let lock = self.build_lock(kb);
        let _guard = lock.blocking_lock();
        let Some(current) = self.cached_any(kb) else {
            return;
        };
        let new_lexical = current.lexical.with_read_segments(&segments);
        let new_dense = match (&current.dense, &saved.dense, dense) {
            (Some(Ok(now)), Some(Ok(was)), Some(read)) => replace_parts(now, was, &read),
            _ => None,
        };
        if new_lexical.is_none() && new_dense.is_none() {
            return;
        }
        let dense = match new_dense {
            Some(d) => Some(Ok(d)),
            None => current.dense.clone(),
        };
        let next = Arc::new(KbIndex {
            lexical: new_lexical.unwrap_or_else(|| current.lexical.clone()),
            vectors: current.vectors,
            dense,
            space: current.space.clone(),
            store_dense: current.store_dense,
            store_passages: current.store_passages,
        });
        // Same commit as the cached index: `install` replaces it.
        self.install(kb, next);
        tracing::debug!(kb = %kb, "indexes now read in place from their files");
    }

    /// The dense file decoded over its mapping, when `saved` has a
    /// graph-sized part holding its vectors on the heap.
    fn read_dense(&self, dir: &Path, kb: KbId, saved: &DenseIndex) -> Option<DenseIndex> {
        owned_graph_parts(saved).next()?;
        let bytes = crate::index_files::open_dense(dir, kb, false)?;
        DenseIndex::decode_shared(&bytes, &saved.space, saved.params)
            .map(|(m, _)| m)
            .map_err(
                |e| tracing::warn!(kb = %kb, error = %e, "cannot read the dense file just written"),
            )
            .ok()
            .filter(|m| m.parts.len() == saved.parts.len())
    }
}

/// Parts large enough for a graph that hold their vectors on the heap; the
/// small parts of recent writes are merged and replaced too often to be
/// worth it.
fn owned_graph_parts(saved: &DenseIndex) -> impl Iterator<Item = usize> + '_ {
    saved.parts.iter().enumerate().filter_map(|(i, p)| {
        (!p.index.store().is_shared() && p.ids.len() >= saved.params.hnsw_threshold).then_some(i)
    })
}

/// `now` with each owned graph part of `saved` it still holds replaced by
/// the same part of `read`; `None` when none was.
fn replace_parts(now: &DenseIndex, saved: &DenseIndex, read: &DenseIndex) -> Option<DenseIndex> {
    let mut dense = now.clone();
    let mut replaced = false;
    for i in owned_graph_parts(saved) {
        let (old, new): (&Arc<Part>, &Arc<Part>) = (&saved.parts[i], &read.parts[i]);
        if old.ids != new.ids || !new.index.store().is_shared() {
            continue;
        }
        // A part merged away since is no longer in the current index.
        if let Some(next) = dense.with_part_replaced(old, new.clone()) {
            dense = next;
            replaced = true;
        }
    }
    replaced.then_some(dense)
}
