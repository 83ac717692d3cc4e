//! A full build of a knowledge base's lexical index that never holds the
//! whole index, nor the whole text, in memory. With index files kept, the
//! store streams the snapshot ([`rag_core::StoreRead::index_snapshot_streamed`],
//! one read transaction) into a build in segments of
//! [`crate::EngineConfig::segment_passages`] passages; once there is more
//! than one, each is written to its file (in a build directory of its own,
//! `index_files::BuildDir`) and read back in place before the next one is
//! built. The build ends by storing the manifest, which moves the files
//! into place. A build killed half-way leaves the previous files as they
//! were and a build directory that the next save deletes; a stream that
//! ends early (the store failed) is dropped with its directory.
//!
//! A write that cannot be made (a full disk, say) keeps that segment and
//! the rest on the heap, as a build without index files does.

use crate::engine::index_task_failed;
use crate::index_files::{save_lexical, BuildDir};
use rag_core::{failpoint, CoreError, KbId, KbSnapshot, SnapshotPart, Store, TenantId};
use rag_lexical::LexicalIndex;
use rag_text::Analyzer;
use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Passages per part of the streamed snapshot (at most a segment's).
const STREAM_BATCH: usize = 4096;

/// The snapshot's head (without its text passages), the number of stored
/// vectors, and the lexical index, built from the store's stream and
/// stored in `dir` as it is built.
pub(crate) async fn build_streamed(
    store: Arc<dyn Store>,
    tenant: &TenantId,
    kb: KbId,
    analyzer: Analyzer,
    dir: PathBuf,
    per_segment: usize,
) -> Result<(KbSnapshot, usize, LexicalIndex), CoreError> {
    let (parts, received) = std::sync::mpsc::sync_channel::<SnapshotPart>(1);
    let build = tokio::task::spawn_blocking(move || {
        // A build that never ends, for the first-build tests.
        failpoint::hit("index.build");
        build_from_parts(&analyzer, received, dir, kb, per_segment)
    });
    let read = store
        .index_snapshot_streamed(tenant, kb, STREAM_BATCH.min(per_segment.max(1)), parts)
        .await;
    let built = build.await.map_err(index_task_failed)?;
    let vectors = read?;
    let (head, lexical) =
        built.ok_or_else(|| CoreError::Store("the snapshot's stream ended early".into()))?;
    Ok((head, vectors, lexical))
}

/// The build of [`build_streamed`] on its own thread: `None` when the
/// stream did not end with [`SnapshotPart::End`].
fn build_from_parts(
    analyzer: &Analyzer,
    received: Receiver<SnapshotPart>,
    dir: PathBuf,
    kb: KbId,
    per_segment: usize,
) -> Option<(KbSnapshot, LexicalIndex)> {
    let Ok(SnapshotPart::Head(mut head)) = received.recv() else {
        return None;
    };
    let ended = std::cell::Cell::new(false);
    let parts = std::iter::from_fn(|| match received.recv() {
        Ok(SnapshotPart::Passages(p)) => Some(p),
        Ok(SnapshotPart::End) => {
            ended.set(true);
            None
        }
        Ok(SnapshotPart::Head(_)) | Err(_) => None,
    });
    let started = std::time::Instant::now();
    // Made at the first segment written (a knowledge base of one segment
    // is stored by the save after the build, as before).
    let mut build: Option<BuildDir> = None;
    let mut failed = false;
    let mut spilled = 0usize;
    let result = LexicalIndex::build_streamed(
        analyzer,
        &mut head,
        parts,
        per_segment,
        |index, i| {
            if failed {
                return Ok(None);
            }
            // The segment before this one has been dropped, and this one's
            // scaffolding with it: the pages go back to the system.
            crate::heap::release_free_memory();
            let written = match &build {
                Some(b) => b.spill(index, i),
                None => BuildDir::create(&dir, kb).and_then(|b| {
                    let read = b.spill(index, i);
                    build = Some(b);
                    read
                }),
            };
            match written {
                Ok(read) => {
                    spilled += 1;
                    // A kill here leaves a build directory and no manifest of it.
                    failpoint::hit("index.build.spilled");
                    Ok(Some(read))
                }
                Err(e) => {
                    tracing::warn!(kb = %kb, error = %e, "cannot write an index segment while building; building the rest in memory");
                    failed = true;
                    Ok::<_, std::convert::Infallible>(None)
                }
            }
        },
    );
    let index = match result {
        Ok(index) => index,
        Err(never) => match never {},
    };
    if spilled > 0 {
        crate::heap::release_free_memory();
    }
    if !ended.get() {
        return None;
    }
    if let Some(b) = build.as_ref().filter(|_| !failed) {
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
    Some((head, index))
}
