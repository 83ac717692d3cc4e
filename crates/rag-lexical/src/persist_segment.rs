//! One segment's file (see `persist.rs` for the manifest that lists them).
//!
//! A segment file is a magic, the format and analyzer versions, the
//! segment, and a CRC-32 of everything before it. The segment is its
//! passage and term counts, three sections of tables and six of bulk
//! bytes, each after its length so that a reader can split them without
//! parsing (and parse the tables in parallel):
//!
//! 1. passages: each passage with its field lengths, the byte length of
//!    its match text and its scripts;
//! 2. terms: text, kind, counts and the byte length of its postings;
//! 3. the n-gram table (keys ascending, each list's entry count and byte
//!    length) and the typo tables;
//! 4. the match texts, one after another;
//! 5. the term postings in term order, compressed as in memory
//!    (`postings.rs`);
//! 6. the n-gram lists in key order, compressed as in memory (`lists.rs`);
//! 7. each passage's title and body, one after another;
//! 8. the skip entries of the term postings of more than one block, in
//!    term order (`skip.rs`);
//! 9. the skip entries of the n-gram lists of more than one block, in key
//!    order (`lists.rs`).
//!
//! Passage records (1.) carry an empty title and body and the byte lengths
//! of both, which are in 7. A segment never changes once written: which of
//! its passages are dead is the manifest's. The last six sections are never parsed when
//! read: the segment refers to them
//! where they lie in the caller's shared bytes ([`crate::blob`]), so a
//! memory-mapped file's bulk bytes are paged in only as queries touch
//! them.

use crate::blob::{Blob, SharedBytes, Texts};
use crate::fuzzy::FuzzyVocab;
use crate::index::FIELDS;
use crate::lists::PostingLists;
use crate::ngram::NgramIndex;
use crate::persist::{header, DecodeError, Rd, R, W};
use crate::segment::{Script, Segment, Term};
use crate::vocab::Vocab;
use rag_core::{Passage, PassageId, TokenKind};
use rustc_hash::FxHashMap;

const KINDS: [TokenKind; 8] = [
    TokenKind::Word,
    TokenKind::Ident,
    TokenKind::Number,
    TokenKind::Han,
    TokenKind::HanChar,
    TokenKind::HanBigram,
    TokenKind::HanStop,
    TokenKind::HanStopBigram,
];

fn kind_code(k: TokenKind) -> u8 {
    KINDS.iter().position(|x| *x == k).unwrap_or(0) as u8
}

/// Where a segment's bytes go as they are made: a buffer, or a file
/// written through (so a large segment is never encoded whole in memory).
type Sink<'a> = dyn FnMut(&[u8]) + 'a;

/// Sends a table section after its length, so that a reader can split a
/// segment's sections without parsing them (and decode them in parallel).
fn section(out: &mut Sink<'_>, section: impl FnOnce(&mut W<'_>)) {
    let mut bytes = Vec::new();
    section(&mut W(&mut bytes));
    out(&(bytes.len() as u64).to_le_bytes());
    out(&bytes);
}

/// Sends a bulk section (pieces of the segment's own buffers, not copied)
/// after its length.
fn bulk<'s, I: Iterator<Item = &'s [u8]>>(out: &mut Sink<'_>, pieces: impl Fn() -> I) {
    let len: usize = pieces().map(<[u8]>::len).sum();
    out(&(len as u64).to_le_bytes());
    for p in pieces() {
        out(p);
    }
}

/// Magic of a segment file.
pub(crate) const SEGMENT_MAGIC: &[u8; 4] = b"RSLS";

/// A segment's file bytes (layout in the module docs).
pub(crate) fn segment_file(seg: &Segment) -> Vec<u8> {
    let mut out = Vec::new();
    let crc = write_segment_file(seg, &mut |b: &[u8]| out.extend_from_slice(b));
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Sends a segment's file bytes but the last four to `out`, and returns
/// those four: the CRC-32 of the rest.
pub(crate) fn write_segment_file(seg: &Segment, out: &mut Sink<'_>) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    let mut checked = |b: &[u8]| {
        hasher.update(b);
        out(b);
    };
    let mut head = Vec::new();
    crate::persist::write_header(&mut W(&mut head), SEGMENT_MAGIC);
    checked(&head);
    encode_segment(&mut checked, seg);
    hasher.finalize()
}

