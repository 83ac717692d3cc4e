//! The index as bytes, so that a process starting over a large knowledge
//! base reads its index instead of analysing every passage again.
//!
//! Pure encoding and decoding (no I/O: the engine writes and reads the
//! files). The bytes carry a magic, this format's version, the analyzer's
//! version and the commit sequence; [`LexicalIndex::decode`] refuses bytes
//! of another format or analyzer, and any truncated or inconsistent input,
//! with an error rather than a panic: the file is outside input too.

use crate::fuzzy::FuzzyVocab;
use crate::index::{Dead, LexicalIndex, FIELDS};
use crate::lists::PostingLists;
use crate::ngram::NgramIndex;
use crate::segment::{Script, Segment, Term};
use crate::synonyms::SynonymTable;
use rag_core::{
    ChunkId, DocId, FactId, FaqId, Passage, PassageId, SynonymGroup, TokenKind, UserWord,
};
use rag_text::Analyzer;
use rustc_hash::FxHashMap;

const MAGIC: &[u8; 4] = b"RSLX";
/// Bumped whenever the layout below changes.
const FORMAT: u32 = 3;

/// Why bytes are not an index this build can use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not an index file, or one of another format or analyzer version.
    #[error("not an index of this version: {0}")]
    Version(String),
    /// Truncated or inconsistent.
    #[error("corrupt index: {0}")]
    Corrupt(&'static str),
}

type R<T> = Result<T, DecodeError>;

struct W<'a>(&'a mut Vec<u8>);

impl W<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }
    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
    fn opt_i64(&mut self, v: Option<i64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v as u64);
            }
            None => self.u8(0),
        }
    }
    fn strs(&mut self, v: &[String]) {
        self.len(v.len());
        for s in v {
            self.str(s);
        }
    }
    fn var(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    /// A strictly increasing list, as gaps in variable-length bytes.
    fn u32s(&mut self, v: &[u32]) {
        self.len(v.len());
        let mut prev = 0u64;
        for (i, x) in v.iter().enumerate() {
            let x = u64::from(*x);
            self.var(if i == 0 { x } else { x - prev });
            prev = x;
        }
    }
    fn uuid(&mut self, u: &uuid::Uuid) {
        self.0.extend_from_slice(u.as_bytes());
    }
    fn passage(&mut self, p: &Passage) {
        match p.id {
            PassageId::Chunk(c) => {
                self.u8(0);
                self.uuid(&c.0);
            }
            PassageId::Faq(f) => {
                self.u8(1);
                self.uuid(&f.0);
            }
            PassageId::Fact(f) => {
                self.u8(2);
                self.uuid(&f.0);
            }
        }
        self.str(&p.title);
        self.str(&p.body);
        self.strs(&p.tags);
        self.strs(&p.aliases);
        match &p.doc {
            Some(d) => {
                self.u8(1);
                self.uuid(&d.0);
            }
            None => self.u8(0),
        }
        self.opt_str(p.source.as_deref());
        match p.span {
            Some((a, b)) => {
                self.u8(1);
                self.len(a);
                self.len(b);
            }
            None => self.u8(0),
        }
        self.u64(p.created_at as u64);
        self.opt_i64(p.valid_from);
        self.opt_i64(p.valid_until);
        self.u8(u8::from(p.searchable));
        self.opt_str(p.owner.as_deref());
    }
}

