//! The substring path inside PostgreSQL: the in-memory index's
//! `SubstringPlan`, answered through pg_trgm-indexed `LIKE`.

use super::*;

/// The query and its key terms as substrings, scored as the in-memory index
/// scores them.
///
/// First, each pattern's weight, from the number of text passages holding
/// it: in a knowledge base of up to [`SAMPLED_ABOVE`] passages every
/// pattern's passages are read (pg_trgm index scans); above, a pattern
/// found in at least [`SAMPLE_MIN_HITS`] passages of the sample (migration
/// 10) is weighed by that count until its passages are read, and the rarer
/// ones are read. Then, as MaxScore does and as the in-memory index does,
/// only the heaviest key terms (and the whole query) propose passages: a
/// passage holding none of them cannot cover 60 % of the key terms'
/// weight. Their passages are read if they were not (which makes their
/// weight exact, and may call for another proposing term); the common
/// patterns' lists that were not read count as held when a passage's
/// promise is reckoned. Last, the texts of at most
/// [`rag_lexical::verify_cap`] passages that pass the filter and may score,
/// the most promising first, for the final score (overlapping occurrences
/// counted as the in-memory index counts them); the list's notes say so
/// when more might match.
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
    // Each pattern's passages as far as they were read (all of them).
    let mut lists: Vec<Option<Vec<String>>> = vec![None; plan.patterns.len()];
    let mut dfs: Vec<usize> = vec![n as usize; plan.patterns.len()];
    if n <= SAMPLED_ABOVE {
        read_lists(tx, f, &plan, &slots, &mut lists, &mut dfs).await?;
    } else if !likes.is_empty() {
        // Common patterns are weighed by the sample (migration 10) until
        // read; the sample says too little of the others, which are read.
        let mut rare = Vec::new();
        for r in tx
            .query(
                "SELECT i, hits FROM substring_sample($1, $2::text[])",
                &[&f.kb, &likes],
            )
            .await
            .map_err(pg)?
        {
            let i = slots[(r.get::<_, i64>(0) - 1) as usize];
            let hits: i64 = r.get(1);
            if hits < SAMPLE_MIN_HITS {
                rare.push(i);
            } else {
                dfs[i] = hits.saturating_mul(SAMPLE_SHARE).min(n) as usize;
            }
        }
        read_lists(tx, f, &plan, &rare, &mut lists, &mut dfs).await?;
    }
    let key_start = usize::from(plan.whole_first);
    // As MaxScore: the heaviest key terms propose the passages, until the
    // rest cannot reach the coverage alone; with the whole query's own.
    // Reading a proposing pattern's passages makes its weight exact, which
    // may call for another proposing pattern.
    let (weights, proposing, scan_all, enough) = loop {
        let weights = plan.weights(&dfs, n as usize);
        let key_total: f64 = weights[key_start..].iter().sum();
        let enough = move |w: f64| {
            key_total > 0.0 && w / key_total >= f64::from(rag_lexical::MIN_COVERAGE) - 1e-12
        };
        // Key terms that cannot be looked up count as held by every passage.
        let everywhere: f64 = (key_start..plan.patterns.len())
            .filter(|i| !indexed[*i])
            .map(|i| weights[i])
            .sum();
        let mut lookup: Vec<usize> = (key_start..plan.patterns.len())
            .filter(|i| indexed[*i])
            .collect();
        lookup.sort_by(|a, b| weights[*b].total_cmp(&weights[*a]).then(a.cmp(b)));
        let mut rest: f64 = lookup.iter().map(|p| weights[*p]).sum::<f64>() + everywhere;
        let mut proposing: Vec<usize> = Vec::new();
        for p in &lookup {
            if !enough(rest) {
                break;
            }
            rest -= weights[*p];
            proposing.push(*p);
        }
        if plan.whole_first && indexed[0] {
            proposing.push(0);
        }
        // Every passage is a candidate when the unsearchable key terms
        // reach the coverage alone, or the whole query cannot be looked up.
        let scan_all = enough(everywhere) || (plan.whole_first && !indexed[0]);
        let unread: Vec<usize> = proposing
            .iter()
            .copied()
            .filter(|p| lists[*p].is_none())
            .collect();
        if scan_all || unread.is_empty() {
            break (weights, proposing, scan_all, enough);
        }
        read_lists(tx, f, &plan, &unread, &mut lists, &mut dfs).await?;
    };
    let known: Vec<bool> = lists.iter().map(Option::is_some).collect();
    // What each passage's lists promise: the key terms it holds, with those
    // whose lists were not read counted as held.
    let mut bits: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        if !known[i] {
            continue;
        }
        for p in list.iter().flatten() {
            *bits.entry(p.as_str()).or_default() |= 1 << i;
        }
    }
    let maybe: u64 = (0..plan.patterns.len())
        .filter(|i| !indexed[*i] || !known[*i])
        .fold(0, |b, i| b | 1 << i);
    let promise = |b: u64| -> f64 {
        let b = b | maybe;
        (key_start..plan.patterns.len())
            .filter(|i| b & (1 << i) != 0)
            .map(|i| weights[i])
            .sum()
    };
    let proposed = |b: u64| proposing.iter().any(|p| b & (1 << p) != 0);
    let cap = rag_lexical::verify_cap(q.k);
    let mut eligible: Vec<Candidate> = if scan_all {
        Vec::new()
    } else {
        bits.iter()
            .filter(|(_, b)| proposed(**b))
            .map(|(p, b)| Candidate {
                passage: p,
                whole: plan.whole_first && (!indexed[0] || (b | maybe) & 1 != 0),
                promise: promise(*b),
            })
            .filter(|c| c.whole || enough(c.promise))
            .collect()
    };
    // At most `cap` texts are read: those that may hold the whole query
    // first, then by promised weight, then by passage id.
    eligible.sort_by(|a, b| {
        b.whole
            .cmp(&a.whole)
            .then(b.promise.total_cmp(&a.promise))
            .then(a.passage.cmp(b.passage))
    });
    let (mut texts, considered) = if scan_all {
        // Every passage may score: the first `cap` by id (all of them
        // promise the same), and how many there are.
        let sql = format!(
            "SELECT p.passage, p.match_text, p.kind, p.created_at, p.grp, p.ordinal, count(*) OVER ()
             FROM passages p WHERE {FILTER} AND p.kind < 2 ORDER BY p.passage LIMIT $8"
        );
        let rows = tx
            .query(&sql, &f.params(&[&(cap as i64)]))
            .await
            .map_err(pg)?;
        let all = rows.first().map_or(0, |r| r.get::<_, i64>(6) as usize);
        let texts = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), (r.get(2), r.get(3), r.get(4), r.get(5))))
            .collect();
        (texts, all)
    } else {
        (read_texts(tx, f, &eligible, cap).await?, eligible.len())
    };
    // In snapshot order, so ties keep it.
    texts.sort_by_key(|t| t.2);
    let texts: Vec<(String, String)> = texts.into_iter().map(|(p, t, _)| (p, t)).collect();
    let capped = considered > cap;
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
    let mut notes = vec![plan.note()];
    if capped {
        notes.push(format!(
            "{considered} passages may match; the {cap} most promising were read"
        ));
    }
    Ok(RankedList {
        path: PathKind::Substring,
        hits,
        notes,
    })
}

