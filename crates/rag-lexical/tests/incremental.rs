//! An index kept current with `apply` answers exactly as one built from
//! scratch at the same commit: random sequences of writes (passages added,
//! replaced, hidden and deleted; facts; synonyms; dictionary words), then
//! every path's ranking, scores (bit for bit), matched terms and notes are
//! compared, for an owner's view too. A second test counts the work of one
//! write.

use proptest::prelude::*;
use rag_core::{
    Bm25Params, ChunkId, DocId, FactId, FaqId, FieldMode, KbChanges, KbSnapshot, Passage,
    PassageId, RankedList, SynonymGroup, UserWord, Viewer,
};
use rag_lexical::{Filter, LexicalIndex, SegmentFile, SharedBytes};
use rag_text::Analyzer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

const WORDS: &[&str] = &[
    "refund",
    "password",
    "reset",
    "account",
    "order",
    "shipping",
    "delivery",
    "invoice",
    "payment",
    "card",
    "store",
    "opening",
    "hours",
    "receipt",
    "return",
    "exchange",
    "退款",
    "密码",
    "重置",
    "账户",
    "订单",
    "发货",
    "快递",
    "发票",
    "付款",
    "银行卡",
    "营业时间",
    "门店",
    "退货",
    "换货",
    "云闪付",
    "花呗",
    "的",
    "怎么",
    "申请",
];

const QUERIES: &[&str] = &[
    "refund order",
    "reset password",
    "how do I get a refnud",
    "pasword reset",
    "怎么申请退款",
    "退宽",
    "银行卡付款",
    "云闪付怎么用",
    "营业时间",
    "opening hours store",
    "invoice payment card",
    "花呗 退货",
];

fn analyzer() -> &'static Analyzer {
    static A: OnceLock<Analyzer> = OnceLock::new();
    A.get_or_init(Analyzer::new)
}

#[derive(Debug, Clone)]
enum Op {
    /// Add or replace text passage `slot` with words, owner and visibility.
    Put {
        slot: u8,
        words: Vec<u8>,
        owner: bool,
        searchable: bool,
    },
    Delete(u8),
    PutFact {
        slot: u8,
        key: u8,
        value: u8,
    },
    DeleteFact(u8),
    Synonyms(u8, u8),
    UserWord(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..24, prop::collection::vec(any::<u8>(), 1..12), prop::bool::weighted(0.2), prop::bool::weighted(0.9))
            .prop_map(|(slot, words, owner, searchable)| Op::Put { slot, words, owner, searchable }),
        2 => (0u8..24).prop_map(Op::Delete),
        1 => (0u8..4, any::<u8>(), any::<u8>()).prop_map(|(slot, key, value)| Op::PutFact { slot, key, value }),
        1 => (0u8..4).prop_map(Op::DeleteFact),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Synonyms(a, b)),
        1 => any::<u8>().prop_map(Op::UserWord),
    ]
}

fn word(i: u8) -> &'static str {
    WORDS[i as usize % WORDS.len()]
}

/// Stable ids per slot, so a Put on a used slot is a replace.
fn slot_id(slot: u8, fact: bool) -> PassageId {
    let n = u128::from(slot) + if fact { 1000 } else { 1 };
    let u = uuid::Uuid::from_u128(n);
    if fact {
        PassageId::Fact(FactId(u))
    } else if slot.is_multiple_of(2) {
        PassageId::Faq(FaqId(u))
    } else {
        PassageId::Chunk(ChunkId(u))
    }
}

fn passage(id: PassageId, title: String, body: String, owner: bool, searchable: bool) -> Passage {
    Passage {
        id,
        title,
        body,
        tags: vec![],
        aliases: vec![],
        doc: matches!(id, PassageId::Chunk(_)).then(|| DocId(uuid::Uuid::from_u128(7))),
        source: None,
        span: None,
        created_at: 0,
        valid_from: None,
        valid_until: None,
        searchable,
        owner: owner.then(|| "alice".to_owned()),
    }
}

/// The knowledge base as the store would hold it.
#[derive(Default, Clone)]
struct Model {
    passages: BTreeMap<PassageId, Passage>,
    synonyms: Vec<SynonymGroup>,
    user_words: Vec<UserWord>,
    seq: u64,
}

impl Model {
    fn snapshot(&self) -> KbSnapshot {
        KbSnapshot {
            seq: self.seq,
            passages: self.passages.values().cloned().collect(),
            synonyms: self.synonyms.clone(),
            user_words: self.user_words.clone(),
            ..Default::default()
        }
    }

