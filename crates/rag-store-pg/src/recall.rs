//! Recall inside PostgreSQL ([`StoreRecall`]): BM25 over the stored term
//! statistics, the synonym and typo paths on top of it (pg_trgm similarity
//! over the vocabulary, pinyin keys for Chinese homophones), the substring
//! path (pg_trgm-indexed `LIKE`), and dense recall with pgvector (HNSW or
//! exact). The scoring formulas are the in-memory index's, so rankings
//! agree with the embedded store; README "PostgreSQL" lists where they
//! legitimately differ.

use crate::error::pg;
use crate::lex;
use crate::open::{begin, owned, PgStore};
use crate::vector::{VectorOwned, VectorRef};
use async_trait::async_trait;
use rag_core::{
    CoreError, Hit, KbId, PassageId, PathKind, QueryTerm, RankedList, SearchCtx, StoreQuery,
    StoreRecall, TenantId, TokenKind, Viewer,
};
use rag_lexical::{
    han_windows, no_correction_note, swap_variants, typo_corrections, SubstringPlan,
    HOMOPHONE_SIMILARITY, MAX_CORRECTIONS, TYPO_CANDIDATES,
};
use rag_text::pinyin_key;
use tokio_postgres::types::ToSql;
use tokio_postgres::Transaction;

mod bm25;
mod substring;
use bm25::bm25;
use substring::substring_path;

/// How many candidates the HNSW search keeps (pgvector's `hnsw.ef_search`);
/// chosen for recall@10 ≥ 0.98 against exact search (README "PostgreSQL").
pub const HNSW_EF_SEARCH: usize = 100;
/// Settings of an approximate search, local to its transaction: the
/// candidate list, iterative scans (a filtered search keeps walking the
/// graph until it has `k` rows that pass), and no sort, so the planner takes
/// the index's order rather than sorting all of a knowledge base's vectors
/// (which is what exact search is for).
const HNSW_SETTINGS: &str = "SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'strict_order', true),
                                    set_config('enable_sort', 'off', true)";

/// The filter every path applies, as SQL over `passages p` with parameters
/// `$1`…`$7` (see [`FilterArgs`]).
const FILTER: &str = "p.kb_id = $1 AND ($2 OR p.owner IS NULL OR p.owner = $3)
    AND (p.valid_from IS NULL OR $4 >= p.valid_from) AND (p.valid_until IS NULL OR $4 <= p.valid_until)
    AND ($5::bigint IS NULL OR p.created_at >= $5) AND ($6::bigint IS NULL OR p.created_at <= $6)
    AND p.tags_lc @> $7::text[]";

/// Ties rank in the engine's snapshot order.
const SNAPSHOT_ORDER: &str = "p.kind, p.created_at, p.grp, p.ordinal";

#[derive(Clone)]
struct FilterArgs {
    kb: uuid::Uuid,
    everything: bool,
    owner: Option<String>,
    at: i64,
    after: Option<i64>,
    before: Option<i64>,
    tags: Vec<String>,
    /// BM25 keeps only passages written in this language (the translated
    /// path's: 1 Chinese, 2 English; 0 any), judged by each passage's
    /// `han` and `latin` counts as the in-memory index judges them.
    only_in: i32,
}

impl FilterArgs {
    fn new(kb: KbId, ctx: &SearchCtx) -> Self {
        let (everything, owner) = ctx.viewer.sql_visibility();
        let owner = owner.map(str::to_owned);
        FilterArgs {
            kb: kb.0,
            everything,
            owner,
            at: ctx.filters.as_of.unwrap_or(ctx.now),
            after: ctx.filters.created_after,
            before: ctx.filters.created_before,
            tags: ctx
                .filters
                .tags
                .iter()
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
            only_in: 0,
        }
    }

