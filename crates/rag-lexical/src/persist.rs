//! The index as files, so that a process starting over a large knowledge
//! base reads its index instead of analysing every passage again.
//!
//! A stored index is one file per segment (`persist_segment.rs`) and a
//! manifest: the commit sequence, the user dictionary, the synonym groups,
//! the facts, and the segments in order, each as its file's name, length
//! and checksum with the ordinals of its dead passages. Segments never
//! change, so storing a later commit writes only the segments made since
//! (a write's small segment, a merge's result) and a new manifest, not the
//! whole index again.
//!
//! Pure encoding and decoding (no I/O: the engine names, writes and reads
//! the files). Every file carries a magic, this format's version, the
//! analyzer's version and a CRC-32 at its end; decoding refuses files of
//! another format or analyzer, a segment that is not the one the manifest
//! names, and any truncated or inconsistent input, with an error rather
//! than a panic: the files are outside input too.

use crate::blob::SharedBytes;
use crate::index::{Dead, LexicalIndex};
use crate::persist_segment::{decode_segments, segment_file, split_segment_file};
use crate::segment::Segment;
use crate::synonyms::SynonymTable;
use rag_core::{ChunkId, DocId, FactId, FaqId, Passage, PassageId, SynonymGroup, UserWord};
use rag_text::Analyzer;
use std::sync::Arc;

const MANIFEST_MAGIC: &[u8; 4] = b"RSLM";
/// Bumped whenever the layout of either file changes.
const FORMAT: u32 = 6;

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

pub(crate) type R<T> = Result<T, DecodeError>;

pub(crate) struct W<'a>(pub(crate) &'a mut Vec<u8>);

