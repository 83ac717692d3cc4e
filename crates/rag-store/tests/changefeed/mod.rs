//! The change-feed property, for any store: random sequences of writes, and
//! for every earlier commit `s`, the snapshot at `s` with
//! `changes_since(s)` applied equals the snapshot now. Shared by the
//! embedded store's tests and the PostgreSQL store's (which includes this
//! file by path).
#![allow(dead_code)]

use proptest::prelude::*;
use rag_core::*;
use std::collections::BTreeMap;

/// How many documents, FAQ entries and facts the operations choose from, so
/// that puts replace and deletes hit.
const DOCS: u8 = 4;
const FAQS: u8 = 4;
const FACTS: u8 = 3;

/// One abstract write operation; [`Ids`] turns it into a [`WriteOp`].
#[derive(Debug, Clone)]
pub enum Op {
    /// Put (insert or replace) document `doc` with `chunks` chunks.
    PutDoc {
        doc: u8,
        chunks: u8,
        variant: u8,
        owner: bool,
    },
    DeleteDoc(u8),
    /// Put FAQ entry `faq`; `draft_of` links a new entry to a document (one
    /// of those present, picked by this index).
    PutFaq {
        faq: u8,
        variant: u8,
        status: u8,
        edited: bool,
        draft_of: Option<u8>,
    },
    DeleteFaq(u8),
    DeleteDrafts(u8),
    Relink(u8, u8),
    PutFact {
        fact: u8,
        variant: u8,
    },
    DeleteFact(u8),
    Synonyms(u8),
    UserWord(u8),
    /// Vectors for passages picked by index from the current snapshot (and
    /// one for a passage that does not exist when `ghost`), in space `space`.
    Vectors {
        picks: Vec<u8>,
        space: u8,
        ghost: bool,
    },
    ClearVectors,
    Settings,
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..DOCS, 0u8..4, any::<u8>(), any::<bool>()).prop_map(|(doc, chunks, variant, owner)| Op::PutDoc { doc, chunks, variant, owner }),
        2 => (0..DOCS).prop_map(Op::DeleteDoc),
        4 => (0..FAQS, any::<u8>(), 0u8..3, any::<bool>(), proptest::option::of(0..DOCS))
            .prop_map(|(faq, variant, status, edited, draft_of)| Op::PutFaq { faq, variant, status, edited, draft_of }),
        2 => (0..FAQS).prop_map(Op::DeleteFaq),
        1 => (0..DOCS).prop_map(Op::DeleteDrafts),
        1 => (0..DOCS, 0..DOCS).prop_map(|(a, b)| Op::Relink(a, b)),
        2 => (0..FACTS, any::<u8>()).prop_map(|(fact, variant)| Op::PutFact { fact, variant }),
        1 => (0..FACTS).prop_map(Op::DeleteFact),
        1 => any::<u8>().prop_map(Op::Synonyms),
        1 => any::<u8>().prop_map(Op::UserWord),
        3 => (proptest::collection::vec(any::<u8>(), 0..4), 0u8..4, any::<bool>())
            .prop_map(|(picks, space, ghost)| Op::Vectors { picks, space: u8::from(space == 3), ghost }),
        1 => Just(Op::ClearVectors),
        1 => Just(Op::Settings),
    ]
}

/// A sequence of commits, each of one to three operations.
pub fn commits(max: usize) -> impl Strategy<Value = Vec<Vec<Op>>> {
    proptest::collection::vec(proptest::collection::vec(op(), 1..4), 1..max)
}

/// The ids of the pools, fixed per knowledge base.
pub struct Ids {
    pub kb: KbId,
    docs: Vec<DocId>,
    faqs: Vec<FaqId>,
    facts: Vec<FactId>,
}

const TITLES: [&str; 4] = ["Alpha guide", "退款政策", "Standing desk", "营业时间"];
const WORDS: [&str; 6] = ["refund", "退款", "desk", "height", "配送", "battery"];

