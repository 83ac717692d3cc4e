//! A bounded heap that keeps the `k` best-scoring rows of a scan.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A scored row ordinal. Its ordering puts *worse* entries first (greater), so a
/// max-heap of them has the worst retained entry on top, ready to be evicted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scored {
    pub(crate) score: f32,
    pub(crate) ordinal: u32,
}

impl Scored {
    /// Better means a higher score; ties go to the lower ordinal, so results are
    /// deterministic.
    fn worse_cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.ordinal.cmp(&other.ordinal))
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.worse_cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.worse_cmp(other)
    }
}

/// Keeps the `k` best entries pushed into it using O(k) memory.
#[derive(Debug)]
pub(crate) struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(4096)),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, score: f32, ordinal: u32) {
        if self.k == 0 {
            return;
        }
        let entry = Scored { score, ordinal };
        if self.heap.len() < self.k {
            self.heap.push(entry);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if entry < *worst {
                *worst = entry;
            }
        }
    }

    /// The retained entries, best first.
    pub(crate) fn into_sorted(self) -> Vec<Scored> {
        // Ascending in the "worse" order is best first.
        self.heap.into_sorted_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_k_in_order() {
        let mut top = TopK::new(3);
        for (i, s) in [0.1f32, 0.9, 0.5, 0.7, 0.2, 0.9].into_iter().enumerate() {
            top.push(s, i as u32);
        }
        let got: Vec<(f32, u32)> = top
            .into_sorted()
            .iter()
            .map(|s| (s.score, s.ordinal))
            .collect();
        assert_eq!(got, vec![(0.9, 1), (0.9, 5), (0.7, 3)]);
    }

    #[test]
    fn zero_k_keeps_nothing() {
        let mut top = TopK::new(0);
        top.push(1.0, 0);
        assert!(top.into_sorted().is_empty());
    }
}
