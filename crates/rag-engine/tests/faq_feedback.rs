//! The dense path's feedback for FAQ matching: when a question is matched
//! against FAQ entries, it is embedded as a query and as a passage, the two
//! averaged, moved towards its two nearest entries (weight 0.5) and searched
//! again. Checked against the same arithmetic done here over the stored
//! vectors; neighbours come from the entries the caller may see only;
//! why-not scores the dense path with the same vector; a knowledge base of
//! documents is searched with the query vector alone.

use async_trait::async_trait;
use rag_core::{
    CoreError, Embedder, Filters, KbSettings, PassageId, PathKind, QueryRequest, RankedList,
    RetrievalParams, TenantId, Viewer,
};
use rag_engine::{Components, Engine, EngineConfig, QueryOptions};
use std::sync::Arc;

/// Characters hashed into 16 dimensions; passages get a marker dimension,
/// so the two forms of one text differ as e5's `query: ` and `passage: ` do.
struct TwoForms;

const DIMS: usize = 16;

fn bag(text: &str, passage: bool) -> Vec<f32> {
    let mut v = vec![0f32; DIMS];
    for c in text.chars() {
        v[c as usize % (DIMS - 1)] += 1.0;
    }
    if passage {
        v[DIMS - 1] = 2.0;
    }
    unit(v)
}

#[async_trait]
impl Embedder for TwoForms {
    fn model_id(&self) -> &str {
        "test/two-forms-16"
    }
    fn dimensions(&self) -> usize {
        DIMS
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(bag(text, false))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(texts.iter().map(|t| bag(t, true)).collect())
    }
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

async fn engine(files: &[(&str, String)]) -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store));
    components.embedder = Some(Arc::new(TwoForms));
    let engine = Engine::new(components, EngineConfig::default());
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    for (name, body) in files {
        engine
            .ingest(&tenant, "kb", name, body.clone().into_bytes())
            .await
            .unwrap();
    }
    (dir, engine, tenant)
}

async fn dense_list(engine: &Engine, tenant: &TenantId, q: &str, filters: Filters) -> RankedList {
    let request = QueryRequest {
        kb: "kb".into(),
        query: q.into(),
        params: Some(RetrievalParams {
            paths: vec![PathKind::Dense],
            ..RetrievalParams::default()
        }),
        overrides: Default::default(),
        filters,
        generate: false,
        conversation_id: None,
    };
    let options = QueryOptions {
        views: false,
        log: false,
        viewer: Viewer::Everything,
    };
    let out = engine
        .run(tenant, request, options, &mut |_| {})
        .await
        .unwrap();
    out.lists
        .into_iter()
        .find(|l| l.path == PathKind::Dense)
        .expect("a dense list")
}

/// Every live passage and its stored vector.
async fn stored(engine: &Engine, tenant: &TenantId) -> Vec<(PassageId, Vec<f32>)> {
    let kb = engine.kb(tenant, "kb").await.unwrap();
    let index = engine.index(tenant, &kb).await.unwrap();
    let dense = index.dense.as_ref().unwrap().as_ref().unwrap();
    index
        .lexical
        .passage_metas()
        .map(|p| (p.id, dense.vector_of(p.id).expect("a vector").to_vec()))
        .collect()
}