fn word(v: u8) -> &'static str {
    WORDS[v as usize % WORDS.len()]
}

fn space(s: u8) -> EmbeddingSpace {
    EmbeddingSpace {
        model_id: format!("model-{s}"),
        dims: 2 + s as usize,
    }
}

impl Ids {
    pub fn new(kb: KbId) -> Self {
        Ids {
            kb,
            docs: (0..DOCS).map(|_| DocId::generate()).collect(),
            faqs: (0..FAQS).map(|_| FaqId::generate()).collect(),
            facts: (0..FACTS).map(|_| FactId::generate()).collect(),
        }
    }

    /// The write operation for `op`, given the snapshot before the write.
    pub fn write_op(&self, op: &Op, now: &KbSnapshot, clock: i64) -> WriteOp {
        let kb = self.kb;
        match *op {
            Op::PutDoc {
                doc,
                chunks,
                variant,
                owner,
            } => {
                let id = self.docs[doc as usize];
                let parts: Vec<String> = (0..chunks)
                    .map(|i| format!("{} {} part {i}.", word(variant), word(variant / 7 + i)))
                    .collect();
                let text = parts.join("\n");
                let mut start = 0;
                let chunks = parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let c = Chunk {
                            id: ChunkId::generate(),
                            doc: id,
                            ordinal: i as u32,
                            heading_path: if i % 2 == 1 {
                                vec![format!("Section {i}")]
                            } else {
                                vec![]
                            },
                            text: p.clone(),
                            start,
                            end: start + p.len(),
                        };
                        start += p.len() + 1;
                        c
                    })
                    .collect();
                WriteOp::PutDocument {
                    document: Document {
                        id,
                        kb,
                        title: TITLES[variant as usize % TITLES.len()].into(),
                        source: format!("docs/{doc}.md"),
                        content_hash: format!("hash-{doc}-{variant}"),
                        tags: if variant % 3 == 0 {
                            vec!["tagged".into()]
                        } else {
                            vec![]
                        },
                        created_at: clock,
                        updated_at: clock,
                        text,
                        owner: owner.then(|| "alice".into()),
                    },
                    chunks,
                }
            }
            Op::DeleteDoc(d) => WriteOp::DeleteDocument(self.docs[d as usize]),
            Op::PutFaq {
                faq,
                variant,
                status,
                edited,
                draft_of,
            } => WriteOp::PutFaq(FaqEntry {
                id: self.faqs[faq as usize],
                kb,
                question: format!("How about {}?", word(variant)),
                answer: format!("{} answer {variant}", word(variant / 3)),
                status: [FaqStatus::Approved, FaqStatus::Pending, FaqStatus::Disabled]
                    [status as usize],
                edited,
                source_url: (variant % 2 == 0).then(|| "https://example.com/faq".into()),
                tags: if variant % 4 == 0 {
                    vec!["faq".into()]
                } else {
                    vec![]
                },
                created_at: 100 + faq as i64,
                updated_at: clock,
                valid_from: (variant % 5 == 0).then_some(10),
                valid_until: (variant % 7 == 0).then_some(1_000_000),
                // Drafts of documents that exist (else the write is refused),
                // unless there is none.
                source_doc: draft_of.map(|d| {
                    let mut present: Vec<DocId> =
                        now.passages.iter().filter_map(|p| p.doc).collect();
                    present.dedup();
                    match present.len() {
                        0 => self.docs[d as usize],
                        n => present[d as usize % n],
                    }
                }),
            }),
            Op::DeleteFaq(f) => WriteOp::DeleteFaq(self.faqs[f as usize]),
            Op::DeleteDrafts(d) => WriteOp::DeleteUneditedDrafts(self.docs[d as usize]),
            Op::Relink(a, b) => WriteOp::RelinkDrafts {
                from: self.docs[a as usize],
                to: self.docs[b as usize],
            },
            Op::PutFact { fact, variant } => WriteOp::PutFact(Fact {
                id: self.facts[fact as usize],
                kb,
                key: format!("{} key", word(variant)),
                value: format!("value {variant}"),
                key_synonyms: if variant % 2 == 0 {
                    vec![word(variant / 2).into()]
                } else {
                    vec![]
                },
            }),
            Op::DeleteFact(f) => WriteOp::DeleteFact(self.facts[f as usize]),
            Op::Synonyms(v) => WriteOp::AddSynonyms(SynonymGroup {
                terms: vec![word(v).into(), word(v / 6 + 1).into()],
            }),
            Op::UserWord(v) => WriteOp::AddUserWord(UserWord {
                word: word(v).into(),
                freq: (v % 2 == 0).then_some(v as u32),
            }),
            Op::Vectors {
                ref picks,
                space: s,
                ghost,
            } => {
                let space = space(s);
                let mut ids: Vec<PassageId> = picks
                    .iter()
                    .filter(|_| !now.passages.is_empty())
                    .map(|&p| now.passages[p as usize % now.passages.len()].id)
                    .collect();
                if ghost {
                    ids.push(PassageId::Faq(FaqId::generate()));
                }
                let vectors = ids
                    .into_iter()
                    .map(|id| PassageVector {
                        id,
                        text_hash: format!("h{clock}"),
                        vector: (0..space.dims).map(|i| (clock as f32) + i as f32).collect(),
                    })
                    .collect();
                WriteOp::PutVectors { space, vectors }
            }
            Op::ClearVectors => WriteOp::ClearVectors,
            Op::Settings => WriteOp::PutSettings(KbSettings::default()),
        }
    }
}

