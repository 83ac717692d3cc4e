//! An n-gram index over the normalised text of passages: the candidate filter
//! of the substring path, as pg_trgm's index accelerates `ILIKE`.
//!
//! Every passage is indexed under the distinct character trigrams of its text;
//! windows made only of non-ASCII characters (Chinese) are also indexed as
//! unigrams and bigrams, so one- and two-character Chinese patterns can be
//! looked up too. A lookup returns a superset of the passages that contain the
//! pattern (exact for patterns of up to three characters), which the substring
//! path then verifies.

use crate::lists::{intersect, GrowingList, List, PostingLists};
use rustc_hash::FxHashMap;

/// The n-gram index.
#[derive(Debug, Default)]
pub(crate) struct NgramIndex {
    postings: PostingLists,
    /// The number of passages: ordinals at or past it (only in a crafted
    /// index file) are dropped from every look-up.
    passages: u32,
}

/// Packs one to three characters into a key. Each character is stored plus
/// one, so an empty slot (zero) never equals a character and keys of
/// different lengths never collide.
fn key(chars: &[char]) -> u64 {
    chars
        .iter()
        .enumerate()
        .fold(0u64, |k, (i, c)| k | ((*c as u64 + 1) << (21 * i)))
}

impl NgramIndex {
    /// The posting lists (for encoding).
    pub(crate) fn parts(&self) -> &PostingLists {
        &self.postings
    }

    /// From decoded posting lists.
    pub(crate) fn from_parts(postings: PostingLists, passages: u32) -> Self {
        NgramIndex { postings, passages }
    }

    pub(crate) fn build<'t>(texts: impl IntoIterator<Item = &'t str>) -> Self {
        // Lists are kept compressed as they grow: a build over millions
        // of passages holds every one of them at once.
        let mut postings: FxHashMap<u64, GrowingList> = FxHashMap::default();
        let mut keys: Vec<u64> = Vec::new();
        let mut passages = 0u32;
        for (ord, text) in texts.into_iter().enumerate() {
            passages += 1;
            keys.clear();
            let chars: Vec<char> = text.chars().collect();
            for w in chars.windows(3) {
                keys.push(key(w));
            }
            for (i, c) in chars.iter().enumerate() {
                if !c.is_ascii() {
                    keys.push(key(&chars[i..i + 1]));
                    if let Some(next) = chars.get(i + 1).filter(|n| !n.is_ascii()) {
                        keys.push(key(&[*c, *next]));
                    }
                }
            }
            keys.sort_unstable();
            keys.dedup();
            for k in &keys {
                postings.entry(*k).or_default().push(ord as u32);
            }
        }
        NgramIndex {
            postings: PostingLists::from_growing(postings),
            passages,
        }
    }

    /// Estimated heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.postings.heap_bytes()
    }

    /// Bytes of lists read in place from shared bytes.
    pub(crate) fn shared_bytes(&self) -> usize {
        self.postings.shared_bytes()
    }

    /// Passages that may contain `pattern`, sorted; `None` when the pattern
    /// cannot be looked up (one or two characters with ASCII among them), in
    /// which case every passage is a candidate.
    pub(crate) fn candidates(&self, pattern: &str) -> Option<Vec<u32>> {
        Some(self.candidates_of(&keys(pattern)?))
    }

    /// The list under an n-gram key.
    pub(crate) fn list(&self, key: u64) -> Option<List<'_>> {
        self.postings.get(key)
    }

    /// The passages holding every one of `keys` (see [`keys`]), sorted.
    pub(crate) fn candidates_of(&self, keys: &[u64]) -> Vec<u32> {
        let mut lists: Vec<List<'_>> = Vec::with_capacity(keys.len());
        for k in keys {
            match self.postings.get(*k) {
                Some(l) => lists.push(l),
                None => return Vec::new(),
            }
        }
        if lists.is_empty() {
            return Vec::new();
        }
        lists.sort_by_key(List::len);
        let mut out: Vec<u32> = lists[0].iter().take_while(|o| *o < self.passages).collect();
        for l in &lists[1..] {
            if out.is_empty() {
                break;
            }
            out = intersect(&out, *l);
        }
        out
    }
}

/// The n-gram keys a look-up of `pattern` intersects, sorted; `None` when
/// it cannot be looked up (one or two characters with ASCII among them).
pub(crate) fn keys(pattern: &str) -> Option<Vec<u64>> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut keys: Vec<u64> = match chars.len() {
        0 => return None,
        1 | 2 if chars.iter().any(char::is_ascii) => return None,
        1 | 2 => vec![key(&chars)],
        _ => chars.windows(3).map(key).collect(),
    };
    keys.sort_unstable();
    keys.dedup();
    Some(keys)
}

