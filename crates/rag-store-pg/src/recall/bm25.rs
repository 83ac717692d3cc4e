//! BM25 inside PostgreSQL, with MaxScore's exact pruning.
//!
//! Scoring every posting of every query term costs what the terms' lists
//! cost: at 100,000 passages a question's common words bring hundreds of
//! thousands of rows to aggregate. A passage holding none of a set of
//! "essential" terms scores at most the sum of the other terms' upper
//! bounds; when that sum is below a score some `k` passages already reach,
//! no such passage can be in the top `k`. So the statement takes its
//! candidates from the essential terms' lists only and looks the other
//! terms up for those candidates (primary-key probes, or a semi-join for a
//! list shorter than the probes would cost), which scores each candidate
//! exactly as scoring every posting would.
//!
//! The threshold comes from a first, cheap pass whose candidates are the
//! rarest terms' passages: its `k`-th score is a real passage's score, so
//! a lower bound of the true `k`-th. When the terms that bound makes
//! essential are all among the first pass's, its answer is already exact;
//! otherwise a second pass takes its candidates from exactly those terms.

use super::*;

/// The first pass takes the rarest terms while their lists hold at most
/// this many postings per result asked for (and always one term).
const FIRST_PASS_POSTINGS_PER_RESULT: i64 = 16;
/// A non-essential term whose list is longer than this many times the
/// candidates is probed passage by passage; a shorter one is read whole and
/// joined with the candidates.
const PROBE_RATIO: i64 = 8;
/// The filter is applied to this many of a pass's best passages per result
/// asked for (plus 64) before it is applied to all.
const FILTERED_FIRST_PER_RESULT: i64 = 4;
/// Bounds are compared with this much room for rounding (PostgreSQL sums
/// in double precision in another order than the bounds are summed here).
const ROUNDING: f64 = 1e-9;

/// `tf·(k1+1) / (tf + k1·(1 − b + b·len/avg))` in SQL (`$11` k1, `$12` b).
fn sat(tf: &str, len: &str, avg: &str) -> String {
    format!("(({tf})::float8 * ($11::float8 + 1) / (({tf})::float8 + $11::float8 * (1 - $12::float8 + $12::float8 * ({len})::float8 / {avg})))")
}

/// Lucene's idf over `st.n` passages.
fn idf(df: &str) -> String {
    format!("ln(1 + (st.n - {df} + 0.5) / ({df} + 0.5))")
}

