//! One immutable segment of the inverted index: a set of text passages with
//! their vocabulary, postings, field lengths, match texts, n-grams and typo
//! tables. A knowledge base's index is a list of segments (see
//! [`crate::LexicalIndex`]); a write adds a small segment and marks the
//! passages it replaces or deletes as dead in older ones, and segments are
//! merged without analysing their passages again.

use crate::blob::{Blob, Texts};
use crate::fuzzy::FuzzyVocab;
use crate::index::{analyse, PassageTerms, FIELDS, WORD_FIELDS};
use crate::ngram::NgramIndex;
use crate::postings::{Posting, Postings};
use crate::skip::Cursor;
use rag_core::{Passage, PassageId, TokenKind};
use rag_text::Analyzer;
use rustc_hash::FxHashMap;
use std::borrow::Cow;

/// A vocabulary entry of one segment (its text is the segment's
/// [`crate::vocab::Vocab`]'s, under the same id).
#[derive(Debug, Clone)]
pub(crate) struct Term {
    pub kind: TokenKind,
    /// Its postings: a byte range of the segment's buffer ([`Segment::postings`]).
    pub start: usize,
    pub end: usize,
    /// Passages of the segment containing the term (dead ones included).
    pub count: u32,
    /// Passages of the segment containing the term in each field (dead ones included).
    pub df: [u32; FIELDS],
    /// Passages containing the term in any word field (the flat field's df).
    pub word_df: u32,
    /// Where its skip entries start in the segment's skip bytes
    /// (`skip.rs`; a list of one block has none).
    pub skip_start: usize,
}

/// Han characters and ASCII letters of a match text: what the corpus
/// language is judged by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Script {
    pub han: u32,
    pub latin: u32,
}

impl Script {
    pub(crate) fn of(text: &str) -> Self {
        let mut s = Script::default();
        for c in text.chars() {
            if rag_text::is_han(c) {
                s.han += 1;
            } else if c.is_ascii_alphabetic() {
                s.latin += 1;
            }
        }
        s
    }
}

/// An immutable segment.
#[derive(Debug, Default)]
pub(crate) struct Segment {
    /// The passages; when `texts` is set (read in place from an index
    /// file), without their title and body, which are there.
    pub passages: Vec<Passage>,
    /// Each passage's title and body (two texts per passage), when read in
    /// place from shared bytes.
    pub texts: Option<Texts>,
    pub ord_of: FxHashMap<PassageId, u32>,
    pub vocab: crate::vocab::Vocab,
    pub terms: Vec<Term>,
    /// Every term's postings, compressed (`postings.rs`).
    pub posting_bytes: Blob,
    /// The skip entries of every list of more than one block (`skip.rs`).
    pub skips: Blob,
    pub lengths: crate::lengths::FieldLengths,
    /// Normalised title + body + tags of each passage, for substring matching.
    pub match_text: Texts,
    pub scripts: Vec<Script>,
    pub ngrams: NgramIndex,
    pub fuzzy: FuzzyVocab,
    /// The file holding this segment, once it was written to one or read
    /// from one (`persist.rs`).
    pub stored: std::sync::OnceLock<crate::persist::SegmentFile>,
}

/// Text (title and body bytes) analysed per batch while building.
pub(crate) const ANALYSIS_BATCH_BYTES: usize = 1 << 20;

/// Accumulates analysed passages into a segment.
struct Builder {
    seg: Segment,
    local: FxHashMap<u32, [u16; FIELDS]>,
    /// Postings per term id, compressed as they come (a build of millions
    /// of passages holds them all until it finishes), with each list's
    /// last ordinal.
    pending: Vec<(Vec<u8>, Option<u32>)>,
}

impl Builder {
    fn new(capacity: usize) -> Self {
        Builder {
            seg: Segment {
                passages: Vec::with_capacity(capacity),
                lengths: crate::lengths::FieldLengths::with_capacity(capacity),
                match_text: Texts::default(),
                scripts: Vec::with_capacity(capacity),
                ..Segment::default()
            },
            local: FxHashMap::default(),
            pending: Vec::new(),
        }
    }

    fn term_id(&mut self, text: &str, kind: TokenKind) -> u32 {
        if let Some(id) = self.seg.vocab.get(text) {
            return id;
        }
        let id = self.seg.terms.len() as u32;
        let pushed = self.seg.vocab.push(text);
        // A segment's text is far below 4 GiB (a build's are bounded by
        // `SEGMENT_PASSAGES`; a one-segment build of more would need
        // billions of distinct terms).
        assert_eq!(pushed, Some(id), "a segment's vocabulary is full");
        self.seg.terms.push(Term {
            kind,
            start: 0,
            end: 0,
            count: 0,
            df: [0; FIELDS],
            word_df: 0,
            skip_start: 0,
        });
        self.pending.push((Vec::new(), None));
        id
    }