/// Writes a segment (layout in the module docs).
fn encode_segment(out: &mut Sink<'_>, seg: &Segment) {
    out(&(seg.passages.len() as u64).to_le_bytes());
    out(&(seg.terms.len() as u64).to_le_bytes());
    section(out, |w| {
        for ((o, p), text_len) in seg
            .passages
            .iter()
            .enumerate()
            .zip(seg.match_text.lengths())
        {
            let (title, body) = seg.title_body(o);
            w.passage_with(p, "", "");
            w.len(title.len());
            w.len(body.len());
            for l in &seg.lengths[o] {
                w.u32(*l);
            }
            w.len(text_len);
            w.u32(seg.scripts[o].han);
            w.u32(seg.scripts[o].latin);
        }
    });
    section(out, |w| {
        for (id, t) in seg.terms.iter().enumerate() {
            w.str(seg.vocab.text(id as u32));
            w.u8(kind_code(t.kind));
            w.u32(t.count);
            for df in t.df {
                w.u32(df);
            }
            w.u32(t.word_df);
            w.len(t.end - t.start);
        }
    });
    let (grams, fuzzy) = (seg.ngrams.parts(), seg.fuzzy.parts());
    section(out, |w| {
        w.len(grams.len());
        for (k, count, bytes) in grams.iter() {
            w.u64(k);
            w.len(count as usize);
            w.len(bytes.len());
        }
        // The typo tables are hash maps: written in key order, so that a
        // segment's bytes depend on its content only (a segment read back
        // encodes to the bytes it was read from).
        let mut trigrams: Vec<_> = fuzzy.0.iter().collect();
        trigrams.sort_unstable_by_key(|(k, _)| **k);
        w.len(trigrams.len());
        for (k, list) in trigrams {
            w.u64(*k);
            w.u32s(list);
        }
        let mut lengths: Vec<_> = fuzzy.1.iter().collect();
        lengths.sort_unstable_by_key(|(id, _)| **id);
        w.len(lengths.len());
        for (id, n) in lengths {
            w.u32(*id);
            w.u32(u32::from(*n));
        }
        let mut pinyin: Vec<_> = fuzzy.2.iter().collect();
        pinyin.sort_unstable_by(|a, b| a.0.cmp(b.0));
        w.len(pinyin.len());
        for (k, list) in pinyin {
            w.str(k);
            w.u32s(list);
        }
    });
    bulk(out, || std::iter::once(seg.match_text.bytes()));
    bulk(out, || {
        seg.terms.iter().map(|t| &seg.posting_bytes[t.start..t.end])
    });
    bulk(out, || grams.iter().map(|(_, _, bytes)| bytes));
    bulk(out, || {
        (0..seg.passages.len()).flat_map(|o| {
            let (title, body) = seg.title_body(o);
            [title.as_bytes(), body.as_bytes()]
        })
    });
    bulk(out, || {
        seg.terms.iter().map(|t| {
            let n = crate::skip::blocks(t.count) * crate::skip::ENTRY_BYTES;
            &seg.skips[t.skip_start..t.skip_start + n]
        })
    });
    bulk(out, || std::iter::once(grams.skip_bytes()));
}

/// The passages section.
struct PassagePart {
    passages: Vec<Passage>,
    ord_of: FxHashMap<PassageId, u32>,
    lengths: Vec<[u32; FIELDS]>,
    /// Byte length of each match text.
    text_lengths: Vec<usize>,
    /// Byte lengths of each passage's title and body.
    title_body_lengths: Vec<usize>,
    scripts: Vec<Script>,
}