    /// Applies one commit of ops; returns its changes.
    fn commit(&mut self, ops: &[Op]) -> KbChanges {
        let mut touched: Vec<PassageId> = Vec::new();
        let (mut syn, mut dict) = (false, false);
        for op in ops {
            match op {
                Op::Put {
                    slot,
                    words,
                    owner,
                    searchable,
                } => {
                    let id = slot_id(*slot, false);
                    let title = words
                        .iter()
                        .take(3)
                        .map(|w| word(*w))
                        .collect::<Vec<_>>()
                        .join(" ");
                    let body = words
                        .iter()
                        .map(|w| word(w.wrapping_mul(7)))
                        .collect::<Vec<_>>()
                        .join(" ");
                    self.passages
                        .insert(id, passage(id, title, body, *owner, *searchable));
                    touched.push(id);
                }
                Op::Delete(slot) => {
                    let id = slot_id(*slot, false);
                    self.passages.remove(&id);
                    touched.push(id);
                }
                Op::PutFact { slot, key, value } => {
                    let id = slot_id(*slot, true);
                    let mut p = passage(id, word(*key).into(), word(*value).into(), false, true);
                    p.aliases = vec![word(key.wrapping_add(1)).into()];
                    self.passages.insert(id, p);
                    touched.push(id);
                }
                Op::DeleteFact(slot) => {
                    let id = slot_id(*slot, true);
                    self.passages.remove(&id);
                    touched.push(id);
                }
                Op::Synonyms(a, b) => {
                    self.synonyms.push(SynonymGroup {
                        terms: vec![word(*a).into(), word(*b).into()],
                    });
                    syn = true;
                }
                Op::UserWord(w) => {
                    // Two dictionary words joined: a new word of the segmenter.
                    let text = format!("{}{}", word(*w), word(w.wrapping_add(3)));
                    if !self.user_words.iter().any(|u| u.word == text) {
                        self.user_words.push(UserWord {
                            word: text,
                            freq: Some(50_000),
                        });
                        dict = true;
                    }
                }
            }
        }
        self.seq += 1;
        touched.sort();
        touched.dedup();
        let (mut upserted, mut removed) = (Vec::new(), Vec::new());
        for id in touched {
            match self.passages.get(&id) {
                Some(p) => upserted.push(p.clone()),
                None => removed.push(id),
            }
        }
        KbChanges {
            seq: self.seq,
            upserted,
            removed,
            synonyms: syn.then(|| self.synonyms.clone()),
            user_words: dict.then(|| self.user_words.clone()),
            ..Default::default()
        }
    }
}

fn key(l: &RankedList) -> Vec<(PassageId, u64, Vec<String>)> {
    l.hits
        .iter()
        .map(|h| (h.id, h.score.to_bits(), h.matched.clone()))
        .collect()
}