impl W<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    pub(crate) fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
    pub(crate) fn opt_i64(&mut self, v: Option<i64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v as u64);
            }
            None => self.u8(0),
        }
    }
    pub(crate) fn strs(&mut self, v: &[String]) {
        self.len(v.len());
        for s in v {
            self.str(s);
        }
    }
    pub(crate) fn var(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    /// A strictly increasing list, as gaps in variable-length bytes.
    pub(crate) fn u32s(&mut self, v: &[u32]) {
        self.len(v.len());
        let mut prev = 0u64;
        for (i, x) in v.iter().enumerate() {
            let x = u64::from(*x);
            self.var(if i == 0 { x } else { x - prev });
            prev = x;
        }
    }
    pub(crate) fn uuid(&mut self, u: &uuid::Uuid) {
        self.0.extend_from_slice(u.as_bytes());
    }
    pub(crate) fn passage(&mut self, p: &Passage) {
        self.passage_with(p, &p.title, &p.body);
    }
    /// A passage record with the given title and body in place of its own.
    pub(crate) fn passage_with(&mut self, p: &Passage, title: &str, body: &str) {
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
        self.str(title);
        self.str(body);
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

pub(crate) struct Rd<'a> {
    pub(crate) b: &'a [u8],
}

impl<'a> Rd<'a> {
    pub(crate) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if self.b.len() < n {
            return Err(DecodeError::Corrupt("truncated"));
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(crate) fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// A length, checked against the bytes left (each item takes at least `min` bytes).
    pub(crate) fn len(&mut self, min: usize) -> R<usize> {
        let n = self.u64()?;
        if n > (self.b.len() / min.max(1)) as u64 {
            return Err(DecodeError::Corrupt("length past the end"));
        }
        Ok(n as usize)
    }
    pub(crate) fn str(&mut self) -> R<String> {
        self.str_ref().map(str::to_owned)
    }
    /// A string, where it lies in the bytes.
    pub(crate) fn str_ref(&mut self) -> R<&'a str> {
        let n = self.len(1)?;
        std::str::from_utf8(self.take(n)?).map_err(|_| DecodeError::Corrupt("utf-8"))
    }
    pub(crate) fn flag(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Corrupt("flag")),
        }
    }
    pub(crate) fn opt_str(&mut self) -> R<Option<String>> {
        Ok(if self.flag()? {
            Some(self.str()?)
        } else {
            None
        })
    }
    pub(crate) fn opt_i64(&mut self) -> R<Option<i64>> {
        Ok(if self.flag()? {
            Some(self.u64()? as i64)
        } else {
            None
        })
    }
    pub(crate) fn strs(&mut self) -> R<Vec<String>> {
        let n = self.len(8)?;
        (0..n).map(|_| self.str()).collect()
    }
    pub(crate) fn var(&mut self) -> R<u64> {
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
    pub(crate) fn u32s(&mut self) -> R<Vec<u32>> {
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
    pub(crate) fn uuid(&mut self) -> R<uuid::Uuid> {
        Ok(uuid::Uuid::from_bytes(
            self.take(16)?.try_into().expect("16 bytes"),
        ))
    }
    pub(crate) fn passage(&mut self) -> R<Passage> {
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

/// The file of one stored segment: the name the engine gave it, and the
/// file's length and checksum (its last four bytes), by which the manifest
/// knows the file is the segment it lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentFile {
    pub name: u128,
    pub len: u64,
    pub crc: u32,
}

impl SegmentFile {
    /// The file of `bytes` (a segment file's) under `name`.
    pub fn of(name: u128, bytes: &[u8]) -> Option<Self> {
        let crc = bytes.len().checked_sub(4).map(|at| &bytes[at..])?;
        Some(SegmentFile {
            name,
            len: bytes.len() as u64,
            crc: u32::from_le_bytes(crc.try_into().ok()?),
        })
    }
}

/// A manifest, read before any segment is opened: its commit and the
/// files of its segments, in order (and, for
/// [`LexicalIndex::decode_manifest`], the rest of what it holds).
#[derive(Debug, Clone)]
pub struct Manifest {
    pub seq: u64,
    pub segments: Vec<SegmentFile>,
    user_words: Vec<UserWord>,
    synonyms: Vec<SynonymGroup>,
    facts: Vec<Passage>,
    /// Per segment: its passage count and dead ordinals (ascending; checked
    /// against the count, and made a bitmap, only once the segment is read,
    /// so a crafted count allocates nothing).
    dead: Vec<(u64, Vec<u32>)>,
}

/// A segment read from its file on its own, to take the place of the same
/// segment held in memory ([`LexicalIndex::with_read_segments`]).
#[derive(Debug, Clone)]
pub struct ReadSegment(pub(crate) Arc<Segment>);

pub(crate) fn write_header(w: &mut W<'_>, magic: &[u8; 4]) {
    w.0.extend_from_slice(magic);
    w.u32(FORMAT);
    w.u32(rag_text::ANALYZER_VERSION);
}

pub(crate) fn header(r: &mut Rd<'_>, magic: &[u8; 4]) -> R<()> {
    if r.take(4).ok() != Some(magic.as_slice()) {
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
    Ok(())
}

/// A manifest's body after its header and checksum were checked, and its
/// commit sequence.
fn manifest_body(bytes: &[u8]) -> R<(u64, Rd<'_>)> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err(DecodeError::Corrupt("truncated"));
    };
    let (body, crc) = bytes.split_at(body_len);
    let mut r = Rd { b: body };
    header(&mut r, MANIFEST_MAGIC)?;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(DecodeError::Corrupt("checksum"));
    }
    let seq = r.u64()?;
    Ok((seq, r))
}

impl LexicalIndex {
    /// The file bytes of segment `i` (of [`LexicalIndex::segment_count`]).
    pub fn encode_segment(&self, i: usize) -> Vec<u8> {
        segment_file(&self.segments[i])
    }

    /// Writes the file bytes of segment `i` to `out` as they are made, so
    /// that a large segment is never encoded whole in memory (the bulk
    /// bytes go straight from the segment's buffers), and returns the
    /// file's length and checksum: with the name the caller gives it, its
    /// [`SegmentFile`].
    pub fn write_segment(
        &self,
        i: usize,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<(u64, u32)> {
        let mut len = 0u64;
        let mut failed: Option<std::io::Error> = None;
        let crc =
            crate::persist_segment::write_segment_file(&self.segments[i], &mut |b: &[u8]| {
                if failed.is_none() {
                    len += b.len() as u64;
                    if let Err(e) = out.write_all(b) {
                        failed = Some(e);
                    }
                }
            });
        if let Some(e) = failed {
            return Err(e);
        }
        out.write_all(&crc.to_le_bytes())?;
        Ok((len + 4, crc))
    }

    /// The file segment `i` was written to or read from, if any.
    pub fn segment_file(&self, i: usize) -> Option<SegmentFile> {
        self.segments[i].stored.get().copied()
    }

    /// Records that segment `i` is stored in `file` (made from the bytes of
    /// [`LexicalIndex::encode_segment`]). A segment is stored once: `false`
    /// when it already names another file.
    pub fn set_segment_file(&self, i: usize, file: SegmentFile) -> bool {
        *self.segments[i].stored.get_or_init(|| file) == file
    }

    /// The manifest of this commit, once every segment names its file
    /// (`None` before).
    pub fn encode_manifest(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut w = W(&mut out);
        write_header(&mut w, MANIFEST_MAGIC);
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
            let file = seg.stored.get()?;
            w.0.extend_from_slice(&file.name.to_le_bytes());
            w.u64(file.len);
            w.u32(file.crc);
            w.u64(seg.len() as u64);
            w.u32s(&dead.iter().collect::<Vec<u32>>());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        Some(out)
    }

    /// A manifest's content, when it is a sound one of this format and
    /// analyzer.
    pub fn read_manifest(bytes: &[u8]) -> Result<Manifest, DecodeError> {
        let (seq, mut r) = manifest_body(bytes)?;
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
        let (mut segments, mut dead) = (Vec::new(), Vec::new());
        for _ in 0..r.len(36)? {
            let name = u128::from_le_bytes(
                r.take(16)?
                    .try_into()
                    .map_err(|_| DecodeError::Corrupt("segment name"))?,
            );
            let len = r.u64()?;
            let crc = r.u32()?;
            segments.push(SegmentFile { name, len, crc });
            dead.push((r.u64()?, r.u32s()?));
        }
        if !r.b.is_empty() {
            return Err(DecodeError::Corrupt("trailing bytes"));
        }
        Ok(Manifest {
            seq,
            segments,
            user_words,
            synonyms,
            facts,
            dead,
        })
    }

    /// [`LexicalIndex::decode_manifest`] of a manifest's bytes.
    pub fn decode_stored(
        analyzer: &Analyzer,
        manifest: &[u8],
        segments: &[SharedBytes],
        verify: bool,
    ) -> Result<LexicalIndex, DecodeError> {
        Self::decode_manifest(analyzer, Self::read_manifest(manifest)?, segments, verify)
    }

    /// An index from a manifest and its segments' files, in the manifest's
    /// order, shared by the caller (memory-mapped files), with `analyzer`
    /// (the base analyzer, without user words) as a fresh build would use:
    /// the tables are read into memory, and the bulk bytes (postings,
    /// n-gram lists, match texts, passage texts) are read in place, so only
    /// the pages queries touch become resident. With `verify` false the
    /// caller has checked the segment files' checksums already (reading
    /// them through a mapping would make every page resident).
    pub fn decode_manifest(
        analyzer: &Analyzer,
        manifest: Manifest,
        segments: &[SharedBytes],
        verify: bool,
    ) -> Result<LexicalIndex, DecodeError> {
        if manifest.segments.len() != segments.len() {
            return Err(DecodeError::Corrupt("segment count"));
        }
        let mut raw = Vec::with_capacity(segments.len());
        for (file, shared) in manifest.segments.iter().zip(segments) {
            let bytes = (**shared).as_ref();
            if SegmentFile::of(file.name, bytes) != Some(*file) {
                return Err(DecodeError::Corrupt("not the segment the manifest lists"));
            }
            raw.push((split_segment_file(bytes, verify)?, shared));
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        let decoded = decode_segments(raw, threads)?;
        let mut parts = Vec::with_capacity(decoded.len());
        for ((seg, file), (n, ords)) in decoded
            .into_iter()
            .zip(manifest.segments)
            .zip(manifest.dead)
        {
            if seg.len() as u64 != n || ords.last().is_some_and(|o| u64::from(*o) >= n) {
                return Err(DecodeError::Corrupt("segment size"));
            }
            let mut dead = Dead::default();
            for o in ords {
                dead.insert(o);
            }
            let _ = seg.stored.set(file);
            parts.push((seg, dead));
        }
        let Manifest {
            seq,
            user_words,
            synonyms,
            facts,
            ..
        } = manifest;
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
            parts,
            seq,
        ))
    }

    /// One segment read from its file (shared by the caller), to replace
    /// the same segment held in memory.
    pub fn read_segment(
        file: SegmentFile,
        bytes: &SharedBytes,
        verify: bool,
    ) -> Result<ReadSegment, DecodeError> {
        if SegmentFile::of(file.name, (**bytes).as_ref()) != Some(file) {
            return Err(DecodeError::Corrupt("not the segment named"));
        }
        let raw = split_segment_file((**bytes).as_ref(), verify)?;
        let seg = decode_segments(vec![(raw, bytes)], 1)?
            .pop()
            .ok_or(DecodeError::Corrupt("segment"))?;
        let _ = seg.stored.set(file);
        Ok(ReadSegment(Arc::new(seg)))
    }
}