fn decode_passages(mut r: Rd<'_>, n: usize) -> R<PassagePart> {
    let mut part = PassagePart {
        passages: Vec::with_capacity(n),
        ord_of: FxHashMap::default(),
        lengths: Vec::with_capacity(n),
        text_lengths: Vec::with_capacity(n),
        title_body_lengths: Vec::with_capacity(2 * n),
        scripts: Vec::with_capacity(n),
    };
    part.ord_of.reserve(n);
    for o in 0..n {
        let p = r.passage()?;
        if !p.title.is_empty() || !p.body.is_empty() {
            return Err(DecodeError::Corrupt("passage text in the record"));
        }
        for _ in 0..2 {
            let len = r.u64()?;
            part.title_body_lengths
                .push(usize::try_from(len).map_err(|_| DecodeError::Corrupt("text length"))?);
        }
        let mut len = [0u32; FIELDS];
        for l in &mut len {
            *l = r.u32()?;
        }
        if part.ord_of.insert(p.id, o as u32).is_some() {
            return Err(DecodeError::Corrupt("duplicate passage"));
        }
        part.passages.push(p);
        part.lengths.push(len);
        part.text_lengths.push(r.u64()? as usize);
        part.scripts.push(Script {
            han: r.u32()?,
            latin: r.u32()?,
        });
    }
    if !r.b.is_empty() {
        return Err(DecodeError::Corrupt("passages section"));
    }
    Ok(part)
}

/// The terms section: vocabulary, and terms with their postings' ranges in
/// the postings bytes (of `postings_len` bytes) and their skip entries' in
/// the skip bytes (of `skips_len`).
type TermPart = (Vocab, Vec<Term>);

fn decode_terms(
    mut r: Rd<'_>,
    terms: usize,
    n: usize,
    postings_len: usize,
    skips_len: usize,
) -> R<TermPart> {
    // About the bytes of the section that are the texts.
    let mut vocab = Vocab::with_capacity(terms, r.b.len().saturating_sub(terms * 37));
    let mut out = Vec::with_capacity(terms);
    let mut end = 0usize;
    let mut skip_end = 0usize;
    for id in 0..terms {
        let text = r.str_ref()?;
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
        // The postings stay where they are (the checksum vouched for
        // them); reading them stops at an ordinal past the segment, so
        // even crafted bytes cannot index out of bounds.
        let len = usize::try_from(r.u64()?).map_err(|_| DecodeError::Corrupt("postings"))?;
        let start = end;
        end = end
            .checked_add(len)
            .filter(|e| *e <= postings_len)
            .ok_or(DecodeError::Corrupt("postings past their section"))?;
        if vocab.get(text).is_some() {
            return Err(DecodeError::Corrupt("duplicate term"));
        }
        if vocab.push(text) != Some(id as u32) {
            return Err(DecodeError::Corrupt("vocabulary too large"));
        }
        let skip_start = skip_end;
        skip_end += crate::skip::blocks(count) * crate::skip::ENTRY_BYTES;
        out.push(Term {
            kind,
            start,
            end,
            count,
            df,
            word_df,
            skip_start,
        });
    }
    if !r.b.is_empty() || end != postings_len || skip_end != skips_len {
        return Err(DecodeError::Corrupt("terms section"));
    }
    Ok((vocab, out))
}

fn decode_tables(
    mut r: Rd<'_>,
    terms: usize,
    n: usize,
    lists: Blob,
    skips: Blob,
) -> R<(NgramIndex, FuzzyVocab)> {
    let r = &mut r;
    let check = |list: &[u32], bound: usize| list.iter().all(|x| (*x as usize) < bound);
    let keys_n = r.len(24)?;
    let (mut keys, mut counts, mut lengths) = (
        Vec::with_capacity(keys_n),
        Vec::with_capacity(keys_n),
        Vec::with_capacity(keys_n),
    );
    for _ in 0..keys_n {
        keys.push(r.u64()?);
        counts.push(u32::try_from(r.u64()?).map_err(|_| DecodeError::Corrupt("n-gram list"))?);
        lengths.push(usize::try_from(r.u64()?).map_err(|_| DecodeError::Corrupt("n-gram list"))?);
    }
    let grams = PostingLists::from_table(keys, counts, &lengths, lists, skips)
        .map_err(|_| DecodeError::Corrupt("n-gram list"))?;
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

/// The sections of one segment, split by their lengths (not yet parsed):
/// the three tables, and where the three bulk sections lie in the shared
/// bytes.
pub(crate) struct RawSegment<'a> {
    n: usize,
    terms: usize,
    sections: [&'a [u8]; 3],
    bulk: [(usize, usize); 6],
}

/// Splits a segment file's bytes (`all`); with `verify`, its checksum is
/// checked first (without, the caller has checked it).
pub(crate) fn split_segment_file(all: &[u8], verify: bool) -> R<RawSegment<'_>> {
    let Some(body_len) = all.len().checked_sub(4) else {
        return Err(DecodeError::Corrupt("truncated"));
    };
    let (body, crc) = all.split_at(body_len);
    let mut r = Rd { b: body };
    header(&mut r, SEGMENT_MAGIC)?;
    if verify && crc32fast::hash(body).to_le_bytes() != crc {
        return Err(DecodeError::Corrupt("checksum"));
    }
    let raw = split_segment(&mut r, all)?;
    if !r.b.is_empty() {
        return Err(DecodeError::Corrupt("trailing bytes"));
    }
    Ok(raw)
}