fn same_answers(a: &LexicalIndex, b: &LexicalIndex) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.len(), b.len());
    prop_assert_eq!(a.language(), b.language());
    prop_assert_eq!(a.vocabulary_size(), b.vocabulary_size());
    let mut ids_a: Vec<PassageId> = a.passage_metas().map(|p| p.id).collect();
    let mut ids_b: Vec<PassageId> = b.passage_metas().map(|p| p.id).collect();
    ids_a.sort();
    ids_b.sort();
    prop_assert_eq!(&ids_a, &ids_b);
    // Whole passages, texts included (one side may read them in place).
    for id in &ids_a {
        prop_assert_eq!(a.passage(*id), b.passage(*id));
    }
    let multi = Bm25Params {
        fields: FieldMode::MultiField {
            title: 1.5,
            body: 1.0,
            tags: 0.5,
        },
        ..Bm25Params::default()
    };
    let filters = [
        Filter::everything(),
        Filter::new(&Default::default(), 0, &Viewer::Owner("bob".into())),
    ];
    for q in QUERIES {
        let (qa, qb) = (a.analyze_query(q), b.analyze_query(q));
        prop_assert_eq!(&qa.tokens, &qb.tokens);
        for f in &filters {
            for params in [Bm25Params::default(), multi] {
                let (la, lb) = (a.bm25(&qa, 10, &params, f), b.bm25(&qb, 10, &params, f));
                prop_assert_eq!(key(&la), key(&lb), "bm25 {}", q);
                prop_assert_eq!(&la.notes, &lb.notes, "bm25 notes {}", q);
                let (la, lb) = (
                    a.fuzzy(&qa, 10, 0.3, &params, f),
                    b.fuzzy(&qb, 10, 0.3, &params, f),
                );
                prop_assert_eq!(key(&la), key(&lb), "fuzzy {}", q);
                prop_assert_eq!(&la.notes, &lb.notes, "fuzzy notes {}", q);
                let (la, lb) = (
                    a.synonym(&qa, 10, &params, f),
                    b.synonym(&qb, 10, &params, f),
                );
                prop_assert_eq!(key(&la), key(&lb), "synonym {}", q);
                prop_assert_eq!(&la.notes, &lb.notes, "synonym notes {}", q);
            }
            let (la, lb) = (a.substring(&qa, 10, f), b.substring(&qb, 10, f));
            prop_assert_eq!(key(&la), key(&lb), "substring {}", q);
        }
        let (la, lb) = (a.facts(&qa, 10), b.facts(&qb, 10));
        prop_assert_eq!(key(&la), key(&lb), "facts {}", q);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn applied_writes_answer_as_a_fresh_build(
        initial in prop::collection::vec(op(), 0..30),
        commits in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..40),
    ) {
        let mut model = Model::default();
        model.commit(&initial);
        let mut index = LexicalIndex::build(analyzer(), &model.snapshot());
        for (i, ops) in commits.iter().enumerate() {
            let changes = model.commit(ops);
            index = index.apply(&changes).0;
            prop_assert_eq!(index.seq(), model.seq);
            if i % 4 == 3 || i + 1 == commits.len() {
                let fresh = LexicalIndex::build(analyzer(), &model.snapshot());
                same_answers(&index, &fresh)?;
            }
        }
        // Written and read back, it answers the same too.
        let (manifest, files) = store(&index);
        prop_assert_eq!(LexicalIndex::read_manifest(&manifest).map(|m| m.seq), Ok(model.seq));
        let read = load(&manifest, &files).unwrap();
        let fresh = LexicalIndex::build(analyzer(), &model.snapshot());
        same_answers(&read, &fresh)?;
        // A segment's bytes depend on its content only: read back, it
        // encodes to the bytes it was read from (so a lost file can be
        // written again under its name).
        for (i, file) in files.iter().enumerate() {
            prop_assert_eq!(&read.encode_segment(i), file);
        }
        // A later commit keeps the files of the segments it did not touch:
        // only the segment it wrote, or a merge's, needs one.
        let (later, report) = read.apply(&model.commit(&[Op::Delete(0), Op::Put { slot: 0, words: vec![1], owner: false, searchable: true }]));
        let unstored = (0..later.segment_count()).filter(|i| later.segment_file(*i).is_none()).count();
        prop_assert!(unstored == 1 || (report.merged > 0 && unstored >= 1), "{} segments to store, {:?}", unstored, report);
        let names = |ix: &LexicalIndex| (0..ix.segment_count()).map(|i| ix.segment_file(i).map(|f| f.name)).collect::<Vec<_>>();
        let before = names(&read);
        let (manifest, again) = store(&later);
        prop_assert_eq!(names(&later).iter().filter(|n| !before.contains(n)).count(), unstored);
        same_answers(&load(&manifest, &again).unwrap(), &LexicalIndex::build(analyzer(), &model.snapshot()))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A build in bounded segments, each written out and read back in
    /// place as soon as it is built, answers as a one-segment build, and
    /// so does it after later writes.
    #[test]
    fn a_build_in_segments_answers_as_one_segment(
        initial in prop::collection::vec(op(), 0..40),
        per_segment in 1usize..12,
        commits in prop::collection::vec(prop::collection::vec(op(), 1..4), 0..8),
    ) {
        let mut model = Model::default();
        model.commit(&initial);
        let mut snapshot = model.snapshot();
        let mut spilled = 0usize;
        let built = LexicalIndex::build_streamed(analyzer(), &mut snapshot, [], per_segment, |ix, i| {
            prop_assert_eq!(i + 1, ix.segment_count());
            // Written as it is encoded: the same bytes, length and checksum.
            let mut written = Vec::new();
            let (len, crc) = ix.write_segment(i, &mut written).unwrap();
            prop_assert_eq!(&written, &ix.encode_segment(i));
            prop_assert_eq!(SegmentFile::of(7, &written), Some(SegmentFile { name: 7, len, crc }));
            let (_, files) = store(ix);
            let file = ix.segment_file(i).unwrap();
            spilled += 1;
            let bytes: SharedBytes = Arc::new(files[i].clone());
            Ok(Some(LexicalIndex::read_segment(file, &bytes, true).unwrap()))
        })?;
        prop_assert!(snapshot.passages.is_empty(), "the passages are taken");
        let text = model.snapshot().passages.iter().filter(|p| !matches!(p.id, PassageId::Fact(_))).count();
        prop_assert!(built.segment_count() <= text.div_ceil(per_segment).max(1));
        if built.segment_count() > 1 {
            // Every segment is the one read back (it names its file).
            prop_assert_eq!(spilled, built.segment_count());
            prop_assert!((0..built.segment_count()).all(|i| built.segment_file(i).is_some()));
        } else {
            // A lone segment stays on the heap, as a one-segment build.
            prop_assert_eq!(spilled, 0);
        }
        same_answers(&built, &LexicalIndex::build(analyzer(), &model.snapshot()))?;
        let mut index = built;
        for ops in &commits {
            index = index.apply(&model.commit(ops)).0;
        }
        same_answers(&index, &LexicalIndex::build(analyzer(), &model.snapshot()))?;
        let (manifest, files) = store(&index);
        same_answers(&load(&manifest, &files).unwrap(), &index)?;
    }
}

