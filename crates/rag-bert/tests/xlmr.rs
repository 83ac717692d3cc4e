//! The XLM-RoBERTa path end to end, on a tiny model with random weights that
//! sentence-transformers saved (`tests/fixtures/tiny-xlmr/`, with its vectors
//! in `tests/fixtures/tiny-xlmr-reference.json`; both made by
//! `scripts/models/make-bert-fixture.py`): Unigram tokenizer, RoBERTa
//! position numbering, CLS pooling, normalisation, truncation, and the file
//! layout of sentence-transformers 6. Needs no downloaded model.

use rag_bert::{BertModel, Pooling};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    max_seq_length: usize,
    embeddings: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    text: String,
    ids: Vec<u32>,
    untruncated_len: usize,
    vector: Vec<f32>,
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn tiny_xlm_roberta_matches_sentence_transformers() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny-xlmr");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tiny-xlmr-reference.json"
    );
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let model = BertModel::load(dir).unwrap();
    assert_eq!(model.config().model_type, "xlm-roberta");
    assert_eq!(model.config().position_offset, 2);
    assert_eq!(model.sentence_config().pooling, Pooling::Cls);
    assert!(model.sentence_config().normalize);
    assert_eq!(model.max_seq_len(), fixture.max_seq_length);

    let texts: Vec<&str> = fixture.embeddings.iter().map(|r| r.text.as_str()).collect();
    let got = model.embed_batch(&texts);
    let mut min = f64::INFINITY;
    for (e, r) in got.iter().zip(&fixture.embeddings) {
        assert_eq!(model.encode(&r.text).ids, r.ids, "{:?}", r.text);
        assert_eq!(e.untruncated_tokens, r.untruncated_len, "{:?}", r.text);
        let c = cosine(&e.vector, &r.vector);
        assert!(c >= 0.9999, "cosine {c} for {:?}", r.text);
        min = min.min(c);
    }
    eprintln!("tiny XLM-R: {} texts, min cosine {min:.9}", texts.len());
    assert!(
        got.iter().filter(|e| e.truncated()).count() >= 2,
        "the fixture exercises truncation"
    );
}