/// In a knowledge base of more text passages, patterns are weighed by
/// their count in the sample (migration 10) until their passages are read.
const SAMPLED_ABOVE: i64 = 20_000;
/// One passage in this many is in the sample.
const SAMPLE_SHARE: i64 = 32;
/// A pattern found in fewer sampled passages is read, not estimated (64
/// sampled holders put the estimate within about an eighth of the count).
const SAMPLE_MIN_HITS: i64 = 64;

/// A pattern holding another pattern whose passages were read is looked
/// for in those passages alone when there are at most this many (the
/// whole question, say, is in none of its rarest word's few passages,
/// where a pg_trgm scan of its many trigrams costs tens of milliseconds).
const WITHIN_READ_MAX: usize = 2_000;

/// Reads the passages of `which` patterns, which makes their document
/// frequencies exact: a pattern holding another pattern whose passages are
/// read (or are being read) is looked for among those passages
/// ([`WITHIN_READ_MAX`]); the others take one pg_trgm index scan each.
async fn read_lists(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    plan: &SubstringPlan,
    which: &[usize],
    lists: &mut [Option<Vec<String>>],
    dfs: &mut [usize],
) -> Result<(), CoreError> {
    let holds = |i: usize, j: usize| i != j && plan.patterns[i].contains(plan.patterns[j].as_str());
    let mut pending: Vec<usize> = which.to_vec();
    while !pending.is_empty() {
        // A pattern holding another pending one waits for its passages
        // (patterns that hold each other, being equal, go together).
        let (mut now, mut later): (Vec<usize>, Vec<usize>) = pending
            .iter()
            .partition(|&&i| !pending.iter().any(|&j| holds(i, j) && !holds(j, i)));
        if now.is_empty() {
            now = std::mem::take(&mut later);
        }
        let mut scan = Vec::new();
        let mut within: Vec<(usize, usize)> = Vec::new();
        for &i in &now {
            let smallest = (0..plan.patterns.len())
                .filter(|&j| holds(i, j))
                .filter_map(|j| lists[j].as_ref().map(|l| (l.len(), j)))
                .min();
            match smallest {
                Some((len, j)) if len <= WITHIN_READ_MAX => within.push((i, j)),
                _ => scan.push(i),
            }
        }
        scan_lists(tx, f, plan, &scan, lists).await?;
        within_lists(tx, f, plan, &within, lists).await?;
        pending = later;
    }
    for i in which {
        dfs[*i] = lists[*i].as_ref().map_or(0, Vec::len);
    }
    Ok(())
}

