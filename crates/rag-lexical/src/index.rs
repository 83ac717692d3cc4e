//! The inverted index of one knowledge base: a list of immutable segments
//! with dead passages marked, kept current by applying each write's changes.

use crate::filter::Filter;
use crate::segment::{Script, Segment, ANALYSIS_BATCH_BYTES};
use crate::synonyms::SynonymTable;
use rag_core::{
    AnalyzedQuery, KbChanges, KbSnapshot, Passage, PassageId, PassageKind, PassageView,
    SynonymGroup, TokenKind, UserWord,
};
use rag_text::{detect_language, normalize, normalize_for_match, Analyzer, Mode};
use rustc_hash::FxHashSet;
use std::borrow::Cow;
use std::sync::Arc;

/// Fields: title, body, tags (words), and the character bigrams of Chinese text.
pub(crate) const FIELDS: usize = 4;
/// The word fields: title, body, tags.
pub(crate) const WORD_FIELDS: usize = 3;
/// The field of Chinese character bigrams.
pub(crate) const GRAMS: usize = 3;
/// Segments of one size class merged into one (a size class spans a factor
/// of this too).
const MERGE_FACTOR: usize = 8;
/// The most live passages a merge may gather into one segment, and the
/// size of the segments a full build writes out one by one
/// ([`LexicalIndex::build_streamed`]): a merge never rebuilds a segment
/// larger than a build would hold in memory.
pub const SEGMENT_PASSAGES: usize = 1 << 17;

/// The dead passages of one segment: a bit per ordinal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dead {
    bits: Vec<u64>,
    count: usize,
}

impl Dead {
    pub(crate) fn contains(&self, ord: u32) -> bool {
        self.bits
            .get(ord as usize / 64)
            .is_some_and(|w| w & (1 << (ord % 64)) != 0)
    }

    pub(crate) fn insert(&mut self, ord: u32) -> bool {
        let i = ord as usize / 64;
        if self.bits.len() <= i {
            self.bits.resize(i + 1, 0);
        }
        let bit = 1u64 << (ord % 64);
        if self.bits[i] & bit != 0 {
            return false;
        }
        self.bits[i] |= bit;
        self.count += 1;
        true
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The dead ordinals, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros();
                    w &= w - 1;
                    i as u32 * 64 + bit
                })
            })
        })
    }
}

/// A passage's place: segment and ordinal inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ref {
    pub seg: u32,
    pub ord: u32,
}

/// A term's statistics over the live passages of the whole index.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TermStats {
    pub df: [u32; FIELDS],
    pub word_df: u32,
    /// Live passages containing the term in any field.
    pub passages: u32,
}

/// What applying one batch of changes did: the work a write costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Passages analysed (written ones, and those a dictionary change re-reads).
    pub analysed: usize,
    /// Passages marked dead (deleted or replaced).
    pub removed: usize,
    /// Passages copied by segment merges (not analysed again).
    pub merged: usize,
    /// Segments after the change.
    pub segments: usize,
}

/// The index of one knowledge base at one commit. Cloning is cheap (the
/// segments are shared); [`LexicalIndex::apply`] returns the index of a
/// later commit and leaves this one as it is, so queries running on it are
/// answered from the state they started on.
#[derive(Debug, Clone)]
pub struct LexicalIndex {
    /// The analyzer without the knowledge base's user dictionary.
    base_analyzer: Analyzer,
    pub(crate) analyzer: Analyzer,
    user_words: Arc<Vec<UserWord>>,
    synonym_groups: Arc<Vec<SynonymGroup>>,
    pub(crate) synonyms: Arc<SynonymTable>,
    pub(crate) segments: Vec<Arc<Segment>>,
    pub(crate) dead: Vec<Arc<Dead>>,
    /// Fact passages, sorted by id.
    pub(crate) facts: Arc<Vec<Passage>>,
    /// Live text passages (chunks and FAQ entries).
    pub(crate) text_count: u32,
    /// Live tokens per field.
    totals: [u64; FIELDS],
    script: (u64, u64),
    /// Live passages restricted to an owner (when none, every viewer sees
    /// the whole vocabulary).
    pub(crate) owned: usize,
    /// The language most of the text is written in.
    pub(crate) language: rag_core::Language,
    seq: u64,
}

