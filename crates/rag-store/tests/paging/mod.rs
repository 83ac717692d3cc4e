//! Keyset pagination of the documents listing, for any store: paging
//! through a knowledge base returns every document present from the first
//! page to the last exactly once, in (`created_at`, `id`) order, whatever is
//! inserted or deleted between pages; viewers see (and count) only what they
//! may; the source filter pages too. Shared by the embedded store's tests
//! and the PostgreSQL store's (which includes this file by path).
#![allow(dead_code)]

use rag_core::*;
use std::collections::{BTreeMap, BTreeSet};

/// A small deterministic generator (xorshift), so both stores see the same writes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Deterministic ids, in an order unrelated to creation times.
struct Ids(u128);

impl Ids {
    fn next(&mut self, rng: &mut Rng) -> DocId {
        self.0 += 1;
        let salt = u128::from(rng.below(1 << 16)) << 64;
        DocId(uuid::Uuid::from_u128(
            0x0190_0000_0000_7000_8000_0000_0000_0000 ^ salt ^ self.0,
        ))
    }
}

fn put(kb: KbId, id: DocId, created_at: i64, source: &str, owner: Option<&str>) -> WriteOp {
    let document = Document {
        id,
        kb,
        title: format!("doc {id}"),
        source: source.into(),
        content_hash: id.to_string(),
        tags: vec![],
        created_at,
        updated_at: created_at,
        text: "some text".into(),
        owner: owner.map(str::to_owned),
    };
    let chunks = (0..(created_at % 3) as u32)
        .map(|ordinal| Chunk {
            id: ChunkId(uuid::Uuid::from_u128(
                id.0.as_u128() ^ (1 << 100) ^ u128::from(ordinal),
            )),
            doc: id,
            ordinal,
            heading_path: vec![],
            text: "some text".into(),
            start: 0,
            end: 9,
        })
        .collect();
    WriteOp::PutDocument { document, chunks }
}

/// What the test knows is stored: id → (created_at, owner, source, chunks).
type Model = BTreeMap<DocId, (i64, Option<String>, String, usize)>;

fn key(model: &Model, id: &DocId) -> (i64, DocId) {
    (model[id].0, *id)
}

async fn page_all<S: Store>(
    store: &S,
    tenant: &TenantId,
    kb: KbId,
    viewer: &Viewer,
    source: Option<&str>,
    limit: usize,
) -> Vec<DocumentInfo> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let query = DocumentQuery {
            viewer: viewer.clone(),
            after,
            limit,
            source: source.map(str::to_owned),
        };
        let page = store.documents_page(tenant, kb, &query).await.unwrap();
        assert!(page.documents.len() <= limit);
        out.extend(page.documents);
        match page.next {
            None => return out,
            Some(c) => {
                assert_eq!(Some(c), out.last().map(DocCursor::of));
                after = Some(c);
            }
        }
    }
}