/// Whether passages, asked in increasing order, hold every key of a
/// pattern. In a segment of up to [`SMALL_SEGMENT`] passages the lists are
/// intersected once and walked; in a larger one, one forward cursor per key
/// list is sought to each passage asked about, jumping over the lists'
/// blocks, so asking about a few passages costs a few blocks per list.
pub(crate) struct Membership<'a> {
    lists: Vec<crate::lists::ListIter<'a>>,
    /// A key without a list: nothing holds it.
    none: bool,
    /// The passages holding every key, when intersected up front.
    holders: Option<(Vec<u32>, usize)>,
}

/// Segments of at most this many passages answer [`Membership`] from one
/// intersection of the lists.
pub(crate) const SMALL_SEGMENT: u32 = 50_000;

impl<'a> Membership<'a> {
    pub(crate) fn new(index: &'a NgramIndex, keys: &[u64]) -> Self {
        if index.passages <= SMALL_SEGMENT {
            return Self::of_holders(index.candidates_of(keys));
        }
        Self::seeking(index, keys)
    }

    /// From the passages holding every key, already intersected.
    pub(crate) fn of_holders(holders: Vec<u32>) -> Self {
        Membership {
            lists: Vec::new(),
            none: false,
            holders: Some((holders, 0)),
        }
    }

    /// The form for large segments: cursors sought to each passage.
    fn seeking(index: &'a NgramIndex, keys: &[u64]) -> Self {
        let mut lists = Vec::with_capacity(keys.len());
        let mut none = false;
        let mut found: Vec<List<'a>> = Vec::with_capacity(keys.len());
        for k in keys {
            match index.postings.get(*k) {
                Some(l) => found.push(l),
                None => none = true,
            }
        }
        // The shortest list first: most passages that lack a key lack
        // that one, and are turned away before the long lists are sought.
        found.sort_by_key(List::len);
        lists.extend(found.iter().map(List::iter));
        Membership {
            lists,
            none,
            holders: None,
        }
    }

    /// Whether passage `ord` holds every key (`ord` not below the last one
    /// asked about).
    pub(crate) fn holds(&mut self, ord: u32) -> bool {
        if let Some((holders, at)) = &mut self.holders {
            while holders.get(*at).is_some_and(|h| *h < ord) {
                *at += 1;
            }
            return holders.get(*at) == Some(&ord);
        }
        if self.none {
            return false;
        }
        self.lists.iter_mut().all(|it| it.seek(ord) == Some(ord))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_a_superset_of_matches() {
        let texts: Vec<String> = [
            "怎么申请退款",
            "退货政策",
            "refund policy",
            "refunds are quick",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ix = NgramIndex::build(texts.iter().map(String::as_str));
        assert_eq!(ix.candidates("退款"), Some(vec![0]));
        assert_eq!(ix.candidates("退"), Some(vec![0, 1]));
        assert_eq!(ix.candidates("refund"), Some(vec![2, 3]));
        assert_eq!(ix.candidates("policy"), Some(vec![2]));
        assert_eq!(ix.candidates("zzz"), Some(vec![]));
        assert_eq!(ix.candidates("re"), None);
        assert_ne!(key(&['a']), key(&['\0', 'a']));
    }

    #[test]
    fn seeking_membership_answers_as_the_intersection() {
        // Texts over a small alphabet, so that trigram lists span several
        // skip blocks.
        let texts: Vec<String> = (0..3000u32)
            .map(|i| {
                (0..12)
                    .map(|j| ['a', 'b', 'c', 'd'][((i * 7 + j * j * 3 + i / 5) % 4) as usize])
                    .collect()
            })
            .collect();
        let ix = NgramIndex::build(texts.iter().map(String::as_str));
        for pattern in ["abc", "abcd", "dddd", "cab", "bbbb", "acbd"] {
            let ks = keys(pattern).unwrap();
            let want = ix.candidates_of(&ks);
            for step in [1u32, 3, 17, 250] {
                let mut small = Membership::new(&ix, &ks);
                let mut seeking = Membership::seeking(&ix, &ks);
                for ord in (0..3000).step_by(step as usize) {
                    let held = want.binary_search(&ord).is_ok();
                    assert_eq!(small.holds(ord), held, "{pattern} {ord}");
                    assert_eq!(seeking.holds(ord), held, "{pattern} {ord}");
                }
            }
        }
    }
}