/// A passage analysed the way the index analyses it; stores that keep term
/// statistics themselves (PostgreSQL) store exactly this.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageTerms {
    /// Tokens of the title, body and tags fields, then the Chinese character
    /// bigrams of all three, in that order.
    pub fields: [Vec<(String, TokenKind)>; FIELDS],
    /// Normalised title, body and tags, one per line: what substring matching reads.
    pub match_text: String,
}

/// Analyses a text passage (chunk or FAQ entry) for indexing.
pub fn passage_terms(analyzer: &Analyzer, p: &Passage) -> PassageTerms {
    analyse(analyzer, p)
}

pub(crate) fn analyse(analyzer: &Analyzer, p: &Passage) -> PassageTerms {
    let mut grams = Vec::new();
    let mut take = |text: &str| -> Vec<(String, TokenKind)> {
        let mut words = Vec::new();
        for t in analyzer.analyze(text, Mode::Index) {
            if t.kind.is_bigram() {
                grams.push((t.text, t.kind));
            } else {
                words.push((t.text, t.kind));
            }
        }
        words
    };
    let tags = p.tags.join(" ");
    // Allocated at its final size: these strings stay in the index.
    let parts = [
        normalize_for_match(&p.title),
        normalize_for_match(&p.body),
        normalize_for_match(&tags),
    ];
    let mut match_text = String::with_capacity(parts.iter().map(|t| t.len() + 1).sum());
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            match_text.push('\n');
        }
        match_text.push_str(part);
    }
    let fields = [take(&p.title), take(&p.body), take(&tags), Vec::new()];
    let [title, body, tags, _] = fields;
    PassageTerms {
        fields: [title, body, tags, grams],
        match_text,
    }
}

impl LexicalIndex {
    /// Builds the index of a snapshot. Analysis runs on all available cores.
    pub fn build(analyzer: &Analyzer, snapshot: &KbSnapshot) -> Self {
        Self::build_in_batches(
            analyzer,
            snapshot.passages.clone(),
            snapshot,
            ANALYSIS_BATCH_BYTES,
        )
    }

    /// [`LexicalIndex::build`], taking the snapshot's passages (and leaving
    /// `snapshot.passages` empty) instead of copying them: a large
    /// knowledge base's text is not held twice while its index is built.
    pub fn build_taking(analyzer: &Analyzer, snapshot: &mut KbSnapshot) -> Self {
        let passages = std::mem::take(&mut snapshot.passages);
        Self::build_in_batches(analyzer, passages, snapshot, ANALYSIS_BATCH_BYTES)
    }

    fn build_in_batches(
        analyzer: &Analyzer,
        passages: Vec<Passage>,
        snapshot: &KbSnapshot,
        batch_bytes: usize,
    ) -> Self {
        let (mut index, text) = Self::empty_for(analyzer, passages, snapshot);
        let segment = Segment::build(&index.analyzer, text, batch_bytes);
        index.push_segment(segment);
        index.language = index.corpus_language();
        index
    }

    /// An index of a snapshot's facts, dictionary and synonyms without any
    /// text passage yet, and the text passages of `passages` to build its
    /// segments from.
    pub(crate) fn empty_for(
        analyzer: &Analyzer,
        passages: Vec<Passage>,
        snapshot: &KbSnapshot,
    ) -> (Self, Vec<Passage>) {
        let base_analyzer = analyzer.clone();
        let analyzer = with_words(analyzer, &snapshot.user_words);
        // In place: a large snapshot's list is not copied.
        let mut text = passages;
        let mut facts: Vec<Passage> = text
            .extract_if(.., |p| p.kind() == PassageKind::Fact)
            .collect();
        text.retain(is_text);
        facts.sort_by_key(|p| p.id);
        let synonyms = SynonymTable::build(&analyzer, &snapshot.synonyms);
        let mut index = LexicalIndex {
            base_analyzer,
            analyzer,
            user_words: Arc::new(snapshot.user_words.clone()),
            synonym_groups: Arc::new(snapshot.synonyms.clone()),
            synonyms: Arc::new(synonyms),
            segments: Vec::new(),
            dead: Vec::new(),
            facts: Arc::new(facts),
            text_count: 0,
            totals: [0; FIELDS],
            script: (0, 0),
            owned: 0,
            language: rag_core::Language::Unknown,
            seq: snapshot.seq,
        };
        index.owned = index.facts.iter().filter(|p| p.owner.is_some()).count();
        (index, text)
    }