/// Passages by cosine with `v`, best first (ties by id, as the engine breaks them).
fn ranked(v: &[f32], among: &[(PassageId, Vec<f32>)]) -> Vec<(PassageId, f32)> {
    let mut out: Vec<(PassageId, f32)> = among.iter().map(|(id, x)| (*id, dot(v, x))).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The vector the engine should search with after feedback.
fn expected_vector(
    question: &str,
    visible: &[(PassageId, Vec<f32>)],
) -> (Vec<f32>, Vec<PassageId>) {
    let q = bag(question, false);
    let p = bag(question, true);
    let mixed = unit(q.iter().zip(&p).map(|(a, b)| a + b).collect());
    let nearest: Vec<PassageId> = ranked(&mixed, visible)
        .iter()
        .take(2)
        .map(|h| h.0)
        .collect();
    let mut moved = mixed.clone();
    for id in &nearest {
        let n = &visible.iter().find(|(i, _)| i == id).unwrap().1;
        for (m, x) in moved.iter_mut().zip(unit(n.clone())) {
            *m += 0.5 / 2.0 * x;
        }
    }
    (unit(moved), nearest)
}

fn assert_same(list: &RankedList, want: &[(PassageId, f32)]) {
    assert_eq!(list.hits.len(), want.len(), "{list:?}");
    for (h, (id, score)) in list.hits.iter().zip(want) {
        assert_eq!(h.id, *id, "{list:?}");
        assert!(
            (h.score - *score as f64).abs() < 1e-5,
            "{h:?} against {score}"
        );
    }
}

fn faq_file() -> String {
    let questions = [
        ("how do I get a refund", "a"),
        ("refund for a cancelled order", "a"),
        ("when will my refund arrive", "a"),
        ("opening hours of the shop", "a"),
        ("delivery fee for small orders", "a"),
        ("can I pay by card", "a"),
        ("refund refund refund status", "b"),
        ("how do I reset my password", "a"),
        ("where is my parcel", "a"),
        ("do you deliver on sunday", "a"),
        ("is there a student discount", "a"),
        ("how to change my address", "a"),
    ];
    questions
        .iter()
        .map(|(q, tag)| {
            format!(r#"{{"question": "{q}", "answer": "Answer about {q}.", "tags": ["{tag}"]}}"#)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn faq_matching_searches_with_both_forms_moved_towards_the_nearest_entries() {
    let (_dir, engine, tenant) = engine(&[("faq.jsonl", faq_file())]).await;
    let all = stored(&engine, &tenant).await;
    assert_eq!(all.len(), 12);
    let question = "refund status";
    let list = dense_list(&engine, &tenant, question, Filters::default()).await;
    assert!(
        list.notes
            .iter()
            .any(|n| n.contains("are FAQ entries") && n.contains("searched again")),
        "{:?}",
        list.notes
    );
    let (v, _) = expected_vector(question, &all);
    assert_same(&list, &ranked(&v, &all));
    // The plain query vector would have ranked otherwise.
    let plain = ranked(&bag(question, false), &all);
    assert!(list
        .hits
        .iter()
        .zip(&plain)
        .any(|(h, p)| (h.score - p.1 as f64).abs() > 1e-4));
}

#[tokio::test]
async fn an_entry_the_filter_hides_never_steers_the_question() {
    let (_dir, engine, tenant) = engine(&[("faq.jsonl", faq_file())]).await;
    let all = stored(&engine, &tenant).await;
    let kb = engine.kb(&tenant, "kb").await.unwrap();
    let index = engine.index(&tenant, &kb).await.unwrap();
    let tagged_a: Vec<(PassageId, Vec<f32>)> = all
        .iter()
        .filter(|(id, _)| {
            index
                .lexical
                .passage_meta(*id)
                .unwrap()
                .tags
                .iter()
                .any(|t| t == "a")
        })
        .cloned()
        .collect();
    assert_eq!(tagged_a.len(), 11);
    let question = "refund status";
    // Without the filter, the hidden entry is one of the two neighbours.
    let (_, unfiltered) = expected_vector(question, &all);
    let hidden = all
        .iter()
        .find(|(id, _)| !tagged_a.iter().any(|(a, _)| a == id))
        .unwrap()
        .0;
    assert!(
        unfiltered.contains(&hidden),
        "the fixture no longer tests anything"
    );
    let filters = Filters {
        tags: vec!["a".into()],
        ..Default::default()
    };
    let list = dense_list(&engine, &tenant, question, filters).await;
    let (v, nearest) = expected_vector(question, &tagged_a);
    assert!(!nearest.contains(&hidden));
    assert_same(&list, &ranked(&v, &tagged_a));
}

#[tokio::test]
async fn document_passages_are_searched_with_the_query_vector_alone() {
    let docs: Vec<(String, String)> = (0..12)
        .map(|i| {
            (
                format!("doc{i}.md"),
                format!("# Page {i}\n\nRefund status and delivery notes, part {i}."),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = docs.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let (_dir, engine, tenant) = engine(&files).await;
    let all = stored(&engine, &tenant).await;
    let question = "refund status";
    let list = dense_list(&engine, &tenant, question, Filters::default()).await;
    assert!(
        !list.notes.iter().any(|n| n.contains("searched again")),
        "{:?}",
        list.notes
    );
    assert_same(&list, &ranked(&bag(question, false), &all));
}

#[tokio::test]
async fn why_not_scores_the_dense_path_as_the_query_did() {
    let (_dir, engine, tenant) = engine(&[("faq.jsonl", faq_file())]).await;
    let all = stored(&engine, &tenant).await;
    let question = "refund status";
    let (v, _) = expected_vector(question, &all);
    let want = ranked(&v, &all);
    // An entry far down the list: its rank and score come from the same
    // feedback vector as the query's dense list.
    let (id, score) = want[9];
    // Under RRF the dense path keeps only its per-path k (3), so why-not
    // scores the dense path again for the tenth entry.
    let mut params = RetrievalParams {
        paths: vec![PathKind::Dense],
        per_path_k: 3,
        ..RetrievalParams::default()
    };
    params.fusion.rule = rag_core::FusionRule::Rrf;
    let request = QueryRequest {
        kb: "kb".into(),
        query: question.into(),
        params: Some(params),
        overrides: Default::default(),
        filters: Filters::default(),
        generate: false,
        conversation_id: None,
    };
    let w = engine
        .why_not(&tenant, request, Viewer::Everything, &id.to_string())
        .await
        .unwrap();
    let dense = w
        .paths
        .iter()
        .find(|p| p.path == PathKind::Dense)
        .expect("a dense verdict");
    assert_eq!(dense.status, "cut_by_k", "{dense:?}");
    assert_eq!(dense.rank, Some(10), "{dense:?}");
    assert!(
        (dense.score.unwrap() - score as f64).abs() < 1e-5,
        "{dense:?} against {score}"
    );
}