/// Runs the whole property; panics on the first difference.
pub async fn run<S: Store>(store: &S) {
    let tenant = TenantId::default_tenant();
    let kb = store
        .create_kb(&tenant, "paging", KbSettings::default())
        .await
        .unwrap()
        .id;
    let other_kb = store
        .create_kb(&tenant, "paging-other", KbSettings::default())
        .await
        .unwrap()
        .id;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ids = Ids(0);
    let mut model = Model::new();
    let owners = [None, None, Some("alice"), Some("bob")];
    // Many documents share a creation time: the id breaks the tie.
    let mut ops = Vec::new();
    for _ in 0..120 {
        let id = ids.next(&mut rng);
        let at = 1_000 + rng.below(40) as i64;
        let owner = owners[rng.below(4) as usize];
        let source = format!("s{}.md", rng.below(10));
        ops.push(put(kb, id, at, &source, owner));
        model.insert(
            id,
            (at, owner.map(str::to_owned), source, (at % 3) as usize),
        );
    }
    store.apply(&tenant, kb, ops).await.unwrap();
    // Another knowledge base's documents never show.
    let stranger = ids.next(&mut rng);
    store
        .apply(
            &tenant,
            other_kb,
            vec![put(other_kb, stranger, 1_010, "s1.md", None)],
        )
        .await
        .unwrap();

    // Every viewer, every source filter, several page sizes: exactly the
    // visible documents, in key order, with the right chunk counts and total.
    for viewer in [
        Viewer::Everything,
        Viewer::Public,
        Viewer::Owner("alice".into()),
        Viewer::Owner("nobody".into()),
    ] {
        let visible: Vec<DocId> = {
            let mut v: Vec<DocId> = model
                .iter()
                .filter(|(_, (_, o, _, _))| viewer.sees(o.as_deref()))
                .map(|(id, _)| *id)
                .collect();
            v.sort_by_key(|id| key(&model, id));
            v
        };
        for limit in [1, 7, 50, 500] {
            let got = page_all(store, &tenant, kb, &viewer, None, limit).await;
            let got_ids: Vec<DocId> = got.iter().map(|d| d.id).collect();
            assert_eq!(got_ids, visible, "{viewer:?}, limit {limit}");
            for d in &got {
                let (at, owner, source, chunks) = &model[&d.id];
                assert_eq!(
                    (d.created_at, &d.owner, &d.source, d.chunks),
                    (*at, owner, source, *chunks)
                );
            }
        }
        let first = store
            .documents_page(&tenant, kb, &DocumentQuery::first_page(viewer.clone(), 10))
            .await
            .unwrap();
        assert_eq!(first.total, visible.len(), "{viewer:?}");
        let source = "s3.md";
        let want: Vec<DocId> = visible
            .iter()
            .copied()
            .filter(|id| model[id].2 == source)
            .collect();
        let got: Vec<DocId> = page_all(store, &tenant, kb, &viewer, Some(source), 2)
            .await
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(got, want, "{viewer:?}, source {source}");
    }

    // Writes between pages: each document present from the first page to
    // the last is listed exactly once and in order; documents deleted before
    // their page came are not; documents added behind the cursor are not
    // (they were not there when that part was read) and those added ahead
    // of it are.
    let present_throughout: BTreeSet<DocId> = model.keys().copied().collect();
    let mut deleted = BTreeSet::new();
    let mut added = BTreeSet::new();
    let mut listed: Vec<DocumentInfo> = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .documents_page(
                &tenant,
                kb,
                &DocumentQuery {
                    viewer: Viewer::Everything,
                    after,
                    limit: 9,
                    source: None,
                },
            )
            .await
            .unwrap();
        listed.extend(page.documents);
        let Some(cursor) = page.next else { break };
        after = Some(cursor);
        // Delete two random documents (listed already or not) and add two,
        // one before the cursor and one after it.
        let mut ops = Vec::new();
        for _ in 0..2 {
            let alive: Vec<DocId> = model.keys().copied().collect();
            let victim = alive[rng.below(alive.len() as u64) as usize];
            model.remove(&victim);
            deleted.insert(victim);
            ops.push(WriteOp::DeleteDocument(victim));
        }
        for at in [
            cursor.created_at - 1 - rng.below(5) as i64,
            cursor.created_at + 1 + rng.below(60) as i64,
        ] {
            let id = ids.next(&mut rng);
            ops.push(put(kb, id, at, "new.md", None));
            model.insert(id, (at, None, "new.md".into(), (at % 3) as usize));
            added.insert((id, at > cursor.created_at));
        }
        store.apply(&tenant, kb, ops).await.unwrap();
    }
    let listed_ids: Vec<DocId> = listed.iter().map(|d| d.id).collect();
    let unique: BTreeSet<DocId> = listed_ids.iter().copied().collect();
    assert_eq!(
        unique.len(),
        listed_ids.len(),
        "a document was listed twice"
    );
    let keys: Vec<(i64, DocId)> = listed.iter().map(|d| (d.created_at, d.id)).collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "out of order: {keys:?}"
    );
    for id in present_throughout.difference(&deleted) {
        assert!(
            unique.contains(id),
            "{id} was present throughout but not listed"
        );
    }
    for (id, ahead) in &added {
        if *ahead && !deleted.contains(id) {
            assert!(
                unique.contains(id),
                "{id} was added ahead of the cursor but not listed"
            );
        }
        if !ahead {
            assert!(
                !unique.contains(id),
                "{id} was added behind the cursor but listed"
            );
        }
    }
    assert!(!unique.contains(&stranger));
    // The total follows the writes.
    let now = store
        .documents_page(
            &tenant,
            kb,
            &DocumentQuery::first_page(Viewer::Everything, 1),
        )
        .await
        .unwrap();
    assert_eq!(now.total, model.len());
    assert_eq!(
        now.total,
        store.kb_counts(&tenant, kb).await.unwrap().documents
    );
    // Past the end, and on an empty knowledge base: an empty last page.
    let last = listed.last().map(DocCursor::of).unwrap();
    let beyond = DocCursor {
        created_at: i64::MAX,
        id: last.id,
    };
    let page = store
        .documents_page(
            &tenant,
            kb,
            &DocumentQuery {
                viewer: Viewer::Everything,
                after: Some(beyond),
                limit: 5,
                source: None,
            },
        )
        .await
        .unwrap();
    assert!(page.documents.is_empty() && page.next.is_none());
    let empty = store
        .create_kb(&tenant, "paging-empty", KbSettings::default())
        .await
        .unwrap()
        .id;
    let page = store
        .documents_page(
            &tenant,
            empty,
            &DocumentQuery::first_page(Viewer::Everything, 5),
        )
        .await
        .unwrap();
    assert_eq!((page.documents.len(), page.next, page.total), (0, None, 0));
    // Another tenant cannot page this knowledge base.
    let err = store
        .documents_page(
            &TenantId("someone-else".into()),
            kb,
            &DocumentQuery::first_page(Viewer::Everything, 5),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "unknown_kb", "{err}");
}
