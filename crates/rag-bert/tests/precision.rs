//! The packed precisions (int8, bf16) of all-MiniLM-L6-v2 against
//! sentence-transformers' f32 vectors, on every kernel tier this CPU runs.
//! Needs the model directory from `scripts/models/fetch-minilm.sh`.

mod common;

use common::{compare, fixture, model_dir};
use rag_bert::{BertModel, Bf16Tier, Int8Tier, Precision, Tiers};

/// The least cosine to the reference vectors each precision must keep.
fn min_cosine(p: Precision) -> f64 {
    match p {
        Precision::F32 => 0.9999,
        Precision::Int8 => 0.999,
        Precision::Bf16 => 0.999,
    }
}

fn check(precision: Precision, tiers: Tiers) {
    let name = match precision {
        Precision::Int8 => tiers.int8.as_str(),
        _ => tiers.bf16.as_str(),
    };
    let supported = match precision {
        Precision::Int8 => tiers.int8.is_supported(),
        _ => tiers.bf16.is_supported(),
    };
    if !supported {
        eprintln!("SKIPPED: {precision} on the {name} tier is not supported on this CPU");
        return;
    }
    let m = BertModel::load(model_dir())
        .and_then(|m| m.with_precision_on(precision, tiers))
        .expect("the model loads and packs");
    assert_eq!(m.precision(), precision);
    let texts: Vec<&str> = fixture()
        .embeddings
        .iter()
        .map(|r| r.text.as_str())
        .collect();
    let vectors: Vec<Vec<f32>> = m
        .embed_batch(&texts)
        .into_iter()
        .map(|e| e.vector)
        .collect();
    let (min, mean, worst) = compare(&vectors);
    eprintln!(
        "{precision} on {name}: min cosine {min:.6} (text {worst}), mean {mean:.6}, \
         linear weights {:.1} MB",
        m.linear_weight_bytes() as f64 / 1e6
    );
    assert!(
        min >= min_cosine(precision),
        "{precision} on {name}: min cosine {min} for {:?}",
        texts[worst]
    );
    // A single query runs the same kernels as a batch.
    let single = m.embed(texts[worst]).vector;
    assert!(common::cosine(&single, &vectors[worst]) > 0.99999);
}

#[test]
fn int8_keeps_the_reference_vectors_on_every_tier() {
    for int8 in Int8Tier::ALL {
        check(
            Precision::Int8,
            Tiers {
                int8,
                bf16: Bf16Tier::Portable,
            },
        );
    }
}

#[test]
fn bf16_keeps_the_reference_vectors_on_every_tier() {
    for bf16 in Bf16Tier::ALL {
        check(
            Precision::Bf16,
            Tiers {
                int8: Int8Tier::Portable,
                bf16,
            },
        );
    }
}

#[test]
fn packed_weights_are_smaller_and_the_choice_is_made_once() {
    let f32_model = BertModel::load(model_dir()).unwrap();
    let f32_bytes = f32_model.linear_weight_bytes();
    let f32_model_word_bytes = f32_model.word_table_bytes();
    let int8 = f32_model.with_precision(Precision::Int8).unwrap();
    assert!(
        int8.linear_weight_bytes() * 5 < f32_bytes * 2,
        "int8 is about a third"
    );
    assert_eq!(int8.word_table_bytes(), f32_model_word_bytes);
    assert!(int8.with_precision(Precision::Bf16).is_err());
    let bf16 = BertModel::load(model_dir())
        .unwrap()
        .with_precision(Precision::Bf16)
        .unwrap();
    assert!(
        bf16.linear_weight_bytes() * 3 < f32_bytes * 2,
        "bf16 is about half"
    );
    // The word table follows bf16 (half); int8 keeps it in f32 (above:
    // its fidelity has no room for the rounding).
    assert_eq!(bf16.word_table_bytes() * 2, f32_model_word_bytes);
    assert_eq!(
        bf16.with_precision(Precision::Bf16).unwrap().precision(),
        Precision::Bf16
    );
}