struct Rd<'a> {
    b: &'a [u8],
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if self.b.len() < n {
            return Err(DecodeError::Corrupt("truncated"));
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// A length, checked against the bytes left (each item takes at least `min` bytes).
    fn len(&mut self, min: usize) -> R<usize> {
        let n = self.u64()?;
        if n > (self.b.len() / min.max(1)) as u64 {
            return Err(DecodeError::Corrupt("length past the end"));
        }
        Ok(n as usize)
    }
    fn str(&mut self) -> R<String> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| DecodeError::Corrupt("utf-8"))
    }
    fn flag(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Corrupt("flag")),
        }
    }
    fn opt_str(&mut self) -> R<Option<String>> {
        Ok(if self.flag()? {
            Some(self.str()?)
        } else {
            None
        })
    }
    fn opt_i64(&mut self) -> R<Option<i64>> {
        Ok(if self.flag()? {
            Some(self.u64()? as i64)
        } else {
            None
        })
    }
    fn strs(&mut self) -> R<Vec<String>> {
        let n = self.len(8)?;
        (0..n).map(|_| self.str()).collect()
    }
    fn var(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Corrupt("variable-length number"))
    }
    /// A strictly increasing list written by `W::u32s`.
    fn u32s(&mut self) -> R<Vec<u32>> {
        let n = self.len(1)?;
        let mut out = Vec::with_capacity(n);
        let mut prev = 0u64;
        for i in 0..n {
            let gap = self.var()?;
            if i > 0 && gap == 0 {
                return Err(DecodeError::Corrupt("list not increasing"));
            }
            prev = if i == 0 {
                gap
            } else {
                prev.checked_add(gap)
                    .ok_or(DecodeError::Corrupt("list overflow"))?
            };
            out.push(u32::try_from(prev).map_err(|_| DecodeError::Corrupt("number too large"))?);
        }
        Ok(out)
    }
    fn uuid(&mut self) -> R<uuid::Uuid> {
        Ok(uuid::Uuid::from_bytes(
            self.take(16)?.try_into().expect("16 bytes"),
        ))
    }
    fn passage(&mut self) -> R<Passage> {
        let id = match self.u8()? {
            0 => PassageId::Chunk(ChunkId(self.uuid()?)),
            1 => PassageId::Faq(FaqId(self.uuid()?)),
            2 => PassageId::Fact(FactId(self.uuid()?)),
            _ => return Err(DecodeError::Corrupt("passage kind")),
        };
        Ok(Passage {
            id,
            title: self.str()?,
            body: self.str()?,
            tags: self.strs()?,
            aliases: self.strs()?,
            doc: if self.flag()? {
                Some(DocId(self.uuid()?))
            } else {
                None
            },
            source: self.opt_str()?,
            span: if self.flag()? {
                Some((self.u64()? as usize, self.u64()? as usize))
            } else {
                None
            },
            created_at: self.u64()? as i64,
            valid_from: self.opt_i64()?,
            valid_until: self.opt_i64()?,
            searchable: self.flag()?,
            owner: self.opt_str()?,
        })
    }
}

const KINDS: [TokenKind; 6] = [
    TokenKind::Word,
    TokenKind::Ident,
    TokenKind::Number,
    TokenKind::Han,
    TokenKind::HanChar,
    TokenKind::HanBigram,
];

fn kind_code(k: TokenKind) -> u8 {
    KINDS.iter().position(|x| *x == k).unwrap_or(0) as u8
}

/// Writes `section` after its length, so that a reader can split a
/// segment's sections without parsing them (and decode them in parallel).
fn section(w: &mut W<'_>, section: impl FnOnce(&mut W<'_>)) {
    let mut bytes = Vec::new();
    section(&mut W(&mut bytes));
    w.len(bytes.len());
    w.0.extend_from_slice(&bytes);
}

/// A segment: its passage and term counts, then three sections: passages
/// (with lengths, match texts, scripts, dead flags), terms (with their
/// postings, as kept in memory: `postings.rs`), and the n-gram and typo
/// tables.
fn encode_segment(w: &mut W<'_>, seg: &Segment, dead: &Dead) {
    w.len(seg.passages.len());
    w.len(seg.terms.len());
    section(w, |w| {
        for (o, p) in seg.passages.iter().enumerate() {
            w.passage(p);
            for l in &seg.lengths[o] {
                w.u32(*l);
            }
            w.str(&seg.match_text[o]);
            w.u32(seg.scripts[o].han);
            w.u32(seg.scripts[o].latin);
            w.u8(u8::from(dead.contains(o as u32)));
        }
    });
    section(w, |w| {
        for t in &seg.terms {
            w.str(&t.text);
            w.u8(kind_code(t.kind));
            w.u32(t.count);
            for df in t.df {
                w.u32(df);
            }
            w.u32(t.word_df);
            let bytes = &seg.posting_bytes[t.start..t.end];
            w.len(bytes.len());
            w.0.extend_from_slice(bytes);
        }
    });
    section(w, |w| {
        let (grams, fuzzy) = (seg.ngrams.parts(), seg.fuzzy.parts());
        // The n-gram lists are kept compressed in memory exactly as written
        // here: keys ascending, each list's count, byte length and varint gaps.
        w.len(grams.len());
        for (k, count, bytes) in grams.iter() {
            w.u64(k);
            w.len(count as usize);
            w.len(bytes.len());
            w.0.extend_from_slice(bytes);
        }
        w.len(fuzzy.0.len());
        for (k, list) in fuzzy.0 {
            w.u64(*k);
            w.u32s(list);
        }
        w.len(fuzzy.1.len());
        for (id, n) in fuzzy.1 {
            w.u32(*id);
            w.u32(u32::from(*n));
        }
        w.len(fuzzy.2.len());
        for (k, list) in fuzzy.2 {
            w.str(k);
            w.u32s(list);
        }
    });
}

