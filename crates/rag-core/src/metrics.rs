//! Retrieval metrics of a ranked list against relevance judgements (the
//! BEIR figures: nDCG@10, Recall@10 and @100, MRR@10), and the matching of
//! a golden set's expected names to the passages of a ranking. Compute-only:
//! `ragscope eval`, `ragscope tune` and the server's `/eval` route all score
//! through these functions.

use crate::ids::{DocId, PassageId};
use std::collections::HashMap;

/// Metrics of one ranked list against its judgements.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Metrics {
    /// Normalised discounted cumulative gain of the first 10.
    pub ndcg10: f64,
    /// Share of the relevant names found in the first 10.
    pub recall10: f64,
    /// Share of the relevant names found in the first 100.
    pub recall100: f64,
    /// Reciprocal rank of the first relevant name within the first 10 (0 when none is).
    pub mrr10: f64,
}

/// Scores `ranked` (best first) against graded judgements (name → gain).
/// Without judgements every metric is 0.
pub fn score(ranked: &[String], rel: &HashMap<String, f64>) -> Metrics {
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, d)| rel.get(d).copied().unwrap_or(0.0) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<f64> = rel.values().copied().collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, r)| r / ((i + 2) as f64).log2())
        .sum();
    let total = rel.len() as f64;
    let found = |k: usize| {
        ranked
            .iter()
            .take(k)
            .filter(|d| rel.contains_key(*d))
            .count() as f64
    };
    let mrr10 = ranked
        .iter()
        .take(10)
        .position(|d| rel.contains_key(d))
        .map(|p| 1.0 / (p + 1) as f64)
        .unwrap_or(0.0);
    let share = |n: f64| if total > 0.0 { n / total } else { 0.0 };
    Metrics {
        ndcg10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        recall10: share(found(10)),
        recall100: share(found(100)),
        mrr10,
    }
}

/// Scores a golden-set ranking against its expected names, each of gain 1
/// (a name listed twice counts once).
pub fn score_expected(ranked: &[String], expected: &[String]) -> Metrics {
    let rel: HashMap<String, f64> = expected.iter().map(|e| (e.clone(), 1.0)).collect();
    score(ranked, &rel)
}

/// The names a passage answers to in a golden set, its canonical id first:
/// its id (`faq:…`, `chunk:…`), its entry or chunk uuid, its document's id
/// and its source (a document's file name or URL, an FAQ entry's link).
pub fn passage_keys(id: PassageId, doc: Option<DocId>, source: Option<&str>) -> Vec<String> {
    let mut keys = vec![id.to_string()];
    match id {
        PassageId::Chunk(c) => keys.push(c.0.to_string()),
        PassageId::Faq(f) => keys.push(f.0.to_string()),
        PassageId::Fact(f) => keys.push(f.0.to_string()),
    }
    if let Some(d) = doc {
        keys.push(d.0.to_string());
    }
    if let Some(s) = source {
        keys.push(s.to_owned());
    }
    keys
}

/// A ranking of passages as names of the golden set, to be scored: each
/// hit becomes the first of its names (`keys_of`) that is expected, else
/// its canonical id; a name already ranked is not ranked again (several
/// chunks of one expected document count once, at the best rank). Facts
/// are skipped: a golden set names documents and entries.
pub fn golden_ranking(
    hits: &[PassageId],
    keys_of: impl Fn(PassageId) -> Vec<String>,
    expected: &[String],
) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    for &id in hits {
        if matches!(id, PassageId::Fact(_)) {
            continue;
        }
        let keys = keys_of(id);
        let key = keys
            .iter()
            .find(|k| expected.contains(k))
            .cloned()
            .unwrap_or_else(|| id.to_string());
        if !ranked.contains(&key) {
            ranked.push(key);
        }
    }
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ChunkId, FactId, FaqId};

    #[test]
    fn metrics_of_a_known_ranking() {
        let rel: HashMap<String, f64> = [("a".to_string(), 1.0), ("b".to_string(), 1.0)].into();
        let ranked: Vec<String> = ["x", "a", "y", "b"].iter().map(|s| s.to_string()).collect();
        let m = score(&ranked, &rel);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((m.ndcg10 - dcg / idcg).abs() < 1e-12);
        assert_eq!(m.recall10, 1.0);
        assert_eq!(m.mrr10, 0.5);
    }

    #[test]
    fn no_judgements_score_zero() {
        let m = score(&["a".to_string()], &HashMap::new());
        assert_eq!(m, Metrics::default());
    }

    #[test]
    fn golden_names_match_by_source_once_and_skip_facts() {
        let doc = DocId::generate();
        let (c1, c2) = (ChunkId::generate(), ChunkId::generate());
        let faq = FaqId::generate();
        let hits = [
            PassageId::Fact(FactId::generate()),
            PassageId::Faq(faq),
            PassageId::Chunk(c1),
            PassageId::Chunk(c2),
        ];
        let keys_of = |id: PassageId| match id {
            PassageId::Chunk(_) => passage_keys(id, Some(doc), Some("desk.md")),
            _ => passage_keys(id, None, None),
        };
        let expected = vec!["desk.md".to_string()];
        let ranked = golden_ranking(&hits, keys_of, &expected);
        // Both chunks of desk.md count once, at rank 2 behind the entry.
        assert_eq!(
            ranked,
            vec![PassageId::Faq(faq).to_string(), "desk.md".into()]
        );
        let m = score_expected(&ranked, &expected);
        assert!((m.ndcg10 - 1.0 / 3f64.log2()).abs() < 1e-12);
        assert_eq!(m.mrr10, 0.5);
        // An entry named by its id or by its bare uuid.
        for name in [PassageId::Faq(faq).to_string(), faq.0.to_string()] {
            let ranked = golden_ranking(&hits, keys_of, std::slice::from_ref(&name));
            assert_eq!(ranked[0], name);
        }
    }
}