/// [`idf`] in Rust, for the bounds.
fn idf_of(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A distinct query term as the pruning sees it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Bound {
    pub text: String,
    /// The most its occurrences in the query can add to a passage's score.
    pub max: f64,
    /// Whether it may find a passage on its own (not a stop word).
    pub retrieves: bool,
    /// The length of its posting list.
    pub postings: i64,
}

/// A term's statistics from `lex_terms`.
struct TermStats {
    df_title: f64,
    df_body: f64,
    df_tags: f64,
    df_grams: f64,
    df_word: f64,
    df_any: i64,
}

/// Each distinct known term's bound, or `None` when the parameters give no
/// bound (a saturation that is not bounded by `k1 + 1`, negative weights):
/// then nothing is pruned.
fn bounds(
    terms: &[QueryTerm],
    stats: &std::collections::HashMap<String, TermStats>,
    n: f64,
    params: &rag_core::Bm25Params,
) -> Option<Vec<Bound>> {
    let (k1, b, ngw) = (
        f64::from(params.k1),
        f64::from(params.b),
        f64::from(params.ngram_weight),
    );
    if !(k1 >= 0.0 && (0.0..=1.0).contains(&b) && k1.is_finite()) {
        return None;
    }
    let sat = k1 + 1.0;
    let positive = |x: f64| if x > 0.0 { x } else { 0.0 };
    let mut out: Vec<Bound> = Vec::new();
    for t in terms {
        let Some(s) = stats.get(&t.text) else {
            continue;
        };
        let w = f64::from(t.weight);
        if !w.is_finite() || w < 0.0 {
            return None;
        }
        let max = if t.gram {
            if ngw <= 0.0 || s.df_grams == 0.0 {
                0.0
            } else {
                w * ngw * positive(idf_of(n, s.df_grams)) * sat
            }
        } else {
            match params.fields {
                rag_core::FieldMode::Flat => {
                    if s.df_word == 0.0 {
                        0.0
                    } else {
                        w * positive(idf_of(n, s.df_word)) * sat
                    }
                }
                rag_core::FieldMode::MultiField { title, body, tags } => {
                    let field = |fw: f32, df: f64| {
                        let fw = f64::from(fw);
                        if fw > 0.0 && df > 0.0 {
                            fw * positive(idf_of(n, df)) * sat
                        } else {
                            0.0
                        }
                    };
                    w * (field(title, s.df_title) + field(body, s.df_body) + field(tags, s.df_tags))
                }
            }
        };
        if !max.is_finite() {
            return None;
        }
        match out.iter_mut().find(|b| b.text == t.text) {
            Some(b) => {
                b.max += max;
                b.retrieves |= t.retrieves;
            }
            None => out.push(Bound {
                text: t.text.clone(),
                max,
                retrieves: t.retrieves,
                postings: s.df_any,
            }),
        }
    }
    Some(out)
}

/// The terms whose lists must supply the candidates once some `k` passages
/// score `threshold`: every retrieving term but the weakest ones whose
/// bounds, with every stop word's, add up to less than the threshold (a
/// passage holding none of the returned terms cannot reach it). With no
/// threshold, every retrieving term.
pub(super) fn essential(bounds: &[Bound], threshold: f64) -> Vec<&str> {
    let mut retrieving: Vec<&Bound> = bounds.iter().filter(|b| b.retrieves).collect();
    retrieving.sort_by(|a, b| a.max.total_cmp(&b.max).then(a.text.cmp(&b.text)));
    let mut below: f64 = bounds.iter().filter(|b| !b.retrieves).map(|b| b.max).sum();
    let room = threshold * (1.0 - ROUNDING) - ROUNDING;
    let mut skipped = 0;
    for b in &retrieving {
        if below + b.max < room {
            below += b.max;
            skipped += 1;
        } else {
            break;
        }
    }
    retrieving[skipped..]
        .iter()
        .map(|b| b.text.as_str())
        .collect()
}

/// The first pass's candidate terms: the retrieving terms with the
/// highest bounds (the rarest), while their lists stay within `budget`
/// postings; at least one.
pub(super) fn first_pass(bounds: &[Bound], budget: i64) -> Vec<&str> {
    let mut retrieving: Vec<&Bound> = bounds.iter().filter(|b| b.retrieves).collect();
    retrieving.sort_by(|a, b| b.max.total_cmp(&a.max).then(a.text.cmp(&b.text)));
    let mut out = Vec::new();
    let mut postings = 0i64;
    for b in retrieving {
        if !out.is_empty() && postings.saturating_add(b.postings) > budget {
            break;
        }
        postings = postings.saturating_add(b.postings);
        out.push(b.text.as_str());
    }
    out
}

/// How one pass reads each term: the candidates' terms by their lists, the
/// others probed per candidate or joined with the candidates.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Reads<'a> {
    pub candidates: Vec<&'a str>,
    pub probed: Vec<&'a str>,
    pub joined: Vec<&'a str>,
}