    /// The index after `changes` (a later commit of the same knowledge
    /// base), touching only what they touched: removed and replaced passages
    /// are marked dead where they are, written ones are analysed into a new
    /// segment, and a dictionary change re-analyses only the passages that
    /// contain a word it added or dropped. Rankings and scores equal those
    /// of an index built from scratch at that commit.
    pub fn apply(&self, changes: &KbChanges) -> (LexicalIndex, ApplyReport) {
        let mut next = self.clone();
        let mut report = ApplyReport::default();
        next.seq = changes.seq;
        let changed: FxHashSet<PassageId> = changes
            .removed
            .iter()
            .copied()
            .chain(changes.upserted.iter().map(|p| p.id))
            .collect();
        // A dictionary change: a new analyzer, and the passages whose
        // segmentation it may change are read again.
        let mut reread: Vec<Passage> = Vec::new();
        let mut analyzer_changed = false;
        if let Some(words) = &changes.user_words {
            if **words != **self.user_words {
                let affected = word_difference(&self.user_words, words);
                for r in self.containing_any(&affected) {
                    let p = self.segments[r.seg as usize].passage(r.ord as usize);
                    if !changed.contains(&p.id) {
                        reread.push(p.into_owned());
                    }
                }
                next.analyzer = with_words(&self.base_analyzer, words);
                next.user_words = Arc::new(words.clone());
                analyzer_changed = true;
            }
        }
        if let Some(groups) = &changes.synonyms {
            next.synonym_groups = Arc::new(groups.clone());
        }
        if analyzer_changed || changes.synonyms.is_some() {
            next.synonyms = Arc::new(SynonymTable::build(&next.analyzer, &next.synonym_groups));
        }
        // Mark dead every old version of a changed or re-read passage.
        let reread_ids: Vec<PassageId> = reread.iter().map(|p| p.id).collect();
        for id in changed.iter().chain(&reread_ids) {
            if next.kill(*id) {
                report.removed += 1;
            }
        }
        let mut text: Vec<Passage> = Vec::new();
        for p in &changes.upserted {
            if p.kind() == PassageKind::Fact {
                let facts = Arc::make_mut(&mut next.facts);
                let at = facts.partition_point(|f| f.id < p.id);
                facts.insert(at, p.clone());
                if p.owner.is_some() {
                    next.owned += 1;
                }
            } else if is_text(p) {
                text.push(p.clone());
            }
        }
        text.extend(reread);
        text.sort_by_key(|p| p.id);
        report.analysed = text.len();
        if !text.is_empty() {
            let segment = Segment::build(&next.analyzer, text, ANALYSIS_BATCH_BYTES);
            next.push_segment(segment);
        }
        report.merged = next.merge_segments(SEGMENT_PASSAGES);
        next.language = next.corpus_language();
        report.segments = next.segments.len();
        (next, report)
    }