/// `old` with `changes` applied, as an index would apply them.
pub fn apply(old: &KbSnapshot, changes: &KbChanges) -> KbSnapshot {
    let mut passages: BTreeMap<PassageId, Passage> =
        old.passages.iter().map(|p| (p.id, p.clone())).collect();
    let mut vectors: BTreeMap<PassageId, PassageVector> =
        old.vectors.iter().map(|v| (v.id, v.clone())).collect();
    for id in &changes.removed {
        passages.remove(id);
        vectors.remove(id);
    }
    for p in &changes.upserted {
        vectors.remove(&p.id);
        passages.insert(p.id, p.clone());
    }
    if changes.vectors_reset {
        vectors.clear();
    }
    for v in &changes.vectors {
        vectors.insert(v.id, v.clone());
    }
    KbSnapshot {
        seq: changes.seq,
        passages: passages.into_values().collect(),
        synonyms: changes
            .synonyms
            .clone()
            .unwrap_or_else(|| old.synonyms.clone()),
        user_words: changes
            .user_words
            .clone()
            .unwrap_or_else(|| old.user_words.clone()),
        space: changes.space.clone(),
        vectors: vectors.into_values().collect(),
    }
}

/// What the comparison looks at: passages as a set sorted by id, synonyms,
/// user words, the space and (when `vectors`) the vectors sorted by id.
pub fn comparable(s: &KbSnapshot, vectors: bool) -> String {
    let mut passages = s.passages.clone();
    passages.sort_by_key(|p| p.id);
    let mut vs: Vec<&PassageVector> = if vectors {
        s.vectors.iter().collect()
    } else {
        Vec::new()
    };
    vs.sort_by_key(|v| v.id);
    format!(
        "seq {}\npassages {passages:#?}\nsynonyms {:?}\nuser words {:?}\nspace {:?}\nvectors {vs:?}",
        s.seq, s.synonyms, s.user_words, s.space
    )
}