/// The passages section.
struct PassagePart {
    passages: Vec<Passage>,
    ord_of: FxHashMap<PassageId, u32>,
    lengths: Vec<[u32; FIELDS]>,
    match_text: Vec<String>,
    scripts: Vec<Script>,
    dead: Dead,
}

fn decode_passages(mut r: Rd<'_>, n: usize) -> R<PassagePart> {
    let mut part = PassagePart {
        passages: Vec::with_capacity(n),
        ord_of: FxHashMap::default(),
        lengths: Vec::with_capacity(n),
        match_text: Vec::with_capacity(n),
        scripts: Vec::with_capacity(n),
        dead: Dead::default(),
    };
    part.ord_of.reserve(n);
    for o in 0..n {
        let p = r.passage()?;
        let mut len = [0u32; FIELDS];
        for l in &mut len {
            *l = r.u32()?;
        }
        if part.ord_of.insert(p.id, o as u32).is_some() {
            return Err(DecodeError::Corrupt("duplicate passage"));
        }
        part.passages.push(p);
        part.lengths.push(len);
        part.match_text.push(r.str()?);
        part.scripts.push(Script {
            han: r.u32()?,
            latin: r.u32()?,
        });
        if r.flag()? {
            part.dead.insert(o as u32);
        }
    }
    if !r.b.is_empty() {
        return Err(DecodeError::Corrupt("passages section"));
    }
    Ok(part)
}

/// The terms section: vocabulary, terms and their postings.
type TermPart = (FxHashMap<Box<str>, u32>, Vec<Term>, Vec<u8>);

fn decode_terms(mut r: Rd<'_>, terms: usize, n: usize) -> R<TermPart> {
    let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
    vocab.reserve(terms);
    let mut out = Vec::with_capacity(terms);
    let mut posting_bytes = Vec::with_capacity(r.b.len());
    for id in 0..terms {
        let text: Box<str> = r.str()?.into();
        let kind = *KINDS
            .get(r.u8()? as usize)
            .ok_or(DecodeError::Corrupt("token kind"))?;
        let count = r.u32()?;
        let mut df = [0u32; FIELDS];
        for d in &mut df {
            *d = r.u32()?;
        }
        let word_df = r.u32()?;
        if count as usize > n || df.iter().chain([&word_df]).any(|d| *d > count) {
            return Err(DecodeError::Corrupt("term counts"));
        }
        // The postings are copied as they are (the checksum vouched for
        // them); reading them stops at an ordinal past the segment, so
        // even crafted bytes cannot index out of bounds.
        let len = r.len(1)?;
        let bytes = r.take(len)?;
        if vocab.insert(text.clone(), id as u32).is_some() {
            return Err(DecodeError::Corrupt("duplicate term"));
        }
        let start = posting_bytes.len();
        posting_bytes.extend_from_slice(bytes);
        out.push(Term {
            text,
            kind,
            start,
            end: posting_bytes.len(),
            count,
            df,
            word_df,
        });
    }
    if !r.b.is_empty() {
        return Err(DecodeError::Corrupt("terms section"));
    }
    posting_bytes.shrink_to_fit();
    Ok((vocab, out, posting_bytes))
}