/// `index` stored: its manifest, and its segments' files in the
/// manifest's order. A segment is written once, as the engine does: one
/// stored before keeps its file (kept in `DISK`).
fn store(index: &LexicalIndex) -> (Vec<u8>, Vec<Vec<u8>>) {
    static DISK: Mutex<BTreeMap<u128, Vec<u8>>> = Mutex::new(BTreeMap::new());
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut disk = DISK.lock().unwrap();
    let files: Vec<Vec<u8>> = (0..index.segment_count())
        .map(|i| match index.segment_file(i) {
            Some(file) => disk[&file.name].clone(),
            None => {
                let bytes = index.encode_segment(i);
                let name = u128::from(NEXT.fetch_add(1, Ordering::Relaxed))
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
                assert!(index.set_segment_file(i, SegmentFile::of(name, &bytes).unwrap()));
                disk.insert(name, bytes.clone());
                bytes
            }
        })
        .collect();
    (index.encode_manifest().unwrap(), files)
}

fn load(manifest: &[u8], files: &[Vec<u8>]) -> Result<LexicalIndex, rag_lexical::DecodeError> {
    let shared: Vec<SharedBytes> = files
        .iter()
        .map(|f| Arc::new(f.clone()) as SharedBytes)
        .collect();
    LexicalIndex::decode_stored(analyzer(), manifest, &shared, true)
}

