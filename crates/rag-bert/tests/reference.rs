//! all-MiniLM-L6-v2 against sentence-transformers' own output
//! (`tests/fixtures/minilm_reference.json`, made by
//! `scripts/models/make-bert-fixture.py`). Needs the model directory from
//! `scripts/models/fetch-minilm.sh`.

mod common;

use common::{compare, fixture, model};
use rag_bert::{Encoding, Pooling};

/// sentence-transformers computes in float32 with other summation orders;
/// anything below this is a real difference.
const MIN_COSINE: f64 = 0.9999;

#[test]
fn configuration_is_read_from_the_directory() {
    let m = model();
    assert_eq!(m.dimensions(), fixture().dimensions);
    assert_eq!(m.max_seq_len(), fixture().max_seq_length);
    assert_eq!(m.sentence_config().pooling, Pooling::Mean);
    assert!(m.sentence_config().normalize);
    assert_eq!(m.config().num_hidden_layers, 6);
}

#[test]
fn token_ids_equal_the_reference_tokenizer() {
    let m = model();
    let mut mismatches = Vec::new();
    for r in &fixture().embeddings {
        let e = m.encode(&r.text);
        if e.ids != r.ids || e.untruncated_len != r.untruncated_len {
            mismatches.push(format!(
                "{:?}: got {:?} ({} untruncated), want {:?} ({})",
                r.text, e.ids, e.untruncated_len, r.ids, r.untruncated_len
            ));
        }
    }
    for case in &fixture().tokenizer_cases {
        let e = m.tokenizer().encode(&case.text, usize::MAX);
        if e.ids != case.ids {
            mismatches.push(format!(
                "{:?}: got {:?}, want {:?}",
                case.text, e.ids, case.ids
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The fixture exercises truncation, [UNK] and Chinese characters.
    let refs = &fixture().embeddings;
    assert!(
        refs.iter()
            .filter(|r| r.untruncated_len > r.ids.len())
            .count()
            >= 2
    );
    let unk = m.tokenizer().unk_id();
    assert!(refs.iter().any(|r| r.ids.contains(&unk)));
    // Chinese characters become single-character tokens, each in the
    // vocabulary or [UNK] (this English vocabulary lacks most
    // Simplified characters): "每天需要多少蛋白质" is nine characters, nine
    // tokens, of which 天 and 白 are known.
    let chinese = refs
        .iter()
        .find(|r| r.text == "每天需要多少蛋白质")
        .expect("in the fixture");
    assert_eq!(chinese.ids.len(), 9 + 2);
    let known: Vec<&str> = chinese.ids[1..10]
        .iter()
        .filter(|&&id| id != unk)
        .map(|&id| m.tokenizer().id_to_token(id).unwrap())
        .collect();
    assert_eq!(known, ["天", "白"]);
}

#[test]
fn vectors_match_sentence_transformers() {
    let m = model();
    let texts: Vec<&str> = fixture()
        .embeddings
        .iter()
        .map(|r| r.text.as_str())
        .collect();
    assert!(texts.len() >= 50);

    let batch = m.embed_batch(&texts);
    let vectors: Vec<Vec<f32>> = batch.iter().map(|e| e.vector.clone()).collect();
    let (min, mean, worst) = compare(&vectors);
    eprintln!(
        "batch: min cosine {min:.9} (1 - min = {:.1e}, text {worst}), mean {mean:.9}",
        1.0 - min
    );
    assert!(min >= MIN_COSINE, "min cosine {min} for {:?}", texts[worst]);

    for (e, r) in batch.iter().zip(&fixture().embeddings) {
        assert_eq!(e.tokens, r.ids.len(), "{:?}", r.text);
        assert_eq!(e.untruncated_tokens, r.untruncated_len, "{:?}", r.text);
        assert_eq!(e.truncated(), r.untruncated_len > r.ids.len());
        let norm: f32 = e.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }

    // One text at a time, and spread over threads: the same vectors.
    let single: Vec<Vec<f32>> = texts.iter().map(|t| m.embed(t).vector).collect();
    let parallel: Vec<Vec<f32>> = m
        .embed_batch_parallel(&texts, 2)
        .into_iter()
        .map(|e| e.vector)
        .collect();
    for (i, ((a, b), c)) in vectors.iter().zip(&single).zip(&parallel).enumerate() {
        assert!(
            common::cosine(a, b) > 0.999_999,
            "single vs batch differ for text {i}"
        );
        assert!(
            common::cosine(a, c) > 0.999_999,
            "parallel vs batch differ for text {i}"
        );
    }
}

#[test]
fn the_encoder_alone_matches_on_reference_ids() {
    let m = model();
    let encodings: Vec<Encoding> = fixture()
        .embeddings
        .iter()
        .map(|r| Encoding {
            ids: r.ids.clone(),
            type_ids: vec![0; r.ids.len()],
            untruncated_len: r.untruncated_len,
        })
        .collect();
    let (min, mean, worst) = compare(&m.embed_encodings(&encodings));
    eprintln!(
        "reference ids: min cosine {min:.9} (1 - min = {:.1e}, text {worst}), mean {mean:.9}",
        1.0 - min
    );
    assert!(min >= MIN_COSINE);
}