fn decode_tables(mut r: Rd<'_>, terms: usize, n: usize) -> R<(NgramIndex, FuzzyVocab)> {
    let r = &mut r;
    let check = |list: &[u32], bound: usize| list.iter().all(|x| (*x as usize) < bound);
    let mut grams = PostingLists::default();
    for _ in 0..r.len(9)? {
        let k = r.u64()?;
        let count = r.len(1)?;
        let len = r.len(1)?;
        let bytes = r.take(len)?;
        let count = u32::try_from(count).map_err(|_| DecodeError::Corrupt("n-gram list"))?;
        grams
            .push_shaped(k, count, bytes)
            .map_err(|_| DecodeError::Corrupt("n-gram list"))?;
    }
    let mut trigrams: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
    for _ in 0..r.len(9)? {
        let k = r.u64()?;
        let list = r.u32s()?;
        if !check(&list, terms) {
            return Err(DecodeError::Corrupt("trigram term"));
        }
        trigrams.insert(k, list);
    }
    let mut lens: FxHashMap<u32, u16> = FxHashMap::default();
    for _ in 0..r.len(8)? {
        let id = r.u32()?;
        let n = r.u32()?;
        if id as usize >= terms {
            return Err(DecodeError::Corrupt("trigram term"));
        }
        lens.insert(id, n as u16);
    }
    let mut pinyin: FxHashMap<String, Vec<u32>> = FxHashMap::default();
    for _ in 0..r.len(9)? {
        let k = r.str()?;
        let list = r.u32s()?;
        if !check(&list, terms) {
            return Err(DecodeError::Corrupt("pinyin term"));
        }
        pinyin.insert(k, list);
    }
    if !r.b.is_empty() {
        return Err(DecodeError::Corrupt("tables section"));
    }
    Ok((
        NgramIndex::from_parts(grams, n as u32),
        FuzzyVocab::from_parts(trigrams, lens, pinyin),
    ))
}

/// The sections of one segment, split by their lengths (not yet parsed).
struct RawSegment<'a> {
    n: usize,
    terms: usize,
    sections: [&'a [u8]; 3],
}

fn split_segment<'a>(r: &mut Rd<'a>) -> R<RawSegment<'a>> {
    let n = r.len(16)?;
    let terms = r.len(11)?;
    let mut sections: [&[u8]; 3] = [&[]; 3];
    for s in &mut sections {
        let len = r.len(1)?;
        *s = r.take(len)?;
    }
    Ok(RawSegment { n, terms, sections })
}

/// Decodes the segments' sections on up to `threads` threads (each section
/// is independent of the others once split).
fn decode_segments(raw: Vec<RawSegment<'_>>, threads: usize) -> R<Vec<(Segment, Dead)>> {
    enum Part {
        Passages(PassagePart),
        Terms(TermPart),
        Tables((NgramIndex, FuzzyVocab)),
    }
    let jobs: Vec<(usize, usize)> = (0..raw.len())
        .flat_map(|s| (0..3).map(move |k| (s, k)))
        .collect();
    let run = |&(s, k): &(usize, usize)| -> R<Part> {
        let seg = &raw[s];
        let r = Rd { b: seg.sections[k] };
        Ok(match k {
            0 => Part::Passages(decode_passages(r, seg.n)?),
            1 => Part::Terms(decode_terms(r, seg.terms, seg.n)?),
            _ => Part::Tables(decode_tables(r, seg.terms, seg.n)?),
        })
    };
    // Largest sections first, each to the thread with the least bytes.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    let size = |j: usize| raw[jobs[j].0].sections[jobs[j].1].len();
    order.sort_by_key(|&j| std::cmp::Reverse(size(j)));
    let threads = threads.clamp(1, jobs.len().max(1));
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); threads];
    let mut load = vec![0usize; threads];
    for j in order {
        let t = (0..threads).min_by_key(|&t| load[t]).unwrap_or(0);
        load[t] += size(j);
        groups[t].push(j);
    }
    let mut parts: Vec<Option<R<Part>>> = (0..jobs.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|g| scope.spawn(|| g.iter().map(|&j| (j, run(&jobs[j]))).collect::<Vec<_>>()))
            .collect();
        for h in handles {
            for (j, part) in h.join().expect("an index decoding thread panicked") {
                parts[j] = Some(part);
            }
        }
    });
    let mut parts = parts.into_iter().map(|p| p.expect("every section decoded"));
    let mut out = Vec::with_capacity(raw.len());
    for _ in 0..raw.len() {
        // Jobs were made three per segment in this order; the first error
        // in file order is the one reported.
        let mut next = || parts.next().unwrap_or(Err(DecodeError::Corrupt("section")));
        let (p, t, g) = (next()?, next()?, next()?);
        let (Part::Passages(p), Part::Terms(t), Part::Tables(g)) = (p, t, g) else {
            return Err(DecodeError::Corrupt("section order"));
        };
        let (vocab, terms, posting_bytes) = t;
        let (ngrams, fuzzy) = g;
        out.push((
            Segment {
                passages: p.passages,
                ord_of: p.ord_of,
                vocab,
                terms,
                posting_bytes,
                lengths: p.lengths,
                match_text: p.match_text,
                scripts: p.scripts,
                ngrams,
                fuzzy,
            },
            p.dead,
        ));
    }
    Ok(out)
}