pub(super) fn reads<'a>(bounds: &'a [Bound], candidates: &[&'a str]) -> Reads<'a> {
    let cost: i64 = bounds
        .iter()
        .filter(|b| candidates.contains(&b.text.as_str()))
        .map(|b| b.postings)
        .sum();
    let mut r = Reads {
        candidates: candidates.to_vec(),
        ..Reads::default()
    };
    for b in bounds {
        if candidates.contains(&b.text.as_str()) {
            continue;
        }
        if b.postings > cost.saturating_mul(PROBE_RATIO) {
            r.probed.push(&b.text);
        } else {
            r.joined.push(&b.text);
        }
    }
    r
}

/// BM25 with OR semantics over `terms` (duplicates count twice, as in the
/// in-memory index), best first; each hit lists the terms it contains.
pub(super) async fn bm25(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    terms: &[QueryTerm],
    params: &rag_core::Bm25Params,
    k: usize,
) -> Result<Vec<Hit>, CoreError> {
    if terms.is_empty() || k == 0 {
        return Ok(Vec::new());
    }
    let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
    // Enough memory to aggregate a pass's rows in a hash table (this
    // transaction only).
    tx.execute("SELECT set_config('work_mem', '64MB', true)", &[])
        .await
        .map_err(pg)?;
    let rows = tx
        .query(
            "SELECT t.term, t.df_title, t.df_body, t.df_tags, t.df_grams, t.df_word, t.df_any,
                    (SELECT greatest(n, 1)::float8 FROM lex_stats WHERE kb_id = $1)
             FROM lex_terms t WHERE t.kb_id = $1 AND t.term = ANY($2)",
            &[&f.kb, &texts],
        )
        .await
        .map_err(pg)?;
    let Some(n) = rows
        .first()
        .map(|r| r.get::<_, Option<f64>>(7).unwrap_or(1.0))
    else {
        return Ok(Vec::new());
    };
    let stats: std::collections::HashMap<String, TermStats> = rows
        .iter()
        .map(|r| {
            let df = |i: usize| f64::from(r.get::<_, i32>(i));
            (
                r.get(0),
                TermStats {
                    df_title: df(1),
                    df_body: df(2),
                    df_tags: df(3),
                    df_grams: df(4),
                    df_word: df(5),
                    df_any: i64::from(r.get::<_, i32>(6)),
                },
            )
        })
        .collect();
    let Some(bounds) = bounds(terms, &stats, n, params) else {
        let all: Vec<&str> = stats.keys().map(String::as_str).collect();
        return scored(tx, f, terms, params, k, &all, &[], &[]).await;
    };
    let everything = essential(&bounds, 0.0);
    let budget = FIRST_PASS_POSTINGS_PER_RESULT.saturating_mul(k as i64);
    let first = first_pass(&bounds, budget);
    let r = reads(&bounds, &first);
    let hits = scored(tx, f, terms, params, k, &r.candidates, &r.probed, &r.joined).await?;
    if first.len() == everything.len() {
        return Ok(hits);
    }
    let threshold = if hits.len() >= k {
        hits[k - 1].score
    } else {
        0.0
    };
    let needed = essential(&bounds, threshold);
    if needed.iter().all(|t| first.contains(t)) {
        return Ok(hits);
    }
    let r = reads(&bounds, &needed);
    scored(tx, f, terms, params, k, &r.candidates, &r.probed, &r.joined).await
}

/// One pass: the passages of the `candidates` terms' lists, each scored
/// over every query term (the `probed` and `joined` terms looked up for
/// those passages only), filtered, best first.
#[allow(clippy::too_many_arguments)]
async fn scored(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    terms: &[QueryTerm],
    params: &rag_core::Bm25Params,
    k: usize,
    candidates: &[&str],
    probed: &[&str],
    joined: &[&str],
) -> Result<Vec<Hit>, CoreError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
    let weights: Vec<f64> = terms.iter().map(|t| f64::from(t.weight)).collect();
    let grams: Vec<bool> = terms.iter().map(|t| t.gram).collect();
    let retrieves: Vec<bool> = terms.iter().map(|t| t.retrieves).collect();
    let (multi, [ft, fb, fc]) = match params.fields {
        rag_core::FieldMode::Flat => (false, [0.0; 3]),
        rag_core::FieldMode::MultiField { title, body, tags } => {
            (true, [title, body, tags].map(f64::from))
        }
    };
    let (k1, b, ngw) = (
        f64::from(params.k1),
        f64::from(params.b),
        f64::from(params.ngram_weight),
    );
    let limit = k as i64;
    // The best few passages are filtered first; all of them when the
    // filter leaves fewer than `k` of those.
    let mut cut: Option<i64> = Some(
        limit
            .saturating_mul(FILTERED_FIRST_PER_RESULT)
            .saturating_add(64),
    );
    loop {
        let rows = tx
            .query(
                scored_sql(),
                &f.params(&[
                    &texts,
                    &weights,
                    &grams,
                    &k1,
                    &b,
                    &multi,
                    &ft,
                    &fb,
                    &fc,
                    &ngw,
                    &limit,
                    &retrieves,
                    &candidates,
                    &probed,
                    &joined,
                    &cut,
                    &f.only_in,
                ]),
            )
            .await
            .map_err(pg)?;
        let partial = rows.first().is_some_and(|r| r.get::<_, bool>(3));
        let hits: Vec<Hit> = rows
            .iter()
            .filter(|r| r.get::<_, Option<&str>>(0).is_some())
            .enumerate()
            .map(|(i, r)| {
                let found: Vec<String> = r.get(2);
                // The terms a hit contains, in query order (as the in-memory index lists them).
                let mut matched: Vec<String> = terms
                    .iter()
                    .filter(|t| t.retrieves && found.contains(&t.text))
                    .map(|t| t.text.clone())
                    .collect();
                matched.dedup();
                Ok(Hit {
                    id: passage_id(r.get(0))?,
                    rank: i as u32 + 1,
                    score: r.get(1),
                    matched,
                })
            })
            .collect::<Result<_, CoreError>>()?;
        if hits.len() >= k || !partial || cut.is_none() {
            return Ok(hits);
        }
        cut = None;
    }
}