/// Splits the segment of `r`, whose bytes lie in `all` (the shared
/// bytes, for the bulk sections' offsets).
fn split_segment<'a>(r: &mut Rd<'a>, all: &[u8]) -> R<RawSegment<'a>> {
    let n = r.len(16)?;
    let terms = r.len(11)?;
    let mut sections: [&[u8]; 3] = [&[]; 3];
    for s in &mut sections {
        let len = r.len(1)?;
        *s = r.take(len)?;
    }
    let mut bulk = [(0usize, 0usize); 6];
    for b in &mut bulk {
        let len = r.len(1)?;
        let bytes = r.take(len)?;
        // Where the section lies: an address difference, as the reader's
        // bytes are a sub-slice of `all`.
        *b = (bytes.as_ptr() as usize - all.as_ptr() as usize, len);
    }
    Ok(RawSegment {
        n,
        terms,
        sections,
        bulk,
    })
}

/// Decodes the segments' sections on up to `threads` threads (each section
/// is independent of the others once split); each segment's bulk sections
/// are read in place from the shared bytes it was split from.
pub(crate) fn decode_segments(
    raw: Vec<(RawSegment<'_>, &SharedBytes)>,
    threads: usize,
) -> R<Vec<Segment>> {
    let blob = |shared: &SharedBytes, (start, len): (usize, usize)| {
        Blob::shared(shared, start, len).ok_or(DecodeError::Corrupt("section bounds"))
    };
    enum Part {
        Passages(PassagePart),
        Terms(TermPart),
        Tables((NgramIndex, FuzzyVocab)),
    }
    let jobs: Vec<(usize, usize)> = (0..raw.len())
        .flat_map(|s| (0..3).map(move |k| (s, k)))
        .collect();
    let run = |&(s, k): &(usize, usize)| -> R<Part> {
        let (seg, shared) = &raw[s];
        let r = Rd { b: seg.sections[k] };
        Ok(match k {
            0 => Part::Passages(decode_passages(r, seg.n)?),
            1 => Part::Terms(decode_terms(
                r,
                seg.terms,
                seg.n,
                seg.bulk[1].1,
                seg.bulk[4].1,
            )?),
            _ => Part::Tables(decode_tables(
                r,
                seg.terms,
                seg.n,
                blob(shared, seg.bulk[2])?,
                blob(shared, seg.bulk[5])?,
            )?),
        })
    };
    // Largest sections first, each to the thread with the least bytes.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    let size = |j: usize| raw[jobs[j].0].0.sections[jobs[j].1].len();
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
        let (vocab, terms) = t;
        let (ngrams, fuzzy) = g;
        let (seg, shared) = &raw[out.len()];
        let bulk = seg.bulk;
        let blob = |b| blob(shared, b);
        let match_text = Texts::from_lengths(&p.text_lengths, blob(bulk[0])?)
            .ok_or(DecodeError::Corrupt("match texts"))?;
        let texts = Texts::from_lengths(&p.title_body_lengths, blob(bulk[3])?)
            .ok_or(DecodeError::Corrupt("passage texts"))?;
        out.push(Segment {
            passages: p.passages,
            texts: Some(texts),
            ord_of: p.ord_of,
            vocab,
            terms,
            posting_bytes: blob(bulk[1])?,
            skips: blob(bulk[4])?,
            lengths: p.lengths.into(),
            match_text,
            scripts: p.scripts,
            ngrams,
            fuzzy,
            stored: std::sync::OnceLock::new(),
        });
    }
    Ok(out)
}
