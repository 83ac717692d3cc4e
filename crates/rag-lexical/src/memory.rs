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
    seg.passages
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
        .sum()
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
            parts[1].1 += seg
                .match_text
                .iter()
                .map(|t| t.capacity() + size_of::<String>())
                .sum::<usize>();
            parts[2].1 += seg.posting_bytes.capacity();
            parts[3].1 += seg
                .terms
                .iter()
                .map(|t| size_of::<crate::segment::Term>() + 2 * t.text.len())
                .sum::<usize>()
                + seg.vocab.capacity() * slot(size_of::<(Box<str>, u32)>());
            parts[4].1 += seg.ngrams.heap_bytes();
            parts[5].1 += seg.fuzzy.heap_bytes();
            parts[6].1 += seg.ord_of.capacity() * slot(size_of::<(rag_core::PassageId, u32)>())
                + seg.lengths.capacity() * size_of::<[u32; crate::index::FIELDS]>()
                + seg.scripts.capacity() * size_of::<crate::segment::Script>();
        }
        let mut parts = parts.to_vec();
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        parts
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
}