    /// `$1`…`$7`, followed by a path's own parameters.
    fn params<'a>(&'a self, rest: &[&'a (dyn ToSql + Sync)]) -> Vec<&'a (dyn ToSql + Sync)> {
        let mut v: Vec<&(dyn ToSql + Sync)> = vec![
            &self.kb,
            &self.everything,
            &self.owner,
            &self.at,
            &self.after,
            &self.before,
            &self.tags,
        ];
        v.extend_from_slice(rest);
        v
    }
}

/// `LIKE` pattern matching `text` anywhere.
fn like_anywhere(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('%');
    s
}

pub(crate) fn passage_id(text: &str) -> Result<PassageId, CoreError> {
    PassageId::parse(text)
        .ok_or_else(|| crate::error::corrupt("passages", "passage", text.to_owned()))
}

impl PgStore {
    /// Rebuilds the knowledge base's recall rows when they were made by
    /// another analysis or not at all (data from before migration 3).
    pub(crate) async fn ensure_current(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<(), CoreError> {
        {
            let mut conn = self.conn().await?;
            let tx = begin(&mut conn, &tenant.0, false).await?;
            let current = lex::current(&tx, kb).await?;
            tx.commit().await.map_err(pg)?;
            if current {
                return Ok(());
            }
        }
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        if tx
            .query_opt(
                "SELECT 1 FROM kbs WHERE id = $1 AND tenant = $2 FOR UPDATE",
                &[&kb.0, &tenant.0],
            )
            .await
            .map_err(pg)?
            .is_none()
        {
            return Err(rag_core::UserError::UnknownKb {
                name: kb.to_string(),
            }
            .into());
        }
        // Another process may have rebuilt them while this one waited for the lock.
        lex::sync(&tx, tenant, kb, &self.analyzer, lex::Dirty::default()).await?;
        tx.commit().await.map_err(pg)
    }
}

/// Whether the viewer sees every passage of the knowledge base: the
/// operator, or anyone when no passage is restricted to an owner (one probe
/// of the partial index `passages_restricted`). Then the vocabulary can be
/// read as it is; else only through passages the viewer may see.
async fn sees_all(tx: &Transaction<'_>, f: &FilterArgs) -> Result<bool, CoreError> {
    if f.everything {
        return Ok(true);
    }
    let row = tx
        .query_one(
            "SELECT NOT EXISTS (SELECT 1 FROM passages WHERE kb_id = $1 AND owner IS NOT NULL)",
            &[&f.kb],
        )
        .await
        .map_err(pg)?;
    Ok(row.get(0))
}

/// A term's text (`$t`) occurs in a passage the viewer (`$owner`, unless
/// it sees all) may see: the in-memory index's `term_visible`.
fn visible_posting(term: &str, owner: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM postings po JOIN passages p ON p.kb_id = po.kb_id AND p.passage = po.passage
                 WHERE po.kb_id = $1 AND po.term = ({term}) COLLATE \"C\" AND (p.owner IS NULL OR p.owner = {owner}))"
    )
}

/// Which of `terms` the knowledge base's vocabulary holds, as far as the
/// viewer may know: the words of another owner's documents stay unknown
/// (`all`: the viewer sees every passage, see [`sees_all`]).
async fn known(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    all: bool,
    terms: &[&str],
) -> Result<std::collections::HashSet<String>, CoreError> {
    if terms.is_empty() {
        return Ok(Default::default());
    }
    let rows = if all {
        tx.query(
            "SELECT term FROM lex_terms WHERE kb_id = $1 AND term = ANY($2)",
            &[&f.kb, &terms],
        )
        .await
        .map_err(pg)?
    } else {
        let sql = format!(
            "SELECT t.term FROM unnest($2::text[]) AS t(term) WHERE {}",
            visible_posting("t.term", "$3")
        );
        tx.query(&sql, &[&f.kb, &terms, &f.owner])
            .await
            .map_err(pg)?
    };
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The query's own terms, with multiplicity.
fn query_terms(q: &rag_core::AnalyzedQuery) -> Vec<QueryTerm> {
    q.tokens
        .iter()
        .map(|t| QueryTerm {
            text: t.text.clone(),
            weight: t.kind.query_weight(),
            gram: t.kind.is_bigram(),
            retrieves: t.kind.retrieves(),
        })
        .collect()
}

async fn bm25_path(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
) -> Result<RankedList, CoreError> {
    let terms = query_terms(q.query);
    let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
    let all = sees_all(tx, f).await?;
    let have = known(tx, f, all, &texts).await?;
    let unknown: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !have.contains(*t))
        .collect();
    let mut notes = Vec::new();
    if !unknown.is_empty() {
        notes.push(format!("not in the vocabulary: {}", unknown.join(", ")));
    }
    let hits = bm25(tx, f, &terms, &q.params.bm25, q.k).await?;
    Ok(RankedList {
        path: PathKind::Bm25,
        hits,
        notes,
    })
}

/// The translated path: BM25 over the translations the engine found
/// (`StoreQuery::expansions`), without the query's own terms.
async fn translated_path(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
) -> Result<RankedList, CoreError> {
    let Some((terms, notes)) = &q.expansions else {
        return Ok(RankedList {
            path: PathKind::Translated,
            hits: vec![],
            notes: vec!["no word of the question has a dictionary translation".into()],
        });
    };
    // Passages in the other language only: those in the question's
    // language, or mixed, are BM25's to find.
    let f = FilterArgs {
        only_in: match rag_lexical::other_language(q.query.language) {
            rag_core::Language::Zh => 1,
            rag_core::Language::En => 2,
            _ => 0,
        },
        ..f.clone()
    };
    let texts: Vec<&str> = terms.iter().map(|t| t.text.as_str()).collect();
    let all = sees_all(tx, &f).await?;
    let mut notes = notes.clone();
    if known(tx, &f, all, &texts).await?.is_empty() {
        notes.push(rag_lexical::NOTHING_HERE.into());
    }
    let hits = bm25(tx, &f, terms, &q.params.bm25, q.k).await?;
    Ok(RankedList {
        path: PathKind::Translated,
        hits,
        notes,
    })
}

async fn synonym_path(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
) -> Result<RankedList, CoreError> {
    let Some((expansion, notes)) = &q.expansions else {
        return Ok(RankedList {
            path: PathKind::Synonym,
            hits: vec![],
            notes: vec!["no synonym fired".into()],
        });
    };
    let mut terms = query_terms(q.query);
    terms.extend(expansion.iter().cloned());
    let hits = bm25(tx, f, &terms, &q.params.bm25, q.k).await?;
    Ok(RankedList {
        path: PathKind::Synonym,
        hits,
        notes: notes.clone(),
    })
}

/// Typo tolerance: unknown English words corrected by edit distance among
/// their most similar vocabulary words by pg_trgm similarity (as the
/// in-memory index does: [`typo_corrections`]), Chinese character windows
/// by pinyin.
async fn fuzzy_path(
    tx: &Transaction<'_>,
    kb: KbId,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
) -> Result<RankedList, CoreError> {
    let threshold = q.params.fuzzy_threshold;
    let words: Vec<&str> = q
        .query
        .tokens
        .iter()
        .filter(|t| {
            matches!(t.kind, TokenKind::Word | TokenKind::Ident) && t.text.chars().count() >= 3
        })
        .map(|t| t.text.as_str())
        .collect();
    let windows = han_windows(q.query);
    // The words with two neighbouring letters swapped, looked up with the
    // rest in one statement: those the vocabulary holds join the
    // candidates of an unknown word, as in the in-memory index.
    let swaps: Vec<Vec<String>> = words.iter().map(|w| swap_variants(w)).collect();
    let mut probe: Vec<&str> = words.clone();
    probe.extend(swaps.iter().flatten().map(String::as_str));
    for w in &windows {
        probe.push(&w.text);
        probe.extend(w.cuts.iter().map(String::as_str));
    }
    probe.sort_unstable();
    probe.dedup();
    // Owner scope before anything is looked up: another owner's words are
    // neither known (so not "typos" to correct) nor corrections.
    let all = sees_all(tx, f).await?;
    let have = known(tx, f, all, &probe).await?;

    // (from, to, weight), in the in-memory index's order: words first, then windows.
    let mut corrections: Vec<(String, String, f32)> = Vec::new();
    // `%` uses the index; the explicit comparison keeps the bound inclusive.
    tx.execute(
        "SELECT set_config('pg_trgm.similarity_threshold', $1, true)",
        &[&format!("{}", (threshold - 1e-6).max(0.0))],
    )
    .await
    .map_err(pg)?;
    // Every candidate above the threshold in the function's order, the
    // visible ones kept, then the first few: as the in-memory index does.
    let similar_visible = format!(
        "SELECT s.term, s.similarity FROM similar_terms($1, $2, $3, NULL::bigint) WITH ORDINALITY AS s(term, similarity, n)
         WHERE {} ORDER BY s.n LIMIT $4",
        visible_posting("s.term", "$5")
    );
    let mut uncorrected = Vec::new();
    for (w, swaps) in words.iter().zip(swaps).filter(|(w, _)| !have.contains(**w)) {
        let rows = if all {
            tx.query(
                "SELECT term, similarity FROM similar_terms($1, $2, $3, $4)",
                &[&kb.0, w, &threshold, &(TYPO_CANDIDATES as i64)],
            )
            .await
        } else {
            tx.query(
                &similar_visible,
                &[&kb.0, w, &threshold, &(TYPO_CANDIDATES as i64), &f.owner],
            )
            .await
        }
        .map_err(pg)?;
        let mut candidates: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        for v in swaps {
            if have.contains(&v) && !candidates.contains(&v) {
                candidates.push(v);
            }
        }
        let found = typo_corrections(w, &candidates);
        if found.is_empty() {
            uncorrected.push(*w);
        }
        corrections.extend(
            found
                .into_iter()
                .map(|(to, weight)| ((*w).to_owned(), to, weight)),
        );
    }
    let unknown_windows: Vec<(&String, String)> = windows
        .iter()
        .filter(|w| w.may_be_typo(|t| have.contains(t)))
        .filter_map(|w| pinyin_key(&w.text).map(|k| (&w.text, k)))
        .collect();
    if !unknown_windows.is_empty() {
        let keys: Vec<&str> = unknown_windows.iter().map(|(_, k)| k.as_str()).collect();
        let rows = if all {
            tx.query(
                "SELECT pinyin, term FROM lex_terms WHERE kb_id = $1 AND pinyin = ANY($2) AND han AND df_word > 0 ORDER BY pinyin, term",
                &[&kb.0, &keys],
            )
            .await
        } else {
            let sql = format!(
                "SELECT t.pinyin, t.term FROM lex_terms t WHERE t.kb_id = $1 AND t.pinyin = ANY($2) AND t.han AND t.df_word > 0 AND {}
                 ORDER BY t.pinyin, t.term",
                visible_posting("t.term", "$3")
            );
            tx.query(&sql, &[&kb.0, &keys, &f.owner]).await
        }
        .map_err(pg)?;
        for (window, key) in &unknown_windows {
            let same: Vec<String> = rows
                .iter()
                .filter(|r| r.get::<_, &str>(0) == key)
                .map(|r| r.get(1))
                .take(MAX_CORRECTIONS)
                .collect();
            corrections.extend(
                same.into_iter()
                    .map(|to| ((*window).clone(), to, HOMOPHONE_SIMILARITY)),
            );
        }
    }
    if corrections.is_empty() {
        return Ok(RankedList {
            path: PathKind::Fuzzy,
            hits: vec![],
            notes: vec![no_correction_note(&uncorrected)],
        });
    }
    let notes = corrections
        .iter()
        .map(|(from, to, s)| format!("{from} → {to} ({s:.2})"))
        .collect();
    let mut terms = query_terms(q.query);
    terms.extend(corrections.into_iter().map(|(_, to, s)| QueryTerm {
        text: to,
        weight: s,
        gram: false,
        retrieves: true,
    }));
    let hits = bm25(tx, f, &terms, &q.params.bm25, q.k).await?;
    Ok(RankedList {
        path: PathKind::Fuzzy,
        hits,
        notes,
    })
}

/// The dense query over vectors of `dims` dimensions: through the partial
/// HNSW index of that dimension (its expression and predicate, so the
/// planner can use it) or exactly.
fn dense_sql(dims: usize, hnsw: bool) -> String {
    if hnsw {
        // Ordered by the distance alone, which the index yields in order.
        let distance = format!("v.vector::vector({dims}) <=> $8::vector({dims})");
        return format!(
            "SELECT v.passage, 1 - ({distance}) AS score
             FROM vectors v JOIN passages p ON p.kb_id = v.kb_id AND p.passage = v.passage
             WHERE v.kb_id = $1 AND vector_dims(v.vector) = {dims} AND v.text_hash = p.embed_hash AND {FILTER}
             ORDER BY {distance}
             LIMIT $9"
        );
    }
    format!(
        "SELECT v.passage, 1 - (v.vector <=> $8::vector) AS score
         FROM vectors v JOIN passages p ON p.kb_id = v.kb_id AND p.passage = v.passage
         WHERE v.kb_id = $1 AND vector_dims(v.vector) = {dims} AND v.text_hash = p.embed_hash AND {FILTER}
         ORDER BY v.vector <=> $8::vector, {SNAPSHOT_ORDER}
         LIMIT $9"
    )
}

/// Nearest passages by cosine with pgvector: through the HNSW index of the
/// vectors' dimension (iterative scan, so filters never starve the result),
/// or exactly when `exact` or no index covers the dimension.
async fn dense_path(
    tx: &Transaction<'_>,
    f: &FilterArgs,
    q: &StoreQuery<'_>,
    exact: bool,
) -> Result<RankedList, CoreError> {
    let Some(vector) = q.vector else {
        return Err(rag_core::UserError::PathUnavailable {
            path: "dense".into(),
            reason: "no query vector".into(),
        }
        .into());
    };
    let dims = vector.len();
    let indexed = matches!(dims, 384 | 512 | 768 | 1024 | 1536);
    let hnsw = indexed && !exact;
    if hnsw {
        tx.execute(HNSW_SETTINGS, &[&HNSW_EF_SEARCH.to_string()])
            .await
            .map_err(pg)?;
    }
    let sql = dense_sql(dims, hnsw);
    let limit = q.k as i64;
    let v = VectorRef(vector);
    let rows = tx.query(&sql, &f.params(&[&v, &limit])).await.map_err(pg)?;
    let hits = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Ok(Hit {
                id: passage_id(r.get(0))?,
                rank: i as u32 + 1,
                score: r.get(1),
                matched: vec![],
            })
        })
        .collect::<Result<_, CoreError>>()?;
    let how = if hnsw {
        format!("pgvector hnsw, ef_search {HNSW_EF_SEARCH}")
    } else {
        "pgvector exact".to_owned()
    };
    Ok(RankedList {
        path: PathKind::Dense,
        hits,
        notes: vec![format!("index: {how}")],
    })
}