/// A passage's language from its script counts, as
/// `rag_lexical::language_of_script` judges it: 0 unknown, 1 Chinese, 2
/// English, 3 mixed (a Han character weighs about four letters).
const LANGUAGE: &str = "CASE WHEN p.han = 0 AND p.latin / 4 = 0 THEN 0
                             WHEN p.han >= 4 * (p.latin / 4) THEN 1
                             WHEN p.latin / 4 >= 4 * p.han THEN 2 ELSE 3 END";

/// The statement of one pass (built once).
fn scored_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        // Each term's idf is computed once, in `qt`, not for every posting
        // row (the same expression over the same values: the same bits).
        let field = |tf: &str, idf: &str, len: &str, avg: &str, w: &str| {
            format!(
                "CASE WHEN {tf} > 0 AND {w} > 0 THEN {w} * {idf} * {} ELSE 0 END",
                sat(tf, len, avg)
            )
        };
        let score = format!(
            "CASE WHEN m.gram THEN
                 CASE WHEN $17::float8 <= 0 OR m.df_grams = 0 OR m.td = 0 THEN 0 ELSE m.w * $17::float8 * {gram_idf} * {gram_sat} END
             WHEN NOT $13::boolean THEN
                 CASE WHEN m.df_word = 0 OR m.ta + m.tb + m.tc = 0 THEN 0 ELSE m.w * {word_idf} * {word_sat} END
             ELSE m.w * ({ta} + {tb} + {tc})
             END",
            gram_idf = "m.idf_grams",
            gram_sat = sat("m.td", "m.lg", "st.ag"),
            word_idf = "m.idf_word",
            word_sat = sat("m.ta + m.tb + m.tc", "m.lt + m.lb + m.lc", "st.aw"),
            ta = field("m.ta", "m.idf_title", "m.lt", "st.at", "$14::float8"),
            tb = field("m.tb", "m.idf_body", "m.lb", "st.ab", "$15::float8"),
            tc = field("m.tc", "m.idf_tags", "m.lc", "st.ac", "$16::float8"),
        );
        let idfs = ["title", "body", "tags", "grams", "word"]
            .map(|f| format!("{} AS idf_{f}", idf(&format!("t.df_{f}"))))
            .join(", ");
        let columns = "po.passage, po.tf_title AS ta, po.tf_body AS tb, po.tf_tags AS tc, po.tf_grams AS td,
                       po.len_title AS lt, po.len_body AS lb, po.len_tags AS lc, po.len_grams AS lg";
        format!(
            "WITH st AS (
                 SELECT greatest(n, 1)::float8 AS n,
                        greatest(sum_title::float8 / greatest(n, 1), 1) AS at, greatest(sum_body::float8 / greatest(n, 1), 1) AS ab,
                        greatest(sum_tags::float8 / greatest(n, 1), 1) AS ac, greatest(sum_grams::float8 / greatest(n, 1), 1) AS ag,
                        greatest((sum_title + sum_body + sum_tags)::float8 / greatest(n, 1), 1) AS aw
                 FROM lex_stats WHERE kb_id = $1
             ),
             qt AS (
                 SELECT q.term, q.w, q.gram, q.retrieves, t.df_title, t.df_body, t.df_tags, t.df_grams, t.df_word,
                        {idfs}
                 FROM unnest($8::text[], $9::float8[], $10::boolean[], $19::boolean[]) AS q(term, w, gram, retrieves)
                 JOIN lex_terms t ON t.kb_id = $1 AND t.term = q.term
                 CROSS JOIN st
             ),
             -- The candidates: the passages of the candidate terms' lists.
             cand AS MATERIALIZED (
                 SELECT DISTINCT po.passage FROM postings po
                 WHERE po.kb_id = $1 AND po.term = ANY($20::text[])
             ),
             m AS (
                 -- One index range per candidate term, whatever the statistics
                 -- say (OFFSET 0 keeps each lateral subquery, and so the plan,
                 -- as written).
                 SELECT po.*, qt.*
                 FROM qt CROSS JOIN LATERAL (
                     SELECT {columns} FROM postings po WHERE po.kb_id = $1 AND po.term = qt.term
                     OFFSET 0
                 ) po
                 WHERE qt.term = ANY($20::text[])
                 UNION ALL
                 -- A long list: one primary-key probe per candidate.
                 SELECT po.*, qt.*
                 FROM qt CROSS JOIN cand c CROSS JOIN LATERAL (
                     SELECT {columns} FROM postings po
                     WHERE po.kb_id = $1 AND po.term = qt.term AND po.passage = c.passage
                     OFFSET 0
                 ) po
                 WHERE qt.term = ANY($21::text[])
                 UNION ALL
                 -- A short list: read whole, kept for the candidates.
                 SELECT po.*, qt.*
                 FROM qt CROSS JOIN LATERAL (
                     SELECT {columns} FROM postings po
                     WHERE po.kb_id = $1 AND po.term = qt.term AND po.passage IN (SELECT passage FROM cand)
                     OFFSET 0
                 ) po
                 WHERE qt.term = ANY($22::text[])
             ),
             -- Each row's score once, then each passage's.
             ms AS (
                 SELECT m.passage, m.term, m.retrieves, {score} AS sc
                 FROM m CROSS JOIN st
             ),
             s AS MATERIALIZED (
                 SELECT passage, sum(sc) AS score, array_agg(term) AS terms
                 FROM ms
                 GROUP BY passage
                 -- Stop words only add to the score of passages other terms find.
                 HAVING sum(sc) > 0 AND bool_or(retrieves AND sc > 0)
             ),
             -- The filter reads each passage's row: only for the best `$23`
             -- (and any tied with the last of them; all when NULL).
             cut AS (
                 SELECT * FROM s
                 WHERE s.score >= (SELECT min(score) FROM (SELECT score FROM s ORDER BY score DESC LIMIT $23::bigint) t)
             )
             SELECT r.passage, r.score, r.terms, (SELECT count(*) FROM cut) < (SELECT count(*) FROM s) AS partial
             FROM (SELECT 1) one LEFT JOIN LATERAL (
                 SELECT cut.passage, cut.score, cut.terms
                 FROM cut CROSS JOIN LATERAL (
                     SELECT p.kind, p.created_at, p.grp, p.ordinal FROM passages p
                     WHERE p.passage = cut.passage AND {FILTER} AND p.kind < 2
                       AND ($24::int = 0 OR $24::int = {LANGUAGE})
                     OFFSET 0
                 ) p
                 ORDER BY cut.score DESC, {SNAPSHOT_ORDER}
                 LIMIT $18::bigint
             ) r ON true"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str, max: f64, retrieves: bool, postings: i64) -> Bound {
        Bound {
            text: text.into(),
            max,
            retrieves,
            postings,
        }
    }

    /// A rare, a middling and a common term, and a stop word.
    fn four_terms() -> [Bound; 4] {
        [
            b("rare", 9.0, true, 10),
            b("mid", 3.0, true, 1_000),
            b("common", 1.0, true, 50_000),
            b("the", 0.5, false, 90_000),
        ]
    }

    #[test]
    fn the_weakest_terms_are_left_out_while_their_bounds_stay_below_the_threshold() {
        let bounds = four_terms();
        // No threshold: every retrieving term, never the stop word.
        let mut all = essential(&bounds, 0.0);
        all.sort();
        assert_eq!(all, ["common", "mid", "rare"]);
        // 0.5 + 1.0 < 2 but 0.5 + 1.0 + 3.0 is not below 4.5.
        assert_eq!(essential(&bounds, 2.0), ["mid", "rare"]);
        assert_eq!(essential(&bounds, 4.5), ["mid", "rare"]);
        assert_eq!(essential(&bounds, 4.6), ["rare"]);
        // A bound equal to the threshold is not below it: a passage with
        // that score could tie with the k-th.
        assert_eq!(essential(&bounds, 1.5), ["common", "mid", "rare"]);
    }

    #[test]
    fn the_first_pass_takes_the_rarest_terms_within_its_budget() {
        let bounds = four_terms();
        assert_eq!(first_pass(&bounds, 5), ["rare"]);
        assert_eq!(first_pass(&bounds, 1_010), ["rare", "mid"]);
        assert_eq!(first_pass(&bounds, 1_000_000), ["rare", "mid", "common"]);
        let r = reads(&bounds, &["rare"]);
        assert_eq!(r.probed, ["mid", "common", "the"]);
        assert!(r.joined.is_empty());
        let r = reads(&bounds, &["rare", "mid"]);
        assert_eq!(r.probed, ["common", "the"]);
        let r = reads(&bounds, &["common", "mid", "rare"]);
        assert_eq!(r.joined, ["the"]);
    }

    #[test]
    fn bounds_add_up_a_terms_occurrences_and_refuse_unbounded_parameters() {
        let stats: std::collections::HashMap<String, TermStats> = [(
            "a".to_owned(),
            TermStats {
                df_title: 0.0,
                df_body: 3.0,
                df_tags: 0.0,
                df_grams: 0.0,
                df_word: 3.0,
                df_any: 3,
            },
        )]
        .into_iter()
        .collect();
        let t = |weight: f32| QueryTerm {
            text: "a".into(),
            weight,
            gram: false,
            retrieves: true,
        };
        let params = rag_core::Bm25Params::default();
        let one = bounds(&[t(1.0)], &stats, 10.0, &params).unwrap();
        let two = bounds(&[t(1.0), t(1.0)], &stats, 10.0, &params).unwrap();
        assert_eq!(one.len(), 1);
        assert!((two[0].max - 2.0 * one[0].max).abs() < 1e-12);
        let want = idf_of(10.0, 3.0) * (f64::from(params.k1) + 1.0);
        assert!((one[0].max - want).abs() < 1e-12);
        // An unknown term has no bound; it has no postings either.
        let none = QueryTerm {
            text: "zz".into(),
            ..t(1.0)
        };
        assert!(bounds(&[none], &stats, 10.0, &params).unwrap().is_empty());
        let odd = rag_core::Bm25Params { b: 1.5, ..params };
        assert!(bounds(&[t(1.0)], &stats, 10.0, &odd).is_none());
        assert!(bounds(&[t(-1.0)], &stats, 10.0, &params).is_none());
    }
}
