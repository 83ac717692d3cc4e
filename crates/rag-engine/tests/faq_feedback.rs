//! The dense path's feedback for FAQ matching: when a question is matched
//! against FAQ entries, it is embedded as a query and as a passage, the two
//! averaged, moved towards its two nearest entries (weight 0.5) and searched
//! again. Checked against the same arithmetic done here over the stored
//! vectors; neighbours come from the entries the caller may see only;
//! why-not scores the dense path with the same vector; a knowledge base of
//! documents is searched with the query vector alone.

mod support;

use rag_core::{Filters, PassageId};
use support::{assert_cut_by_k, assert_same, bag, dense_list, engine, ranked, stored, unit};

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
    assert_cut_by_k(&engine, &tenant, question, 3, (id, 10, score)).await;
}