/// `bytes` with their last four bytes made their CRC-32 again.
fn recheck(mut bytes: Vec<u8>) -> Vec<u8> {
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Every path answers (whatever it answers) without panicking.
fn answers_every_path(ix: &LexicalIndex) {
    for q in QUERIES {
        let q = ix.analyze_query(q);
        let f = Filter::everything();
        let params = Bm25Params::default();
        let _ = ix.bm25(&q, 10, &params, &f);
        let _ = ix.fuzzy(&q, 10, 0.3, &params, &f);
        let _ = ix.synonym(&q, 10, &params, &f);
        let _ = ix.substring(&q, 10, &f);
        let _ = ix.facts(&q, 10);
    }
}

#[test]
fn damaged_index_files_are_an_error_not_a_panic() {
    let mut model = Model::default();
    let ops: Vec<Op> = (0..10)
        .map(|slot| Op::Put {
            slot,
            words: vec![slot, slot.wrapping_add(20), 3],
            owner: slot % 3 == 0,
            searchable: true,
        })
        .chain([
            Op::PutFact {
                slot: 1,
                key: 16,
                value: 2,
            },
            Op::Synonyms(0, 16),
            Op::UserWord(16),
        ])
        .collect();
    model.commit(&ops);
    let index = LexicalIndex::build(analyzer(), &model.snapshot());
    let index = index
        .apply(&model.commit(&[
            Op::Delete(2),
            Op::Put {
                slot: 11,
                words: vec![4, 5],
                owner: false,
                searchable: true,
            },
        ]))
        .0;
    let (manifest, files) = store(&index);
    assert_eq!(files.len(), 2);
    assert!(load(&manifest, &files).is_ok());
    for cut in 0..manifest.len() {
        assert!(
            load(&manifest[..cut], &files).is_err(),
            "manifest prefix {cut}"
        );
    }
    for (s, file) in files.iter().enumerate() {
        for cut in 0..file.len() {
            let mut cut_files = files.clone();
            cut_files[s].truncate(cut);
            assert!(
                load(&manifest, &cut_files).is_err(),
                "segment {s} prefix {cut}"
            );
        }
    }
    // Segments missing, swapped or of another index.
    assert!(load(&manifest, &files[..1]).is_err());
    assert!(load(&manifest, &[files[1].clone(), files[0].clone()]).is_err());
    // Flipped bytes: whatever they decode to, decoding returns.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        ((state >> 33) as usize % n, (state >> 20) % 8)
    };
    for _ in 0..2000 {
        let (mut m, mut f) = (manifest.clone(), files.clone());
        let (which, _) = next(3);
        let target = if which == 0 {
            &mut m
        } else {
            &mut f[which - 1]
        };
        let (at, bit) = next(target.len());
        target[at] ^= 1 << bit;
        let _ = load(&m, &f);
    }
    // Crafted bytes: flips with the checksums made to match again (the
    // segment's, and the manifest's record of it), so the structure itself
    // is what stands between the bytes and a panic. Whatever decodes must
    // answer every path without panicking.
    let mut decoded = 0;
    for _ in 0..2000 {
        let (which, _) = next(3);
        let (m, f) = if which == 0 {
            let mut m = manifest.clone();
            let (at, bit) = next(m.len() - 16);
            m[12 + at] ^= 1 << bit;
            (recheck(m), files.clone())
        } else {
            let s = which - 1;
            let mut f = files.clone();
            let (at, bit) = next(f[s].len() - 16);
            f[s][12 + at] ^= 1 << bit;
            f[s] = recheck(std::mem::take(&mut f[s]));
            // The manifest names the segment by its old checksum: swap in the new one.
            let (old, new) = (&files[s][files[s].len() - 4..], &f[s][f[s].len() - 4..]);
            let mut m = manifest.clone();
            let name = index.segment_file(s).unwrap().name.to_le_bytes();
            let at = m.windows(16).position(|w| w == name).unwrap() + 16 + 8;
            assert_eq!(&m[at..at + 4], old);
            m[at..at + 4].copy_from_slice(new);
            (recheck(m), f)
        };
        if let Ok(ix) = load(&m, &f) {
            decoded += 1;
            answers_every_path(&ix);
        }
    }
    assert!(
        decoded > 0,
        "some crafted files decode (flips inside texts and postings)"
    );
    let mut other = manifest.clone();
    other[4] ^= 0xff;
    assert!(matches!(
        load(&other, &files),
        Err(rag_lexical::DecodeError::Version(_))
    ));
    let mut other = files.clone();
    other[0][4] ^= 0xff;
    assert!(load(&manifest, &other).is_err());
    // A manifest whose passage count is not the segment's (with its
    // checksum made to match) is refused.
    let name = index.segment_file(0).unwrap().name.to_le_bytes();
    let at = manifest.windows(16).position(|w| w == name).unwrap() + 16 + 8 + 4;
    for n in [0u64, 1 << 40, u64::MAX] {
        let mut m = manifest.clone();
        m[at..at + 8].copy_from_slice(&n.to_le_bytes());
        assert!(load(&recheck(m), &files).is_err(), "{n}");
    }
}

#[test]
fn one_write_analyses_only_what_it_wrote() {
    let mut model = Model::default();
    let initial: Vec<Op> = (0..24)
        .map(|slot| Op::Put {
            slot,
            words: vec![slot, slot.wrapping_add(5), slot.wrapping_mul(3)],
            owner: false,
            searchable: true,
        })
        .collect();
    model.commit(&initial);
    let index = LexicalIndex::build(analyzer(), &model.snapshot());
    // A replace: one passage analysed, its old version marked dead.
    let changes = model.commit(&[Op::Put {
        slot: 3,
        words: vec![1, 2, 3],
        owner: false,
        searchable: true,
    }]);
    let (next, report) = index.apply(&changes);
    assert_eq!((report.analysed, report.removed), (1, 1));
    assert_eq!(next.len(), index.len());
    // A delete analyses nothing.
    let changes = model.commit(&[Op::Delete(4)]);
    let (next, report) = next.apply(&changes);
    assert_eq!((report.analysed, report.removed), (0, 1));
    assert_eq!(next.len(), index.len() - 1);
    // A synonym group analyses no passage.
    let changes = model.commit(&[Op::Synonyms(0, 1)]);
    let (next, report) = next.apply(&changes);
    assert_eq!(report.analysed, 0);
    // A dictionary word re-reads only the passages containing it.
    let changes = model.commit(&[Op::UserWord(16)]);
    let new_word = &model.user_words[0].word;
    let containing = model
        .passages
        .values()
        .filter(|p| format!("{}\n{}", p.title, p.body).contains(new_word.as_str()))
        .count();
    let (next, report) = next.apply(&changes);
    assert_eq!(report.analysed, containing);
    assert!(containing < model.passages.len());
    let fresh = LexicalIndex::build(analyzer(), &model.snapshot());
    same_answers(&next, &fresh).unwrap();
}