/// The passages of `which` patterns, by pg_trgm index scans.
async fn scan_lists(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    plan: &SubstringPlan,
    which: &[usize],
    lists: &mut [Option<Vec<String>>],
) -> Result<(), CoreError> {
    if which.is_empty() {
        return Ok(());
    }
    let likes: Vec<String> = which
        .iter()
        .map(|i| like_anywhere(&plan.patterns[*i]))
        .collect();
    for i in which {
        lists[*i] = Some(Vec::new());
    }
    for r in tx
        .query(
            "SELECT i, passage FROM substring_matches($1, $2::text[])",
            &[&f.kb, &likes],
        )
        .await
        .map_err(pg)?
    {
        let i = which[(r.get::<_, i64>(0) - 1) as usize];
        lists[i].get_or_insert_with(Vec::new).push(r.get(1));
    }
    Ok(())
}

/// The passages of each `(pattern, held)` pair's pattern, looked for among
/// the read passages of the pattern it holds (a passage holding the
/// pattern holds every part of it): one statement for all pairs, none when
/// every such list is empty.
async fn within_lists(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    plan: &SubstringPlan,
    pairs: &[(usize, usize)],
    lists: &mut [Option<Vec<String>>],
) -> Result<(), CoreError> {
    let mut slots: Vec<i64> = Vec::new();
    let mut passages: Vec<String> = Vec::new();
    let mut likes: Vec<String> = Vec::new();
    for (slot, &(i, j)) in pairs.iter().enumerate() {
        likes.push(like_anywhere(&plan.patterns[i]));
        for p in lists[j].iter().flatten() {
            slots.push(slot as i64 + 1);
            passages.push(p.clone());
        }
    }
    for &(i, _) in pairs {
        lists[i] = Some(Vec::new());
    }
    if passages.is_empty() {
        return Ok(());
    }
    // The same rows as `substring_matches` would return: text passages of
    // this knowledge base (the tenant's, by row security) whose match text
    // holds the pattern.
    for r in tx
        .query(
            "SELECT c.slot, p.passage
             FROM unnest($2::bigint[], $3::text[]) AS c(slot, passage)
             JOIN passages p ON p.kb_id = $1 AND p.passage = c.passage
             WHERE p.kind < 2 AND p.match_text LIKE ($4::text[])[c.slot]",
            &[&f.kb, &slots, &passages, &likes],
        )
        .await
        .map_err(pg)?
    {
        let (i, _) = pairs[(r.get::<_, i64>(0) - 1) as usize];
        lists[i].get_or_insert_with(Vec::new).push(r.get(1));
    }
    Ok(())
}

/// The engine's snapshot order of a passage (ties rank in it).
type Order = (i16, i64, uuid::Uuid, i32);

/// A passage the path may read.
struct Candidate<'a> {
    passage: &'a str,
    /// It may hold the whole query.
    whole: bool,
    /// The weight of the key terms it may hold.
    promise: f64,
}

/// The texts of the first `cap` candidates the filter lets through, in
/// the candidates' order: read in batches, so that a selective filter
/// reads on until it has `cap` or there are no more.
async fn read_texts(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    eligible: &[Candidate<'_>],
    cap: usize,
) -> Result<Vec<(String, String, Order)>, CoreError> {
    let sql = format!(
        "SELECT p.passage, p.match_text, p.kind, p.created_at, p.grp, p.ordinal
         FROM unnest($8::text[]) WITH ORDINALITY AS c(passage, i)
         JOIN passages p ON p.kb_id = $1 AND p.passage = c.passage
         WHERE {FILTER} AND p.kind < 2
         ORDER BY c.i"
    );
    let mut out: Vec<(String, String, Order)> = Vec::new();
    let mut from = 0;
    let mut batch = cap;
    while from < eligible.len() && out.len() < cap {
        let to = (from + batch).min(eligible.len());
        let ids: Vec<&str> = eligible[from..to].iter().map(|c| c.passage).collect();
        for r in tx.query(&sql, &f.params(&[&ids])).await.map_err(pg)? {
            if out.len() < cap {
                out.push((r.get(0), r.get(1), (r.get(2), r.get(3), r.get(4), r.get(5))));
            }
        }
        from = to;
        batch = batch.saturating_mul(4);
    }
    Ok(out)
}