    /// An index from decoded parts (see `persist.rs`); totals, counts and
    /// the language are recomputed from the segments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        base_analyzer: Analyzer,
        analyzer: Analyzer,
        user_words: Vec<UserWord>,
        synonym_groups: Vec<SynonymGroup>,
        synonyms: SynonymTable,
        facts: Vec<Passage>,
        segments: Vec<(Segment, Dead)>,
        seq: u64,
    ) -> Self {
        let mut index = LexicalIndex {
            base_analyzer,
            analyzer,
            user_words: Arc::new(user_words),
            synonym_groups: Arc::new(synonym_groups),
            synonyms: Arc::new(synonyms),
            segments: Vec::new(),
            dead: Vec::new(),
            facts: Arc::new(facts),
            text_count: 0,
            totals: [0; FIELDS],
            script: (0, 0),
            owned: 0,
            language: rag_core::Language::Unknown,
            seq,
        };
        index.owned = index.facts.iter().filter(|p| p.owner.is_some()).count();
        for (segment, dead) in segments {
            index.push_segment(segment);
            let si = index.segments.len() - 1;
            let ords: Vec<u32> = (0..index.segments[si].len() as u32)
                .filter(|o| dead.contains(*o))
                .collect();
            for o in ords {
                let id = index.segments[si].passages[o as usize].id;
                index.kill(id);
            }
        }
        index.language = index.corpus_language();
        index
    }

    /// The knowledge base's user dictionary.
    pub fn user_words(&self) -> &[UserWord] {
        &self.user_words
    }

    /// The knowledge base's synonym groups.
    pub fn synonym_groups(&self) -> &[SynonymGroup] {
        &self.synonym_groups
    }

    pub(crate) fn push_segment(&mut self, segment: Segment) {
        for (o, p) in segment.passages.iter().enumerate() {
            for (t, l) in self.totals.iter_mut().zip(&segment.lengths[o]) {
                *t += u64::from(*l);
            }
            let s = segment.scripts[o];
            self.script.0 += u64::from(s.han);
            self.script.1 += u64::from(s.latin);
            if p.owner.is_some() {
                self.owned += 1;
            }
        }
        self.text_count += segment.len() as u32;
        self.segments.push(Arc::new(segment));
        self.dead.push(Arc::new(Dead::default()));
    }

    /// Marks the passage dead wherever it lives; whether it was there.
    fn kill(&mut self, id: PassageId) -> bool {
        if let Ok(at) = self.facts.binary_search_by_key(&id, |p| p.id) {
            let facts = Arc::make_mut(&mut self.facts);
            if facts.remove(at).owner.is_some() {
                self.owned -= 1;
            }
            return true;
        }
        let Some(r) = self.locate(id) else {
            return false;
        };
        let seg = self.segments[r.seg as usize].clone();
        Arc::make_mut(&mut self.dead[r.seg as usize]).insert(r.ord);
        let o = r.ord as usize;
        for (t, l) in self.totals.iter_mut().zip(&seg.lengths[o]) {
            *t -= u64::from(*l);
        }
        let Script { han, latin } = seg.scripts[o];
        self.script.0 -= u64::from(han);
        self.script.1 -= u64::from(latin);
        if seg.passages[o].owner.is_some() {
            self.owned -= 1;
        }
        self.text_count -= 1;
        true
    }

    /// Merges segments of one size class once there are
    /// [`MERGE_FACTOR`] of them (the smallest first, as many as `cap` live
    /// passages hold), compacts segments that are mostly dead and drops
    /// empty ones; returns the passages copied.
    pub(crate) fn merge_segments(&mut self, cap: usize) -> usize {
        let mut copied = 0;
        loop {
            // Segments with nothing live go.
            let mut i = 0;
            while i < self.segments.len() {
                if self.dead[i].count() == self.segments[i].len() {
                    self.segments.remove(i);
                    self.dead.remove(i);
                } else {
                    i += 1;
                }
            }
            let live = |i: usize| self.segments[i].len() - self.dead[i].count();
            let class = |n: usize| {
                let mut c = 0;
                let mut m = n;
                while m >= MERGE_FACTOR {
                    m /= MERGE_FACTOR;
                    c += 1;
                }
                c
            };
            let mut group: Option<Vec<usize>> = None;
            for c in 0..16 {
                let mut members: Vec<usize> = (0..self.segments.len())
                    .filter(|&i| class(live(i)) == c)
                    .collect();
                if members.len() < MERGE_FACTOR {
                    continue;
                }
                members.sort_by_key(|&i| (live(i), i));
                let mut total = 0;
                let fits = members
                    .iter()
                    .take_while(|&&i| {
                        total += live(i);
                        total <= cap
                    })
                    .count();
                if fits >= 2 {
                    members.truncate(fits);
                    // Merged in place of the first: segment order is
                    // that of their ordinals.
                    members.sort_unstable();
                    group = Some(members);
                    break;
                }
            }
            if group.is_none() {
                group = (0..self.segments.len())
                    .find(|&i| self.dead[i].count() * 2 > self.segments[i].len())
                    .map(|i| vec![i]);
            }
            let Some(group) = group else {
                return copied;
            };
            let parts: Vec<(&Segment, &Dead)> = group
                .iter()
                .map(|&i| (&*self.segments[i], &*self.dead[i]))
                .collect();
            let merged = Segment::merge(&parts);
            copied += merged.len();
            let at = group[0];
            for &i in group.iter().rev() {
                self.segments.remove(i);
                self.dead.remove(i);
            }
            self.segments.insert(at, Arc::new(merged));
            self.dead.insert(at, Arc::new(Dead::default()));
        }
    }

    /// Live passages whose match text contains one of `words` (normalised
    /// for matching), found through each segment's n-grams.
    fn containing_any(&self, words: &[String]) -> Vec<Ref> {
        let mut out: Vec<Ref> = Vec::new();
        for w in words {
            let pattern = normalize_for_match(w);
            if pattern.is_empty() {
                continue;
            }
            for (si, seg) in self.segments.iter().enumerate() {
                let dead = &self.dead[si];
                let candidates: Vec<u32> = match seg.ngrams.candidates(&pattern) {
                    Some(c) => c,
                    None => (0..seg.len() as u32).collect(),
                };
                for ord in candidates {
                    if !dead.contains(ord) && seg.match_text.get(ord as usize).contains(&pattern) {
                        out.push(Ref {
                            seg: si as u32,
                            ord,
                        });
                    }
                }
            }
        }
        out.sort_by_key(|r| (r.seg, r.ord));
        out.dedup();
        out
    }

    /// The commit sequence number this index reflects.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The language most of the knowledge base is written in.
    pub fn language(&self) -> rag_core::Language {
        self.language
    }

    /// The analyzer of this knowledge base (with its user dictionary).
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// Number of searchable text passages (chunks and FAQ entries).
    pub fn len(&self) -> usize {
        self.text_count as usize
    }

    /// Whether the index holds no text passage.
    pub fn is_empty(&self) -> bool {
        self.text_count == 0
    }

    /// Number of segments (a measure of how many writes await a merge).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Number of distinct terms of the live passages (counted: it walks the
    /// vocabulary).
    pub fn vocabulary_size(&self) -> usize {
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        for seg in &self.segments {
            for id in 0..seg.vocab.len() as u32 {
                let text = seg.vocab.text(id);
                if self.term_stats(text).is_some_and(|s| s.passages > 0) {
                    seen.insert(text);
                }
            }
        }
        seen.len()
    }

    /// Analyses a query the way this index analysed its passages.
    pub fn analyze_query(&self, raw: &str) -> AnalyzedQuery {
        let normalized = normalize(raw).text;
        AnalyzedQuery {
            raw: raw.to_owned(),
            language: detect_language(&normalized),
            tokens: self.analyzer.analyze(raw, Mode::Query),
            key_terms: self.analyzer.key_terms(raw),
            normalized,
        }
    }

    /// Every live passage of the index, text passages then facts, without
    /// the title and body of those read in place from an index file (they
    /// are empty there): for filters, owners, ids and sources. The whole
    /// passage is [`passage`](Self::passage).
    pub fn passage_metas(&self) -> impl Iterator<Item = &Passage> + '_ {
        self.segments
            .iter()
            .zip(&self.dead)
            .flat_map(|(seg, dead)| {
                seg.passages
                    .iter()
                    .enumerate()
                    .filter(|(o, _)| !dead.contains(*o as u32))
                    .map(|(_, p)| p)
            })
            .chain(self.facts.iter())
    }

    /// A passage by id, whole (assembled when its title and body are read
    /// in place from an index file).
    pub fn passage(&self, id: PassageId) -> Option<Cow<'_, Passage>> {
        if let Some(r) = self.locate(id) {
            return Some(self.segments[r.seg as usize].passage(r.ord as usize));
        }
        self.facts
            .binary_search_by_key(&id, |p| p.id)
            .ok()
            .map(|i| Cow::Borrowed(&self.facts[i]))
    }

    /// A passage by id without its title and body when those are read in
    /// place (see [`passage_metas`](Self::passage_metas)): cheap, for
    /// filters and per-candidate checks.
    pub fn passage_meta(&self, id: PassageId) -> Option<&Passage> {
        if let Some(r) = self.locate(id) {
            return Some(self.meta_at(r));
        }
        self.facts
            .binary_search_by_key(&id, |p| p.id)
            .ok()
            .map(|i| &self.facts[i])
    }

    /// Where a live text passage is.
    pub(crate) fn locate(&self, id: PassageId) -> Option<Ref> {
        self.segments
            .iter()
            .enumerate()
            .rev()
            .find_map(|(si, seg)| {
                let ord = *seg.ord_of.get(&id)?;
                (!self.dead[si].contains(ord)).then_some(Ref {
                    seg: si as u32,
                    ord,
                })
            })
    }

    /// The passage at `r`, without its title and body when those are read
    /// in place: for filters and ids.
    pub(crate) fn meta_at(&self, r: Ref) -> &Passage {
        &self.segments[r.seg as usize].passages[r.ord as usize]
    }

    /// The passage as shown with a hit, with `matched` terms highlighted in its body.
    pub fn view(&self, id: PassageId, matched: &[String]) -> Option<PassageView> {
        self.passage(id).map(|p| self.view_of(&p, matched))
    }

    /// The view of a passage this index may not hold (one read from the
    /// store by id), highlighted with this index's analyzer.
    pub fn view_of(&self, p: &Passage, matched: &[String]) -> PassageView {
        PassageView {
            id: p.id,
            kind: p.kind(),
            title: p.title.clone(),
            body: p.body.clone(),
            source: p.source.clone(),
            highlights: crate::highlight(&self.analyzer, &p.body, matched),
        }
    }

    /// Average length of each field over the live passages; the last entry
    /// is the flat word field (title + body + tags).
    pub(crate) fn avg_len(&self) -> [f32; FIELDS + 1] {
        let n = self.text_count.max(1) as f32;
        let mut avg = [0f32; FIELDS + 1];
        for (a, t) in avg.iter_mut().zip(&self.totals) {
            *a = (*t as f32 / n).max(1.0);
        }
        avg[FIELDS] = (self.totals[..WORD_FIELDS].iter().sum::<u64>() as f32 / n).max(1.0);
        avg
    }

    /// A term's document frequencies over the live passages; `None` when no
    /// segment has the term.
    pub(crate) fn term_stats(&self, text: &str) -> Option<TermStats> {
        let mut out: Option<TermStats> = None;
        for (si, seg) in self.segments.iter().enumerate() {
            let Some(term) = seg.term(text) else {
                continue;
            };
            let s = out.get_or_insert_with(TermStats::default);
            let dead = &self.dead[si];
            if dead.count() == 0 {
                for (a, b) in s.df.iter_mut().zip(&term.df) {
                    *a += b;
                }
                s.word_df += term.word_df;
                s.passages += term.count;
                continue;
            }
            // The segment's counts, less those of its dead passages that
            // hold the term (sought through the list, not walked).
            for (a, b) in s.df.iter_mut().zip(&term.df) {
                *a += b;
            }
            s.word_df += term.word_df;
            s.passages += term.count;
            let mut cursor = seg.cursor(term);
            for ord in dead.iter() {
                cursor.seek(ord);
                let Some(p) = cursor.current() else {
                    break;
                };
                if p.ord != ord {
                    continue;
                }
                for (a, &n) in s.df.iter_mut().zip(&p.tf) {
                    if n > 0 {
                        *a = a.saturating_sub(1);
                    }
                }
                if p.tf[..WORD_FIELDS].iter().any(|t| *t > 0) {
                    s.word_df = s.word_df.saturating_sub(1);
                }
                s.passages = s.passages.saturating_sub(1);
            }
        }
        out
    }

    /// Whether a live passage the filter's viewer may see contains the
    /// term: what notes and typo look-ups consult, so that the words of
    /// another owner's documents are never revealed (as "known", or as a
    /// correction), and words only deleted passages had are unknown.
    pub(crate) fn term_visible(&self, text: &str, filter: &Filter) -> bool {
        let everyone = self.owned == 0 || filter.sees_everything();
        self.segments.iter().enumerate().any(|(si, seg)| {
            let Some(term) = seg.term(text) else {
                return false;
            };
            let dead = &self.dead[si];
            if everyone && dead.count() == 0 {
                return term.count > 0;
            }
            seg.postings(term).any(|p| {
                !dead.contains(p.ord)
                    && (everyone || filter.sees_owner_of(&seg.passages[p.ord as usize]))
            })
        })
    }

    /// The language of the live text from its Han characters and Latin
    /// letters (a Chinese character weighs about as much as four letters).
    pub(crate) fn corpus_language(&self) -> rag_core::Language {
        crate::language::language_of_script(self.script.0, self.script.1)
    }

    /// This index with the script counts (Han characters, ASCII letters) of
    /// text it does not hold: an index of a knowledge base's head only,
    /// whose text a store holds and counts ([`rag_core::RecallHead`]).
    pub fn with_script(mut self, han: u64, latin: u64) -> Self {
        self.script = (han, latin);
        self.language = self.corpus_language();
        self
    }
}

/// Whether a passage belongs in the text index (searchable chunks and FAQ entries).
pub(crate) fn is_text(p: &Passage) -> bool {
    p.kind() != PassageKind::Fact && p.searchable
}

fn with_words(analyzer: &Analyzer, words: &[UserWord]) -> Analyzer {
    analyzer.with_user_words(words.iter().map(|w| (w.word.as_str(), w.freq)))
}

/// Words added, dropped or given another frequency between two dictionaries.
fn word_difference(old: &[UserWord], new: &[UserWord]) -> Vec<String> {
    let mut out: Vec<String> = old
        .iter()
        .filter(|w| !new.contains(w))
        .chain(new.iter().filter(|w| !old.contains(w)))
        .map(|w| w.word.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
#[path = "index_tests.rs"]
pub(crate) mod tests;
