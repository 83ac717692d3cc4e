//! Helpers shared by the integration tests: locating the model file and
//! reading the reference fixture.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use rag_e5::{E5Model, Kind};

/// The directory holding model files: `RAGSCOPE_MODELS_DIR`, or `models/`
/// at the repository root.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("RAGSCOPE_MODELS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"),
    }
}

/// The path of `e5-small-q4.bin`; panics with instructions when missing.
pub fn model_path() -> PathBuf {
    let path = models_dir().join("e5-small-q4.bin");
    assert!(
        path.is_file(),
        "the model file {} is missing: run scripts/models/fetch-e5.sh \
         (set RAGSCOPE_MODELS_DIR to use another directory)",
        path.display()
    );
    path
}

/// The raw bytes of the model file, read once per test binary.
pub fn model_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = model_path();
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    })
}

/// The parsed model, loaded once per test binary.
pub fn model() -> &'static E5Model {
    static MODEL: OnceLock<E5Model> = OnceLock::new();
    MODEL
        .get_or_init(|| E5Model::from_bytes(model_bytes().to_vec()).expect("the model file parses"))
}

/// One line of `tests/fixtures/e5_reference.jsonl`.
pub struct Reference {
    pub text: String,
    pub kind: Kind,
    pub ids: Vec<u32>,
    pub tokens: usize,
    pub windows: usize,
    pub vector: Vec<f32>,
}

/// All fixture rows, produced by `scripts/models/make-e5-fixture.py`.
pub fn fixture() -> Vec<Reference> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e5_reference.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("fixture line is JSON");
            let kind = match v["kind"].as_str() {
                Some("query") => Kind::Query,
                Some("passage") => Kind::Passage,
                other => panic!("bad kind {other:?}"),
            };
            let nums = |key: &str| -> Vec<f64> {
                v[key]
                    .as_array()
                    .unwrap_or_else(|| panic!("fixture row lacks {key}"))
                    .iter()
                    .map(|x| x.as_f64().expect("number"))
                    .collect()
            };
            Reference {
                text: v["text"].as_str().expect("text").to_owned(),
                kind,
                ids: nums("ids").into_iter().map(|x| x as u32).collect(),
                tokens: v["tokens"].as_u64().expect("tokens") as usize,
                windows: v["windows"].as_u64().expect("windows") as usize,
                vector: nums("vector").into_iter().map(|x| x as f32).collect(),
            }
        })
        .collect()
}

/// Cosine similarity.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