    /// Adds one passage's term frequencies (sorted by term id) as the next ordinal.
    fn push_postings(&mut self, entries: &[(u32, [u16; FIELDS])]) {
        let ord = self.seg.passages.len() as u32;
        for &(id, tf) in entries {
            self.push(id, Posting { ord, tf });
        }
    }

    /// Adds a posting to a term (ordinals increasing per term).
    fn push(&mut self, id: u32, p: Posting) {
        let term = &mut self.seg.terms[id as usize];
        for (df, &n) in term.df.iter_mut().zip(&p.tf) {
            if n > 0 {
                *df += 1;
            }
        }
        if p.tf[..WORD_FIELDS].iter().any(|t| *t > 0) {
            term.word_df += 1;
        }
        term.count += 1;
        let (bytes, last) = &mut self.pending[id as usize];
        crate::postings::put(bytes, *last, &p);
        *last = Some(p.ord);
    }

    fn add_analysed(&mut self, passage: Passage, a: PassageTerms) {
        self.local.clear();
        let mut len = [0u32; FIELDS];
        for (field, tokens) in a.fields.into_iter().enumerate() {
            len[field] = tokens.len() as u32;
            for (text, kind) in tokens {
                let id = self.term_id(&text, kind);
                let tf = self.local.entry(id).or_insert([0; FIELDS]);
                tf[field] = tf[field].saturating_add(1);
            }
        }
        let mut entries: Vec<(u32, [u16; FIELDS])> =
            self.local.iter().map(|(k, v)| (*k, *v)).collect();
        entries.sort_unstable_by_key(|e| e.0);
        self.push_postings(&entries);
        self.push_passage(passage, len, a.match_text);
    }

    fn push_passage(&mut self, passage: Passage, len: [u32; FIELDS], match_text: String) {
        let ord = self.seg.passages.len() as u32;
        self.seg.ord_of.insert(passage.id, ord);
        self.seg.passages.push(passage);
        self.seg.lengths.push(len);
        self.seg.scripts.push(Script::of(&match_text));
        self.seg.match_text.push(&match_text);
    }

    fn finish(mut self) -> Segment {
        // The segment is immutable from here on: its postings go into one
        // buffer, as they were written, and lists of more than one block
        // get their skip entries.
        let total = self.pending.iter().map(|(b, _)| b.len()).sum();
        let mut bytes = Vec::with_capacity(total);
        let mut skips = Vec::new();
        let mut list = Vec::new();
        let mut ends = Vec::new();
        for (term, (pending, _)) in self
            .seg
            .terms
            .iter_mut()
            .zip(std::mem::take(&mut self.pending))
        {
            term.start = bytes.len();
            term.skip_start = skips.len();
            bytes.extend_from_slice(&pending);
            term.end = bytes.len();
            if crate::skip::blocks(term.count) == 0 {
                continue;
            }
            list.clear();
            ends.clear();
            let (mut at, mut prev) = (0usize, None);
            while let Some(p) = crate::postings::get(&pending, &mut at, prev) {
                list.push(p);
                ends.push(at);
                prev = Some(p.ord);
            }
            debug_assert_eq!(list.len(), term.count as usize);
            crate::skip::write_entries(&mut skips, &list, &ends, self.seg.lengths.as_slice());
        }
        bytes.shrink_to_fit();
        skips.shrink_to_fit();
        self.seg.posting_bytes = Blob::Owned(bytes);
        self.seg.skips = Blob::Owned(skips);
        self.seg.match_text.shrink_to_fit();
        self.seg.terms.shrink_to_fit();
        self.seg.vocab.shrink_to_fit();
        self.seg.ngrams = NgramIndex::build(self.seg.match_text.iter());
        self.seg.fuzzy = FuzzyVocab::build(&self.seg.vocab, &self.seg.terms);
        self.seg
    }
}

impl Segment {
    /// Analyses `passages` (text passages) into a segment, in batches of
    /// about `batch_bytes` of text, each analysed on all available cores.
    /// Analysed tokens take about ten times the bytes of their text, so each
    /// batch is folded in before the next: the build's peak memory stays near
    /// the size of the segment.
    pub(crate) fn build(analyzer: &Analyzer, passages: Vec<Passage>, batch_bytes: usize) -> Self {
        let mut b = Builder::new(passages.len());
        let mut rest = passages;
        while !rest.is_empty() {
            let n = batch_len(&rest, batch_bytes);
            let tail = rest.split_off(n);
            let analysed = analyse_parallel(analyzer, &rest);
            for (p, a) in rest.into_iter().zip(analysed) {
                b.add_analysed(p, a);
            }
            rest = tail;
        }
        b.finish()
    }

