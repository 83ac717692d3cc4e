//! Helpers shared by the integration tests: locating the model directory and
//! reading the reference fixture.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use rag_bert::BertModel;
use serde::Deserialize;

/// The directory holding model directories: `RAGSCOPE_MODELS_DIR`, or
/// `models/` at the repository root.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("RAGSCOPE_MODELS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"),
    }
}

/// The all-MiniLM-L6-v2 directory; panics with instructions when missing.
pub fn model_dir() -> PathBuf {
    let dir = models_dir().join("all-MiniLM-L6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "the model directory {} is missing or incomplete: run scripts/models/fetch-minilm.sh \
         (set RAGSCOPE_MODELS_DIR to use another directory)",
        dir.display()
    );
    dir
}

/// Reads a file of the model directory.
pub fn model_file(name: &str) -> Vec<u8> {
    let path = model_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The model, loaded once per test binary.
pub fn model() -> &'static BertModel {
    static MODEL: OnceLock<BertModel> = OnceLock::new();
    MODEL.get_or_init(|| BertModel::load(model_dir()).expect("the model directory loads"))
}

#[derive(Deserialize)]
pub struct Fixture {
    pub max_seq_length: usize,
    pub dimensions: usize,
    pub embeddings: Vec<Reference>,
    pub tokenizer_cases: Vec<TokenizerCase>,
}

/// A text with the ids the model runs and sentence-transformers' vector.
#[derive(Deserialize)]
pub struct Reference {
    pub text: String,
    pub ids: Vec<u32>,
    pub untruncated_len: usize,
    pub vector: Vec<f32>,
}

/// A text with its full (untruncated) ids.
#[derive(Deserialize)]
pub struct TokenizerCase {
    pub text: String,
    pub ids: Vec<u32>,
}

/// `tests/fixtures/minilm_reference.json`, made by
/// `scripts/models/make-bert-fixture.py`.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_reference.json");
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_slice(&bytes).expect("the fixture parses")
    })
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "vector lengths differ");
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Minimum and mean cosine of vectors against the fixture's, in order.
pub fn compare(vectors: &[Vec<f32>]) -> (f64, f64, usize) {
    let refs = &fixture().embeddings;
    assert_eq!(vectors.len(), refs.len());
    let mut min = f64::INFINITY;
    let mut worst = 0;
    let mut sum = 0.0;
    for (i, (v, r)) in vectors.iter().zip(refs).enumerate() {
        let c = cosine(v, &r.vector);
        sum += c;
        if c < min {
            min = c;
            worst = i;
        }
    }
    (min, sum / refs.len() as f64, worst)
}