/// Checks the contract's shape: sorted, no id both upserted and removed,
/// revectored only for passages not upserted, and (unless `vectors`) no
/// vectors at all.
fn check_shape(c: &KbChanges, vectors: bool) -> Result<(), String> {
    let ids: Vec<PassageId> = c.upserted.iter().map(|p| p.id).collect();
    if !ids.windows(2).all(|w| w[0] < w[1]) {
        return Err(format!("upserted not sorted: {ids:?}"));
    }
    if !c.removed.windows(2).all(|w| w[0] < w[1]) {
        return Err(format!("removed not sorted: {:?}", c.removed));
    }
    if let Some(id) = c.removed.iter().find(|r| ids.contains(r)) {
        return Err(format!("{id} both upserted and removed"));
    }
    if let Some(id) = c.revectored.iter().find(|r| ids.contains(r)) {
        return Err(format!("{id} both upserted and revectored"));
    }
    if !vectors && !c.vectors.is_empty() {
        return Err("vectors from a store that searches them itself".into());
    }
    Ok(())
}

/// Runs `commits` against knowledge base `ids.kb` of `tenant` in `store`
/// and checks the property for every commit reached; `vectors`: whether the
/// store returns vectors in its changes (not a store that searches them).
pub async fn check<S: StoreRead + StoreWrite + ?Sized>(
    store: &S,
    tenant: &TenantId,
    ids: &Ids,
    commits: &[Vec<Op>],
    vectors: bool,
) -> Result<(), String> {
    let kb = ids.kb;
    let mut snaps = vec![store
        .snapshot(tenant, kb)
        .await
        .map_err(|e| e.to_string())?];
    for (i, ops) in commits.iter().enumerate() {
        let now = snaps.last().unwrap().clone();
        let clock = 1_000 + i as i64;
        let writes = ops.iter().map(|op| ids.write_op(op, &now, clock)).collect();
        match store.apply(tenant, kb, writes).await {
            Ok(seq) => {
                let snap = store
                    .snapshot(tenant, kb)
                    .await
                    .map_err(|e| e.to_string())?;
                if snap.seq != seq || seq != now.seq + 1 {
                    return Err(format!(
                        "seq {seq} after {}, snapshot at {}",
                        now.seq, snap.seq
                    ));
                }
                snaps.push(snap);
            }
            Err(_) => {
                // Refused writes (a draft of a missing document, another
                // embedding space) change nothing, not even the seq.
                let seq = store.kb_seq(tenant, kb).await.map_err(|e| e.to_string())?;
                if seq != now.seq {
                    return Err(format!("a failed write moved the seq to {seq}"));
                }
            }
        }
    }
    let last = snaps.last().unwrap();
    let want = comparable(last, vectors);
    for old in &snaps {
        let changes = store
            .changes_since(tenant, kb, old.seq)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no changes since {} (now {})", old.seq, last.seq))?;
        check_shape(&changes, vectors)?;
        if changes.seq != last.seq {
            return Err(format!("changes lead to {}, now {}", changes.seq, last.seq));
        }
        if old.seq == last.seq
            && changes
                != (KbChanges {
                    seq: last.seq,
                    space: last.space.clone(),
                    ..Default::default()
                })
        {
            return Err(format!("changes since now are not empty: {changes:?}"));
        }
        let got = comparable(&apply(old, &changes), vectors);
        if got != want {
            return Err(format!(
                "since {} (now {}): applied changes {changes:#?}\ngive\n{got}\nwant\n{want}",
                old.seq, last.seq
            ));
        }
    }
    // A commit the knowledge base has not reached: cannot tell.
    let ahead = store
        .changes_since(tenant, kb, last.seq + 1)
        .await
        .map_err(|e| e.to_string())?;
    if ahead.is_some() {
        return Err("changes since a future commit".into());
    }
    Ok(())
}

/// A one-chunk document of `kb`.
pub fn small_document(kb: KbId, i: usize) -> WriteOp {
    let document = Document {
        id: DocId::generate(),
        kb,
        title: format!("Document {i}"),
        source: format!("docs/{i}.md"),
        content_hash: format!("hash-{i}"),
        tags: vec![],
        created_at: i as i64,
        updated_at: i as i64,
        text: format!("text of document {i}"),
        owner: None,
    };
    let chunk = Chunk {
        id: ChunkId::generate(),
        doc: document.id,
        ordinal: 0,
        heading_path: vec![],
        text: document.text.clone(),
        start: 0,
        end: document.text.len(),
    };
    WriteOp::PutDocument {
        document,
        chunks: vec![chunk],
    }
}

