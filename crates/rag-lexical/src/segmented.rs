//! A full build in bounded segments, each handed to the caller as soon as
//! it is built: the engine writes it to its file and reads it back in
//! place, so a large knowledge base's index is never on the heap whole
//! while it is built. Statistics are those of the live passages of every
//! segment together, so the result answers as a one-segment build does.

use crate::index::LexicalIndex;
use crate::persist::ReadSegment;
use crate::segment::{Segment, ANALYSIS_BATCH_BYTES};
use rag_core::KbSnapshot;
use rag_text::Analyzer;

impl LexicalIndex {
    /// [`LexicalIndex::build_taking`] in segments of at most `per_segment`
    /// passages (at least one). After each segment is built, `spill` gets
    /// the index so far and the segment's place; what it returns (the same
    /// segment read back from its file, say) takes the segment's place,
    /// and the segment built on the heap is dropped before the next one
    /// starts. An error from `spill` ends the build.
    ///
    /// The snapshot's passages are taken (left empty), and each segment's
    /// passages are let go as it is built.
    pub fn build_segmented<E>(
        analyzer: &Analyzer,
        snapshot: &mut KbSnapshot,
        per_segment: usize,
        mut spill: impl FnMut(&LexicalIndex, usize) -> Result<Option<ReadSegment>, E>,
    ) -> Result<Self, E> {
        let passages = std::mem::take(&mut snapshot.passages);
        let (mut index, mut text) = Self::empty_for(analyzer, passages, snapshot);
        let per_segment = per_segment.max(1);
        // Segments from the end of the list, so that the list gives its
        // memory back as it shrinks; their order does not change answers
        // (ties are broken by passage id).
        let mut first = true;
        while first || !text.is_empty() {
            first = false;
            let at = text.len().saturating_sub(per_segment);
            let part = text.split_off(at);
            text.shrink_to_fit();
            let segment = Segment::build(&index.analyzer, part, ANALYSIS_BATCH_BYTES);
            index.push_segment(segment);
            let i = index.segments.len() - 1;
            if let Some(ReadSegment(read)) = spill(&index, i)? {
                // Only the same passages, stored in the file the
                // segment was given, take its place.
                let same = read.len() == index.segments[i].len()
                    && read.stored.get().is_some()
                    && read.stored.get() == index.segments[i].stored.get();
                if same {
                    index.segments[i] = read;
                }
            }
        }
        index.language = index.corpus_language();
        Ok(index)
    }
}
