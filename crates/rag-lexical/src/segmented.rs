//! A full build in bounded segments, each handed to the caller as soon as
//! it is built: the engine writes it to its file and reads it back in
//! place, so a large knowledge base's index is never on the heap whole
//! while it is built, and with the passages arriving in parts
//! ([`rag_core::SnapshotPart`]) neither is its text. Statistics are those
//! of the live passages of every segment together, so the result answers
//! as a one-segment build does.

use crate::index::{is_text, LexicalIndex};
use crate::persist::ReadSegment;
use crate::segment::{Segment, ANALYSIS_BATCH_BYTES};
use rag_core::{KbSnapshot, Passage, PassageKind};
use rag_text::Analyzer;
use std::sync::Arc;

impl LexicalIndex {
    /// The index of `head` (a snapshot: its dictionary, synonyms and
    /// passages, which are taken) and of the passages of `parts`, in
    /// segments of at most `per_segment` passages (at least one). When
    /// there is more than one segment, `spill` gets the index so far and
    /// each segment's place as soon as it is built; what it returns (the
    /// same segment read back from its file, say) takes the segment's
    /// place, and the segment built on the heap is dropped before the next
    /// one starts. A lone segment stays on the heap, as
    /// [`LexicalIndex::build`] leaves it. An error from `spill` ends the
    /// build.
    pub fn build_streamed<E>(
        analyzer: &Analyzer,
        head: &mut KbSnapshot,
        parts: impl IntoIterator<Item = Vec<Passage>>,
        per_segment: usize,
        mut spill: impl FnMut(&LexicalIndex, usize) -> Result<Option<ReadSegment>, E>,
    ) -> Result<Self, E> {
        let passages = std::mem::take(&mut head.passages);
        let (mut index, first) = Self::empty_for(analyzer, passages, head);
        let mut pending = Vec::new();
        let per = per_segment.max(1);
        let mut build = |index: &mut LexicalIndex, part: Vec<Passage>| -> Result<(), E> {
            index.push_segment(Segment::build(&index.analyzer, part, ANALYSIS_BATCH_BYTES));
            let i = index.segments.len() - 1;
            if let Some(ReadSegment(read)) = spill(index, i)? {
                // Only the same passages, stored in the file the segment
                // was given, take its place.
                let same = read.len() == index.segments[i].len()
                    && read.stored.get().is_some()
                    && read.stored.get() == index.segments[i].stored.get();
                if same {
                    index.segments[i] = read;
                }
            }
            Ok(())
        };
        let mut facts_added = false;
        // The head's own text passages are the first part.
        for mut part in std::iter::once(first).chain(parts) {
            let facts: Vec<Passage> = part
                .extract_if(.., |p| p.kind() == PassageKind::Fact)
                .collect();
            if !facts.is_empty() {
                index.owned += facts.iter().filter(|p| p.owner.is_some()).count();
                Arc::make_mut(&mut index.facts).extend(facts);
                facts_added = true;
            }
            part.retain(is_text);
            if pending.is_empty() {
                pending = part;
            } else {
                pending.append(&mut part);
            }
            // A segment is built once more passages follow it: the last
            // one may be the only one.
            while pending.len() > per {
                let rest = pending.split_off(per);
                let full = std::mem::replace(&mut pending, rest);
                build(&mut index, full)?;
            }
        }
        if facts_added {
            Arc::make_mut(&mut index.facts).sort_by_key(|p| p.id);
        }
        if index.segments.is_empty() {
            index.push_segment(Segment::build(
                &index.analyzer,
                pending,
                ANALYSIS_BATCH_BYTES,
            ));
        } else if !pending.is_empty() {
            build(&mut index, pending)?;
        }
        index.language = index.corpus_language();
        Ok(index)
    }
}
