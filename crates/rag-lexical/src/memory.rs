//! Where an index's memory goes: an estimate of the heap bytes held by each
//! part, summed over the segments, for benchmarks and operators (the scale
//! benchmark prints it beside the process's RSS).

use crate::index::LexicalIndex;
use crate::segment::Segment;
use std::mem::size_of;

/// Bytes of one hash-map slot holding `entry` bytes (hashbrown: the entry
/// plus one control byte).
fn slot(entry: usize) -> usize {
    entry + 1
}

fn passages_bytes(seg: &Segment) -> usize {
    seg.texts.as_ref().map_or(0, |t| t.heap_bytes())
        + seg
            .passages
            .iter()
            .map(|p| {
                size_of::<rag_core::Passage>()
                    + p.title.capacity()
                    + p.body.capacity()
                    + p.tags.iter().map(|t| t.capacity() + 24).sum::<usize>()
                    + p.aliases.iter().map(|t| t.capacity() + 24).sum::<usize>()
                    + p.source.as_ref().map_or(0, String::capacity)
                    + p.owner.as_ref().map_or(0, |o| o.capacity())
            })
            .sum::<usize>()
}

impl LexicalIndex {
    /// Estimated heap bytes per part of the index, largest first.
    pub fn heap_parts(&self) -> Vec<(&'static str, usize)> {
        let mut parts = [
            ("passages (stored text)", 0usize),
            ("match texts (normalised copy)", 0),
            ("term postings", 0),
            ("vocabulary", 0),
            ("n-gram postings", 0),
            ("typo tables", 0),
            ("passage ids and lengths", 0),
        ];
        for seg in &self.segments {
            parts[0].1 += passages_bytes(seg);
            parts[1].1 += seg.match_text.heap_bytes();
            parts[2].1 += seg.posting_bytes.heap_bytes() + seg.skips.heap_bytes();
            parts[3].1 +=
                seg.terms.capacity() * size_of::<crate::segment::Term>() + seg.vocab.heap_bytes();
            parts[4].1 += seg.ngrams.heap_bytes();
            parts[5].1 += seg.fuzzy.heap_bytes();
            parts[6].1 += seg.ord_of.capacity() * slot(size_of::<(rag_core::PassageId, u32)>())
                + seg.lengths.heap_bytes()
                + seg.scripts.capacity() * size_of::<crate::segment::Script>();
        }
        let mut parts = parts.to_vec();
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        parts
    }

    /// This index with each segment it holds that was stored in the file
    /// a segment of `read` was read from replaced by that one (its bulk
    /// bytes read in place), so that the heap copies of those bytes are
    /// released; `None` when no segment was replaced.
    pub fn with_read_segments(&self, read: &[crate::ReadSegment]) -> Option<LexicalIndex> {
        let mut next = self.clone();
        let mut replaced = false;
        for new in read {
            let file = new.0.stored.get();
            for seg in next.segments.iter_mut() {
                if file.is_some()
                    && seg.stored.get() == file
                    && seg.len() == new.0.len()
                    && seg.terms.len() == new.0.terms.len()
                    && !std::sync::Arc::ptr_eq(seg, &new.0)
                {
                    *seg = new.0.clone();
                    replaced = true;
                }
            }
        }
        replaced.then_some(next)
    }

