//! A full build of a large knowledge base's lexical index that never holds
//! the whole index on the heap: with index files kept, the index is built
//! in segments of [`crate::EngineConfig::segment_passages`] passages, and
//! each is written to its file (in a build directory of its own,
//! `index_files::BuildDir`) and read back in place before the next one is
//! built. The build ends by storing the manifest, which moves the files
//! into place. A build killed half-way leaves the previous files as they
//! were and a build directory that the next save deletes.
//!
//! A write that cannot be made (a full disk, say) keeps that segment and
//! the rest on the heap, as a build without index files does.

use crate::index_files::{save_lexical, BuildDir};
use rag_core::{failpoint, KbId, KbSnapshot};
use rag_lexical::LexicalIndex;
use rag_text::Analyzer;
use std::path::PathBuf;

/// The lexical index of `snapshot` (whose passages are taken), written to
/// `files` (the index directory and the knowledge base) segment by segment
/// as it is built when it holds more than one segment's passages.
pub(crate) fn build_lexical(
    analyzer: &Analyzer,
    snapshot: &mut KbSnapshot,
    files: Option<(PathBuf, KbId)>,
    per_segment: usize,
) -> LexicalIndex {
    let Some((dir, kb)) = files.filter(|_| snapshot.passages.len() > per_segment) else {
        return LexicalIndex::build_taking(analyzer, snapshot);
    };
    let mut build = match BuildDir::create(&dir, kb) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!(kb = %kb, error = %e, "cannot write index segments while building; building in memory");
            None
        }
    };
    let started = std::time::Instant::now();
    let mut spilled = 0usize;
    let result = LexicalIndex::build_segmented(analyzer, snapshot, per_segment, |index, i| {
        let Some(b) = &build else {
            return Ok(None);
        };
        match b.spill(index, i) {
            Ok(read) => {
                spilled += 1;
                // A kill here leaves a build directory and no manifest of it.
                failpoint::hit("index.build.spilled");
                Ok(Some(read))
            }
            Err(e) => {
                tracing::warn!(kb = %kb, error = %e, "cannot write an index segment while building; building the rest in memory");
                build = None;
                Ok::<_, std::convert::Infallible>(None)
            }
        }
    });
    let index = match result {
        Ok(index) => index,
        Err(never) => match never {},
    };
    if let Some(b) = &build {
        match save_lexical(&dir, kb, &index, Some(b)) {
            Ok(saved) => tracing::info!(
                kb = %kb,
                seq = index.seq(),
                segments = index.segment_count(),
                written_while_building = spilled,
                lexical_bytes = saved.bytes,
                ms = started.elapsed().as_millis() as u64,
                "built the lexical index in segments"
            ),
            Err(e) => tracing::warn!(kb = %kb, error = %e, "cannot store the index"),
        }
    }
    index
}