    /// One segment holding the live passages of `parts`, in order, without
    /// analysing anything again: postings, lengths and match texts are
    /// copied with new ordinals.
    pub(crate) fn merge(parts: &[(&Segment, &crate::index::Dead)]) -> Self {
        let capacity = parts.iter().map(|(s, d)| s.len() - d.count()).sum();
        let mut b = Builder::new(capacity);
        // Per part: old ordinal → new ordinal (u32::MAX for dead).
        let mut remaps: Vec<Vec<u32>> = Vec::with_capacity(parts.len());
        let mut next = 0u32;
        for (seg, dead) in parts {
            let remap: Vec<u32> = (0..seg.len() as u32)
                .map(|o| {
                    if dead.contains(o) {
                        u32::MAX
                    } else {
                        next += 1;
                        next - 1
                    }
                })
                .collect();
            remaps.push(remap);
        }
        for ((seg, _), remap) in parts.iter().zip(&remaps) {
            for (tid, term) in seg.terms.iter().enumerate() {
                let mut live = seg
                    .postings(term)
                    .filter(|p| remap[p.ord as usize] != u32::MAX)
                    .map(|p| Posting {
                        ord: remap[p.ord as usize],
                        tf: p.tf,
                    })
                    .peekable();
                if live.peek().is_none() {
                    continue;
                }
                let id = b.term_id(seg.vocab.text(tid as u32), term.kind);
                for p in live {
                    b.push(id, p);
                }
            }
        }
        // Parts are taken in order and ordinals grow with them, so each
        // term's postings are already sorted by ordinal.
        for ((seg, _), remap) in parts.iter().zip(&remaps) {
            for (o, p) in seg.passages.iter().enumerate() {
                if remap[o] == u32::MAX {
                    continue;
                }
                let ord = b.seg.passages.len() as u32;
                b.seg.ord_of.insert(p.id, ord);
                b.seg.passages.push(seg.passage(o).into_owned());
                b.seg.lengths.push(seg.lengths[o]);
                b.seg.scripts.push(seg.scripts[o]);
                b.seg.match_text.push(seg.match_text.get(o));
            }
        }
        b.finish()
    }

    pub(crate) fn len(&self) -> usize {
        self.passages.len()
    }

    /// Passage `o` whole: borrowed when the segment holds its text,
    /// assembled when its title and body are read in place.
    pub(crate) fn passage(&self, o: usize) -> Cow<'_, Passage> {
        match &self.texts {
            None => Cow::Borrowed(&self.passages[o]),
            Some(texts) => Cow::Owned(Passage {
                title: texts.get(2 * o).to_owned(),
                body: texts.get(2 * o + 1).to_owned(),
                ..self.passages[o].clone()
            }),
        }
    }

    /// The title and body of passage `o`.
    pub(crate) fn title_body(&self, o: usize) -> (&str, &str) {
        match &self.texts {
            None => (&self.passages[o].title, &self.passages[o].body),
            Some(texts) => (texts.get(2 * o), texts.get(2 * o + 1)),
        }
    }

    pub(crate) fn term(&self, text: &str) -> Option<&Term> {
        self.vocab.get(text).map(|id| &self.terms[id as usize])
    }

    /// A cursor on a term's postings, with its skip entries.
    pub(crate) fn cursor(&self, term: &Term) -> Cursor<'_> {
        let bytes = self
            .posting_bytes
            .get(term.start..term.end)
            .unwrap_or_default();
        let n = crate::skip::blocks(term.count) * crate::skip::ENTRY_BYTES;
        let skips = term
            .skip_start
            .checked_add(n)
            .and_then(|end| self.skips.get(term.skip_start..end))
            .unwrap_or_default();
        Cursor::new(bytes, skips, self.passages.len() as u32)
    }

    /// A term's postings, in increasing ordinal.
    pub(crate) fn postings(&self, term: &Term) -> Postings<'_> {
        let bytes = self
            .posting_bytes
            .get(term.start..term.end)
            .unwrap_or_default();
        Postings::new(bytes, self.passages.len() as u32)
    }
}

/// How many passages from the front of `passages` make one batch of about
/// `budget` bytes of text (at least one).
pub(crate) fn batch_len(passages: &[Passage], budget: usize) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    while n < passages.len() && (n == 0 || bytes < budget) {
        bytes += passages[n].title.len() + passages[n].body.len();
        n += 1;
    }
    n
}

fn analyse_parallel(analyzer: &Analyzer, passages: &[Passage]) -> Vec<PassageTerms> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if threads <= 1 || passages.len() < 256 {
        return passages.iter().map(|p| analyse(analyzer, p)).collect();
    }
    let chunk = passages.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = passages
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|p| analyse(analyzer, p))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("analysis thread panicked"))
            .collect()
    })
}