    /// Bytes the index reads in place from shared bytes (a mapped index
    /// file) instead of holding them: term postings, n-gram lists, match
    /// texts and passage titles and bodies. Only the pages queries touch are resident.
    pub fn shared_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|seg| {
                seg.match_text.shared_bytes()
                    + seg.texts.as_ref().map_or(0, |t| t.shared_bytes())
                    + seg.posting_bytes.shared_bytes()
                    + seg.skips.shared_bytes()
                    + seg.ngrams.shared_bytes()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use crate::index::tests::faq;
    use rag_core::*;

    #[test]
    fn every_part_is_counted_and_grows_with_the_text() {
        let small = KbSnapshot {
            passages: vec![faq("怎么退款", "在订单页申请退款 refunds")],
            ..Default::default()
        };
        let big = KbSnapshot {
            passages: (0..200)
                .map(|i| {
                    faq(
                        &format!("问题 {i} 怎么退款"),
                        &format!("answer number {i} refunds"),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let analyzer = rag_text::Analyzer::new();
        let a = crate::LexicalIndex::build(&analyzer, &small).heap_parts();
        let b = crate::LexicalIndex::build(&analyzer, &big).heap_parts();
        assert_eq!(a.len(), 7);
        let total = |p: &[(&str, usize)]| p.iter().map(|x| x.1).sum::<usize>();
        assert!(a.iter().all(|(_, n)| *n > 0), "{a:?}");
        assert!(total(&b) > 50 * total(&a) / 2, "{a:?} {b:?}");
    }

    #[test]
    fn a_shared_decode_reads_bulk_bytes_in_place_and_answers_the_same() {
        let snapshot = KbSnapshot {
            passages: (0..300)
                .map(|i| {
                    faq(
                        &format!("问题 {i} 怎么退款"),
                        &format!("answer number {i} refunds within {} days", i % 7),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let analyzer = rag_text::Analyzer::new();
        let built = crate::LexicalIndex::build(&analyzer, &snapshot);
        assert_eq!(built.shared_bytes(), 0);
        let bytes = built.encode_segment(0);
        let file = crate::SegmentFile::of(7, &bytes).unwrap();
        assert!(built.set_segment_file(0, file));
        assert!(!built.set_segment_file(0, crate::SegmentFile { name: 8, ..file }));
        let shared: crate::SharedBytes = std::sync::Arc::new(bytes.clone());
        let manifest = built.encode_manifest().unwrap();
        let read = crate::LexicalIndex::decode_stored(
            &analyzer,
            &manifest,
            std::slice::from_ref(&shared),
            true,
        )
        .unwrap();
        let heap = |ix: &crate::LexicalIndex, part: &str| {
            ix.heap_parts().iter().find(|p| p.0 == part).unwrap().1
        };
        assert!(read.shared_bytes() > 10_000, "{}", read.shared_bytes());
        assert_eq!(heap(&read, "term postings"), 0);
        assert!(
            heap(&read, "match texts (normalised copy)")
                < heap(&built, "match texts (normalised copy)") / 2
        );
        assert!(heap(&read, "n-gram postings") < heap(&built, "n-gram postings"));
        let filter = crate::Filter::everything();
        let params = Bm25Params::default();
        for q in ["退款", "refunds days", "answer number 17", "问题 3"] {
            let (a, b) = (built.analyze_query(q), read.analyze_query(q));
            assert_eq!(
                built.bm25(&a, 20, &params, &filter),
                read.bm25(&b, 20, &params, &filter),
                "{q}"
            );
            assert_eq!(
                built.substring(&a, 20, &filter),
                read.substring(&b, 20, &filter),
                "{q}"
            );
        }
        // The encoding of what was read is the encoding of what was built.
        assert_eq!(read.encode_segment(0), bytes);
        assert_eq!(read.encode_manifest().unwrap(), manifest);
        // The built index can take the segment read on its own: same
        // answers, bulk bytes in place.
        let one = crate::LexicalIndex::read_segment(file, &shared, true).unwrap();
        let swapped = built
            .with_read_segments(std::slice::from_ref(&one))
            .unwrap();
        assert_eq!(swapped.shared_bytes(), read.shared_bytes());
        assert_eq!(swapped.encode_segment(0), bytes);
        assert!(swapped
            .with_read_segments(std::slice::from_ref(&one))
            .is_none());
        let other = crate::LexicalIndex::build(&analyzer, &snapshot);
        assert!(
            other.with_read_segments(&[one]).is_none(),
            "not stored in that file"
        );
        assert!(crate::LexicalIndex::read_segment(
            crate::SegmentFile { name: 8, ..file },
            &shared,
            true
        )
        .is_ok());
        assert!(crate::LexicalIndex::read_segment(
            crate::SegmentFile {
                crc: file.crc ^ 1,
                ..file
            },
            &shared,
            true
        )
        .is_err());
    }
}
