//! What the dense-path tests share: a stand-in embedder whose vectors the
//! tests can compute, an engine over a fresh store, and the dense list of a
//! question with the arithmetic to check it against.
#![allow(dead_code)] // each test file uses its share

use async_trait::async_trait;
use rag_core::{
    CoreError, Embedder, Filters, KbSettings, PassageId, PathKind, QueryRequest, RankedList,
    RetrievalParams, TenantId, Viewer,
};
use rag_engine::{Components, Engine, EngineConfig, IngestOptions, QueryOptions};
use std::sync::Arc;

/// Characters hashed into 16 dimensions; passages get a marker dimension,
/// so the two forms of one text differ as e5's `query: ` and `passage: ` do.
pub struct TwoForms;

pub const DIMS: usize = 16;

pub fn bag(text: &str, passage: bool) -> Vec<f32> {
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

pub fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub async fn engine(files: &[(&str, String)]) -> (tempfile::TempDir, Engine, TenantId) {
    engine_with(files, EngineConfig::default()).await
}

/// An engine over a fresh embedded store with the [`TwoForms`] embedder,
/// a knowledge base "kb" and `files` ingested into it.
pub async fn engine_with(
    files: &[(&str, String)],
    config: EngineConfig,
) -> (tempfile::TempDir, Engine, TenantId) {
    let dir = tempfile::tempdir().unwrap();
    let store = rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
    let mut components = Components::lexical(Arc::new(store));
    components.embedder = Some(Arc::new(TwoForms));
    let engine = Engine::new(components, config);
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

pub async fn dense_list(
    engine: &Engine,
    tenant: &TenantId,
    q: &str,
    filters: Filters,
) -> RankedList {
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
pub async fn stored(engine: &Engine, tenant: &TenantId) -> Vec<(PassageId, Vec<f32>)> {
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
pub fn ranked(v: &[f32], among: &[(PassageId, Vec<f32>)]) -> Vec<(PassageId, f32)> {
    let mut out: Vec<(PassageId, f32)> = among.iter().map(|(id, x)| (*id, dot(v, x))).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

pub fn assert_same(list: &RankedList, want: &[(PassageId, f32)]) {
    assert_eq!(list.hits.len(), want.len(), "{list:?}");
    for (h, (id, score)) in list.hits.iter().zip(want) {
        assert_eq!(h.id, *id, "{list:?}");
        assert!(
            (h.score - *score as f64).abs() < 1e-5,
            "{h:?} against {score}"
        );
    }
}

/// Asks why `id` is not among the dense path's first `per_path_k` under
/// RRF (the path keeps only those, so why-not scores the path again) and
/// checks that it was cut there at `rank` with `score`.
pub async fn assert_cut_by_k(
    engine: &Engine,
    tenant: &TenantId,
    question: &str,
    per_path_k: usize,
    (id, rank, score): (PassageId, u32, f32),
) {
    let mut params = RetrievalParams {
        paths: vec![PathKind::Dense],
        per_path_k,
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
        .why_not(tenant, request, Viewer::Everything, &id.to_string())
        .await
        .unwrap();
    let dense = w
        .paths
        .iter()
        .find(|p| p.path == PathKind::Dense)
        .expect("a dense verdict");
    assert_eq!(dense.status, "cut_by_k", "{dense:?}");
    assert_eq!(dense.rank, Some(rank), "{dense:?}");
    assert!(
        (dense.score.unwrap() - score as f64).abs() < 1e-5,
        "{dense:?} against {score}"
    );
}

/// Ingests a document restricted to `owner` into the knowledge base "kb".
pub async fn ingest_owned(engine: &Engine, tenant: &TenantId, name: &str, text: &str, owner: &str) {
    let mut options = IngestOptions::new(engine.config().chunk);
    options.owner = Some(owner.into());
    engine
        .ingest_with(
            tenant,
            "kb",
            name,
            text.as_bytes().to_vec(),
            &options,
            &mut |_| {},
        )
        .await
        .unwrap();
}