impl LexicalIndex {
    /// The index as bytes (see [`LexicalIndex::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = W(&mut out);
        w.0.extend_from_slice(MAGIC);
        w.u32(FORMAT);
        w.u32(rag_text::ANALYZER_VERSION);
        w.u64(self.seq());
        w.len(self.user_words().len());
        for u in self.user_words() {
            w.str(&u.word);
            w.opt_i64(u.freq.map(i64::from));
        }
        w.len(self.synonym_groups().len());
        for g in self.synonym_groups() {
            w.strs(&g.terms);
        }
        w.len(self.facts.len());
        for p in self.facts.iter() {
            w.passage(p);
        }
        w.len(self.segments.len());
        for (seg, dead) in self.segments.iter().zip(&self.dead) {
            encode_segment(&mut w, seg, dead);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The commit sequence of encoded bytes, if they are an index of this
    /// format and analyzer.
    pub fn encoded_seq(bytes: &[u8]) -> Result<u64, DecodeError> {
        let mut r = Rd { b: bytes };
        header(&mut r)
    }

    /// An index from [`LexicalIndex::encode`]'s bytes, with `analyzer` (the
    /// base analyzer, without user words) as a fresh build would use.
    pub fn decode(analyzer: &Analyzer, bytes: &[u8]) -> Result<LexicalIndex, DecodeError> {
        let mut r = Rd { b: bytes };
        let seq = header(&mut r)?;
        // Everything after the header is covered by the checksum at the end:
        // a damaged file is refused here, before any of it is parsed.
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err(DecodeError::Corrupt("truncated"));
        };
        let (body, crc) = bytes.split_at(body_len);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return Err(DecodeError::Corrupt("checksum"));
        }
        let mut r = Rd {
            b: &body[bytes.len() - r.b.len()..],
        };
        let mut user_words = Vec::new();
        for _ in 0..r.len(9)? {
            let word = r.str()?;
            let freq = r.opt_i64()?.map(|f| f as u32);
            user_words.push(UserWord { word, freq });
        }
        let mut synonyms = Vec::new();
        for _ in 0..r.len(8)? {
            synonyms.push(SynonymGroup { terms: r.strs()? });
        }
        let mut facts = Vec::new();
        for _ in 0..r.len(16)? {
            facts.push(r.passage()?);
        }
        if facts.windows(2).any(|w| w[0].id >= w[1].id) {
            return Err(DecodeError::Corrupt("fact order"));
        }
        let mut raw = Vec::new();
        for _ in 0..r.len(8)? {
            raw.push(split_segment(&mut r)?);
        }
        if !r.b.is_empty() {
            return Err(DecodeError::Corrupt("trailing bytes"));
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        let segments = decode_segments(raw, threads)?;
        let analyzer_words = analyzer.with_user_words(
            user_words
                .iter()
                .map(|w: &UserWord| (w.word.as_str(), w.freq)),
        );
        let table = SynonymTable::build(&analyzer_words, &synonyms);
        Ok(LexicalIndex::from_parts(
            analyzer.clone(),
            analyzer_words,
            user_words,
            synonyms,
            table,
            facts,
            segments,
            seq,
        ))
    }
}

fn header(r: &mut Rd<'_>) -> R<u64> {
    if r.take(4).ok() != Some(MAGIC.as_slice()) {
        return Err(DecodeError::Version("no index magic".into()));
    }
    let format = r.u32()?;
    if format != FORMAT {
        return Err(DecodeError::Version(format!(
            "format {format}, expected {FORMAT}"
        )));
    }
    let analyzer = r.u32()?;
    if analyzer != rag_text::ANALYZER_VERSION {
        return Err(DecodeError::Version(format!(
            "analyzer {analyzer}, expected {}",
            rag_text::ANALYZER_VERSION
        )));
    }
    r.u64()
}