/// An approved FAQ entry of `kb`.
pub fn small_faq(kb: KbId, q: &str) -> FaqEntry {
    FaqEntry {
        id: FaqId::generate(),
        kb,
        question: q.into(),
        answer: "answer".into(),
        status: FaqStatus::Approved,
        edited: false,
        source_url: None,
        tags: vec![],
        created_at: 1,
        updated_at: 1,
        valid_from: None,
        valid_until: None,
        source_doc: None,
    }
}

/// In a knowledge base of 1,000 documents, one FAQ write: the changes since
/// the commit before are exactly that passage.
pub async fn one_faq_in_a_thousand_documents<S: StoreRead + StoreWrite + ?Sized>(
    store: &S,
    tenant: &TenantId,
    kb: KbId,
) {
    let docs = (0..1000).map(|i| small_document(kb, i)).collect();
    let before = store.apply(tenant, kb, docs).await.unwrap();
    let mut faq = small_faq(kb, "where is my refund?");
    store
        .apply(tenant, kb, vec![WriteOp::PutFaq(faq.clone())])
        .await
        .unwrap();
    let changes = store
        .changes_since(tenant, kb, before)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changes.seq, before + 1);
    assert_eq!(changes.upserted, vec![Passage::from(faq.clone())]);
    assert!(changes.removed.is_empty() && changes.vectors.is_empty());
    assert!(changes.synonyms.is_none() && changes.user_words.is_none());
    // An edit that hides it: still the one passage, now unsearchable.
    faq.status = FaqStatus::Disabled;
    let edit = store
        .apply(tenant, kb, vec![WriteOp::PutFaq(faq.clone())])
        .await
        .unwrap();
    let changes = store
        .changes_since(tenant, kb, edit - 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changes.upserted.len(), 1);
    assert!(!changes.upserted[0].searchable);
    // Its deletion: one removal.
    store
        .apply(tenant, kb, vec![WriteOp::DeleteFaq(faq.id)])
        .await
        .unwrap();
    let changes = store
        .changes_since(tenant, kb, edit)
        .await
        .unwrap()
        .unwrap();
    assert!(changes.upserted.is_empty());
    assert_eq!(changes.removed, vec![PassageId::Faq(faq.id)]);
}

/// Scenarios the property must cover whatever the random cases hit:
/// unedited drafts deleted with their document or by themselves, a
/// replaced document's old chunks, vectors of a fixed and then cleared
/// space.
pub fn scenarios() -> Vec<Vec<Vec<Op>>> {
    let doc = |doc, chunks| Op::PutDoc {
        doc,
        chunks,
        variant: 1,
        owner: false,
    };
    let draft = |faq, edited| Op::PutFaq {
        faq,
        variant: 2,
        status: 0,
        edited,
        draft_of: Some(0),
    };
    let vectors = |space| Op::Vectors {
        picks: vec![0, 1, 2],
        space,
        ghost: true,
    };
    vec![
        vec![
            vec![doc(0, 2), draft(0, false), draft(1, true)],
            vec![Op::DeleteDoc(0)],
        ],
        vec![
            vec![doc(0, 1), draft(0, false), draft(1, true)],
            vec![Op::DeleteDrafts(0)],
            vec![doc(0, 3)],
        ],
        vec![
            vec![doc(0, 2), doc(1, 1)],
            vec![vectors(0)],
            vec![doc(0, 1)],
            vec![vectors(0)],
            vec![Op::ClearVectors],
            vec![vectors(1)],
            vec![Op::Synonyms(1), Op::UserWord(2)],
        ],
    ]
}
