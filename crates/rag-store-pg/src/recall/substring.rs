//! The substring path inside PostgreSQL: the in-memory index's
//! `SubstringPlan`, answered through pg_trgm-indexed `LIKE`.

use super::*;

/// The query and its key terms as substrings, scored as the in-memory index
/// scores them. First pass: each pattern's passages (pg_trgm index scans),
/// which give every pattern's exact document frequency, so its weight, and
/// each passage's set of patterns. Second pass: the texts of the passages
/// that pass the filter and may cover enough of the query, for the final
/// score (overlapping occurrences counted as the in-memory index counts them).
pub(super) async fn substring_path(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
) -> Result<RankedList, CoreError> {
    let plan = match SubstringPlan::new(q.query) {
        Ok(p) => p,
        Err(note) => {
            return Ok(RankedList {
                path: PathKind::Substring,
                hits: vec![],
                notes: vec![note],
            })
        }
    };
    let n: i64 = tx
        .query_opt("SELECT n FROM lex_stats WHERE kb_id = $1", &[&f.kb])
        .await
        .map_err(pg)?
        .map_or(0, |r| r.get(0));
    // Patterns of one or two characters with a Latin letter or digit among
    // them have no trigram to look up: like the in-memory n-gram index, treat
    // them as possibly everywhere (document frequency n) and check them in
    // the texts fetched below.
    let indexed: Vec<bool> = plan
        .patterns
        .iter()
        .map(|p| {
            let chars: Vec<char> = p.chars().collect();
            !(chars.len() <= 2 && chars.iter().any(char::is_ascii))
        })
        .collect();
    let likes: Vec<String> = plan
        .patterns
        .iter()
        .zip(&indexed)
        .filter(|(_, i)| **i)
        .map(|(p, _)| like_anywhere(p))
        .collect();
    let slots: Vec<usize> = (0..plan.patterns.len()).filter(|i| indexed[*i]).collect();
    // Each pattern's passages: one pg_trgm index scan per pattern.
    let rows = if likes.is_empty() {
        Vec::new()
    } else {
        tx.query(
            "SELECT i, passage FROM substring_matches($1, $2::text[])",
            &[&f.kb, &likes],
        )
        .await
        .map_err(pg)?
    };
    let mut dfs: Vec<usize> = indexed
        .iter()
        .map(|i| if *i { 0 } else { n as usize })
        .collect();
    let mut bits: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for r in &rows {
        let i = slots[(r.get::<_, i64>(0) - 1) as usize];
        dfs[i] += 1;
        *bits.entry(r.get(1)).or_default() |= 1 << i;
    }
    let weights = plan.weights(&dfs, n as usize);
    // Passages that can score at all: they contain the whole query or cover
    // enough key terms, counting the unindexed ones as present.
    let everywhere: u64 = (0..plan.patterns.len())
        .filter(|i| !indexed[*i])
        .fold(0, |b, i| b | 1 << i);
    let key_start = usize::from(plan.whole_first);
    let key_total: f64 = weights[key_start..].iter().sum();
    let may_score = |b: u64| {
        let b = b | everywhere;
        let covered: f64 = (key_start..plan.patterns.len())
            .filter(|i| b & (1 << i) != 0)
            .map(|i| weights[i])
            .sum();
        (plan.whole_first && b & 1 != 0)
            || (key_total > 0.0
                && covered / key_total >= f64::from(rag_lexical::MIN_COVERAGE) - 1e-12)
    };
    let texts: Vec<(String, String)> = if may_score(0) {
        // Passages with no indexed pattern at all may score: read them all.
        let sql = format!("SELECT p.passage, p.match_text FROM passages p WHERE {FILTER} AND p.kind < 2 ORDER BY {SNAPSHOT_ORDER}");
        tx.query(&sql, &f.params(&[]))
            .await
            .map_err(pg)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    } else {
        let wanted: Vec<&str> = bits
            .iter()
            .filter(|(_, b)| may_score(**b))
            .map(|(p, _)| p.as_str())
            .collect();
        if wanted.is_empty() {
            Vec::new()
        } else {
            let sql = format!("SELECT p.passage, p.match_text FROM passages p WHERE {FILTER} AND p.passage = ANY($8) ORDER BY {SNAPSHOT_ORDER}");
            tx.query(&sql, &f.params(&[&wanted]))
                .await
                .map_err(pg)?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect()
        }
    };
    // Matching the texts is CPU work: off the async runtime.
    let k = q.k;
    let (plan, hits) = tokio::task::spawn_blocking(move || {
        // In snapshot order, so ties keep it.
        let mut scored: Vec<(usize, f64, u64)> = Vec::new();
        for (i, (_, text)) in texts.iter().enumerate() {
            let m = plan.find(text);
            if let Some(score) = plan.score(&weights, m, text.chars().count()) {
                scored.push((i, score, m.bits));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        let hits = scored
            .into_iter()
            .enumerate()
            .map(|(rank, (i, score, bits))| {
                Ok(Hit {
                    id: passage_id(&texts[i].0)?,
                    rank: rank as u32 + 1,
                    score,
                    matched: plan.matched(bits),
                })
            })
            .collect::<Result<Vec<Hit>, CoreError>>();
        (plan, hits)
    })
    .await
    .map_err(|e| CoreError::Component {
        component: "substring path".into(),
        message: e.to_string(),
    })?;
    let hits = hits?;
    Ok(RankedList {
        path: PathKind::Substring,
        hits,
        notes: vec![plan.note()],
    })
}