impl PgStore {
    /// PostgreSQL's plan for the approximate dense query over `kb` (for
    /// tests and operators checking that the HNSW index answers).
    pub async fn explain_dense(
        &self,
        tenant: &TenantId,
        kb: KbId,
        vector: &[f32],
        k: usize,
    ) -> Result<String, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, true).await?;
        tx.execute(HNSW_SETTINGS, &[&HNSW_EF_SEARCH.to_string()])
            .await
            .map_err(pg)?;
        let ctx = SearchCtx {
            filters: Default::default(),
            now: rag_core::now(),
            viewer: Viewer::Everything,
        };
        let f = FilterArgs::new(kb, &ctx);
        let (v, limit) = (VectorRef(vector), k as i64);
        let sql = format!("EXPLAIN {}", dense_sql(vector.len(), true));
        let rows = tx.query(&sql, &f.params(&[&v, &limit])).await.map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

#[async_trait]
impl StoreRecall for PgStore {
    fn serves(&self, path: PathKind) -> bool {
        matches!(
            path,
            PathKind::Bm25
                | PathKind::Synonym
                | PathKind::Translated
                | PathKind::Fuzzy
                | PathKind::Substring
                | PathKind::Dense
        )
    }

    async fn recall(
        &self,
        tenant: &TenantId,
        kb: KbId,
        path: PathKind,
        q: StoreQuery<'_>,
    ) -> Result<RankedList, CoreError> {
        if path == PathKind::Synonym && q.expansions.is_none() {
            return Ok(RankedList {
                path,
                hits: vec![],
                notes: vec!["no synonym fired".into()],
            });
        }
        let mut conn = self.conn().await?;
        let mut tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        if !lex::current(&tx, kb).await? {
            // Rows made by another analysis, or none yet: rebuild them first.
            tx.commit().await.map_err(pg)?;
            self.ensure_current(tenant, kb).await?;
            tx = begin(&mut conn, &tenant.0, true).await?;
        }
        let f = FilterArgs::new(kb, q.ctx);
        let list = match path {
            PathKind::Bm25 => bm25_path(&tx, &f, &q).await?,
            PathKind::Synonym => synonym_path(&tx, &f, &q).await?,
            PathKind::Translated => translated_path(&tx, &f, &q).await?,
            PathKind::Fuzzy => fuzzy_path(&tx, kb, &f, &q).await?,
            PathKind::Substring => substring_path(&tx, &f, &q).await?,
            PathKind::Dense => dense_path(&tx, &f, &q, q.dense_exact).await?,
            PathKind::Fact | PathKind::SecondDense => {
                return Err(rag_core::UserError::PathUnavailable {
                    path: path.as_str().into(),
                    reason: "this path runs in the engine".into(),
                }
                .into())
            }
        };
        tx.commit().await.map_err(pg)?;
        Ok(list)
    }

    async fn head(&self, tenant: &TenantId, kb: KbId) -> Result<rag_core::RecallHead, CoreError> {
        crate::head::head(self, tenant, kb).await
    }

    async fn passages(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
    ) -> Result<Vec<rag_core::Passage>, CoreError> {
        crate::head::passages(self, tenant, kb, ids).await
    }

    async fn passages_except(
        &self,
        tenant: &TenantId,
        kb: KbId,
        viewer: &Viewer,
        except: &[PassageId],
        limit: usize,
    ) -> Result<Vec<PassageId>, CoreError> {
        crate::head::passages_except(self, tenant, kb, viewer, except, limit).await
    }

    async fn vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
    ) -> Result<Vec<(PassageId, Vec<f32>)>, CoreError> {
        let rows = self.vector_rows(tenant, kb, ids, "vector", None).await?;
        rows.iter()
            .map(|r| {
                let v: VectorOwned = r.try_get(1).map_err(pg)?;
                Ok((passage_id(r.get(0))?, v.0))
            })
            .collect()
    }
}
