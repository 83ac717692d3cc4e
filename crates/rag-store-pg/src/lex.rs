//! The recall tables (`passages`, `lex_terms`, `lex_stats`, see migration
//! 0003): written by [`sync`] inside every write transaction, from the
//! passages the write touched, with the engine's own analyzer.
//!
//! Term statistics stay exact because every writer of a knowledge base holds
//! its row lock: removing a passage subtracts its terms' document
//! frequencies and its field lengths, adding one adds them.

use crate::error::pg;
use crate::snapshot::{passages_of, user_words, Scope};
use rag_core::{CoreError, KbId, Passage, PassageKind, TenantId, TokenKind, WriteOp};
use rag_lexical::{passage_terms, PassageTerms};
use rag_text::Analyzer;
use std::collections::HashMap;
use tokio_postgres::types::Json;
use tokio_postgres::Transaction;

/// The analysis the stored rows were made with: this layout's version and
/// the analyzer's (`rag_text::ANALYZER_VERSION`). When either changes, stores
/// rebuild each knowledge base's rows when it is next written or searched.
/// (Layout 2000: the script counts of migration 7.)
pub(crate) const LEX_VERSION: i32 = 2000 + rag_text::ANALYZER_VERSION as i32;

/// The longest lexeme PostgreSQL stores (2 KiB less one); longer tokens are
/// left out of `lex` (they still count in the field length).
const MAX_LEXEME_BYTES: usize = 2046;
/// Positions PostgreSQL keeps per lexeme: term frequencies above it count as this.
pub(crate) const MAX_TF: usize = 255;
/// Passages per insert statement.
const BATCH: usize = 500;

/// The field letters of `lex`: title, body, tags, bigrams.
const WEIGHTS: [char; 4] = ['A', 'B', 'C', 'D'];

/// What a write touched, collected from its operations before they run.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    scope: Scope,
    /// FAQ entries may have been deleted without naming them (drafts of a document).
    faqs_may_vanish: bool,
}

impl Dirty {
    /// Records what `op` changes.
    pub(crate) fn note(&mut self, op: &WriteOp) {
        let s = &mut self.scope;
        match op {
            WriteOp::PutDocument { document, .. } => s.docs.push(document.id.0),
            WriteOp::DeleteDocument(id) => {
                s.docs.push(id.0);
                self.faqs_may_vanish = true;
            }
            WriteOp::DeleteUneditedDrafts(_) => self.faqs_may_vanish = true,
            WriteOp::PutFaq(f) => s.faqs.push(f.id.0),
            WriteOp::DeleteFaq(id) => s.faqs.push(id.0),
            WriteOp::PutFact(f) => s.facts.push(f.id.0),
            WriteOp::DeleteFact(id) => s.facts.push(id.0),
            // The segmentation of every passage may change.
            WriteOp::AddUserWord(_) => s.all = true,
            WriteOp::RelinkDrafts { .. }
            | WriteOp::AddSynonyms(_)
            | WriteOp::PutVectors { .. }
            | WriteOp::PutSentenceVectors(_)
            | WriteOp::PutSecondVectors { .. }
            | WriteOp::PutSettings(_)
            | WriteOp::ClearVectors
            | WriteOp::PutSource(_)
            | WriteOp::DeleteSource(_) => {}
        }
    }

    fn is_empty(&self) -> bool {
        let s = &self.scope;
        !s.all
            && !self.faqs_may_vanish
            && s.docs.is_empty()
            && s.faqs.is_empty()
            && s.facts.is_empty()
    }
}

/// Whether the knowledge base's rows are current (made by this analysis).
pub(crate) async fn current(tx: &Transaction<'_>, kb: KbId) -> Result<bool, CoreError> {
    let row = tx
        .query_opt("SELECT version FROM lex_stats WHERE kb_id = $1", &[&kb.0])
        .await
        .map_err(pg)?;
    Ok(row.is_some_and(|r| r.get::<_, i32>(0) == LEX_VERSION))
}

/// The passages `kb` holds (its statistics' count).
pub(crate) async fn passage_count(tx: &Transaction<'_>, kb: KbId) -> Result<i64, CoreError> {
    Ok(tx
        .query_opt("SELECT n FROM lex_stats WHERE kb_id = $1", &[&kb.0])
        .await
        .map_err(pg)?
        .map_or(0, |r| r.get(0)))
}

/// Brings the recall rows of `kb` up to date with a write that touched
/// `dirty`, inside the write's transaction (after its operations ran);
/// how many passages it analysed and wrote.
pub(crate) async fn sync(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
    analyzer: &Analyzer,
    mut dirty: Dirty,
) -> Result<i64, CoreError> {
    if !current(tx, kb).await? {
        dirty.scope = Scope {
            all: true,
            ..Default::default()
        };
    } else if dirty.is_empty() {
        return Ok(0);
    }
    let t = &tenant.0;
    if dirty.scope.all {
        tx.execute("DELETE FROM passages WHERE kb_id = $1", &[&kb.0])
            .await
            .map_err(pg)?;
        tx.execute("DELETE FROM lex_terms WHERE kb_id = $1", &[&kb.0])
            .await
            .map_err(pg)?;
        tx.execute("DELETE FROM postings WHERE kb_id = $1", &[&kb.0])
            .await
            .map_err(pg)?;
        tx.execute(
            "INSERT INTO lex_stats (tenant, kb_id, version, n, sum_title, sum_body, sum_tags, sum_grams, han, latin) VALUES ($1, $2, $3, 0, 0, 0, 0, 0, 0, 0)
             ON CONFLICT (kb_id) DO UPDATE SET version = excluded.version, n = 0, sum_title = 0, sum_body = 0, sum_tags = 0, sum_grams = 0,
                                               han = 0, latin = 0",
            &[t, &kb.0, &LEX_VERSION],
        )
        .await
        .map_err(pg)?;
    } else {
        let s = &dirty.scope;
        let groups: Vec<uuid::Uuid> = s
            .docs
            .iter()
            .chain(&s.faqs)
            .chain(&s.facts)
            .copied()
            .collect();
        remove(tx, kb, &groups, dirty.faqs_may_vanish).await?;
    }
    let passages = passages_of(tx, kb, &dirty.scope).await?;
    if passages.is_empty() {
        return Ok(0);
    }
    let words = user_words(tx, kb).await?;
    let analyzer = analyzer.with_user_words(words.iter().map(|w| (w.word.as_str(), w.freq)));
    // Analysis is CPU work: off the async runtime.
    let started = std::time::Instant::now();
    let count = passages.len();
    let rows = tokio::task::spawn_blocking(move || LexRows::build(&analyzer, passages))
        .await
        .map_err(|e| CoreError::Component {
            component: "postgres store".into(),
            message: e.to_string(),
        })?;
    let analysed = started.elapsed();
    let postings = rows.postings.term.len();
    rows.insert(tx, tenant, kb).await?;
    tracing::debug!(
        passages = count,
        postings,
        analyse_ms = analysed.as_millis() as u64,
        write_ms = (started.elapsed() - analysed).as_millis() as u64,
        "recall rows written"
    );
    Ok(count as i64)
}

/// Deletes the rows of passages grouped under `groups` (documents, FAQ
/// entries, facts) and of FAQ entries that no longer exist, taking their
/// statistics out.
async fn remove(
    tx: &Transaction<'_>,
    kb: KbId,
    groups: &[uuid::Uuid],
    faqs_may_vanish: bool,
) -> Result<(), CoreError> {
    tx.execute(
        "WITH gone AS (
             DELETE FROM passages p WHERE p.kb_id = $1
               AND (p.grp = ANY($2) OR ($3 AND p.kind = 1 AND NOT EXISTS (SELECT 1 FROM faqs f WHERE f.id = p.grp)))
             RETURNING p.passage, p.kind, p.lex, p.len_title, p.len_body, p.len_tags, p.len_grams, p.han, p.latin
         ),
         unposted AS (
             DELETE FROM postings po USING gone WHERE po.kb_id = $1 AND po.passage = gone.passage AND gone.kind < 2
             RETURNING 1
         ),
         d AS (
             SELECT u.lexeme AS term,
                    count(*) FILTER (WHERE 'A' = ANY(u.weights)) AS a,
                    count(*) FILTER (WHERE 'B' = ANY(u.weights)) AS b,
                    count(*) FILTER (WHERE 'C' = ANY(u.weights)) AS c,
                    count(*) FILTER (WHERE 'D' = ANY(u.weights)) AS g,
                    count(*) FILTER (WHERE u.weights && ARRAY['A', 'B', 'C']) AS w,
                    count(*) AS n
             FROM gone CROSS JOIN LATERAL unnest(gone.lex) AS u
             WHERE gone.kind < 2
             GROUP BY u.lexeme
         ),
         terms AS (
             UPDATE lex_terms t SET df_title = t.df_title - d.a, df_body = t.df_body - d.b, df_tags = t.df_tags - d.c,
                                    df_grams = t.df_grams - d.g, df_word = t.df_word - d.w, df_any = t.df_any - d.n
             FROM d WHERE t.kb_id = $1 AND t.term = d.term
             RETURNING 1
         )
         UPDATE lex_stats s SET n = s.n - g.n, sum_title = s.sum_title - g.t, sum_body = s.sum_body - g.b,
                                sum_tags = s.sum_tags - g.c, sum_grams = s.sum_grams - g.g,
                                han = s.han - g.han, latin = s.latin - g.latin
         FROM (SELECT count(*) AS n, coalesce(sum(len_title), 0) AS t, coalesce(sum(len_body), 0) AS b,
                      coalesce(sum(len_tags), 0) AS c, coalesce(sum(len_grams), 0) AS g,
                      coalesce(sum(han), 0) AS han, coalesce(sum(latin), 0) AS latin
               FROM gone WHERE kind < 2) g
         WHERE s.kb_id = $1",
        &[&kb.0, &groups, &faqs_may_vanish],
    )
    .await
    .map_err(pg)?;
    tx.execute(
        "DELETE FROM lex_terms WHERE kb_id = $1 AND df_any <= 0",
        &[&kb.0],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// One term's share of the added passages' statistics.
#[derive(Debug, Default)]
struct TermAdd {
    df: [i32; 4],
    word: i32,
    any: i32,
    wordish: bool,
    han: bool,
}

/// Rows to insert, built off the runtime.
#[derive(Default)]
struct LexRows {
    passage: Vec<String>,
    kind: Vec<i16>,
    created_at: Vec<i64>,
    grp: Vec<uuid::Uuid>,
    ordinal: Vec<i32>,
    owner: Vec<Option<String>>,
    tags: Vec<Json<Vec<String>>>,
    valid_from: Vec<Option<i64>>,
    valid_until: Vec<Option<i64>>,
    embed_hash: Vec<String>,
    lex: Vec<Option<String>>,
    lens: [Vec<i32>; 4],
    match_text: Vec<String>,
    /// Han characters and ASCII letters of each match text.
    han: Vec<i32>,
    latin: Vec<i32>,
    terms: HashMap<String, TermAdd>,
    postings: Postings,
}

/// One row per (term, passage): the term's frequency per field and the
/// passage's field lengths.
#[derive(Default)]
struct Postings {
    term: Vec<String>,
    passage: Vec<String>,
    tf: [Vec<i16>; 4],
    len: [Vec<i32>; 4],
}

impl LexRows {
    fn build(analyzer: &Analyzer, passages: Vec<(Passage, i32)>) -> Self {
        let mut rows = LexRows::default();
        for (p, ordinal) in passages {
            let kind = p.kind();
            // Passages nobody may search (FAQ entries not approved) have no row,
            // as they have no place in the in-memory index.
            if kind != PassageKind::Fact && !p.searchable {
                continue;
            }
            let (lex, lens, match_text) = if kind == PassageKind::Fact {
                (None, [0; 4], String::new())
            } else {
                let terms = passage_terms(analyzer, &p);
                let lens = std::array::from_fn(|f| terms.fields[f].len() as i32);
                (
                    Some(rows.add_terms(&p.id.to_string(), &terms, lens)),
                    lens,
                    terms.match_text,
                )
            };
            rows.passage.push(p.id.to_string());
            rows.kind.push(match kind {
                PassageKind::Chunk => 0,
                PassageKind::Faq => 1,
                PassageKind::Fact => 2,
            });
            rows.created_at.push(p.created_at);
            rows.grp.push(match p.id {
                rag_core::PassageId::Chunk(_) => p.doc.map(|d| d.0).unwrap_or_default(),
                rag_core::PassageId::Faq(id) => id.0,
                rag_core::PassageId::Fact(id) => id.0,
            });
            rows.ordinal.push(ordinal);
            rows.owner.push(p.owner.clone());
            rows.tags
                .push(Json(p.tags.iter().map(|t| t.to_lowercase()).collect()));
            rows.valid_from.push(p.valid_from);
            rows.valid_until.push(p.valid_until);
            rows.embed_hash
                .push(rag_core::text_hash(&p.embedding_text()));
            rows.lex.push(lex);
            for (f, l) in lens.iter().enumerate() {
                rows.lens[f].push(*l);
            }
            let (han, latin) = rag_lexical::script_of(&match_text);
            rows.han.push(han as i32);
            rows.latin.push(latin as i32);
            rows.match_text.push(match_text);
        }
        rows
    }

    /// Adds a passage's terms to the statistics and returns its tsvector literal.
    fn add_terms(&mut self, passage: &str, terms: &PassageTerms, lens: [i32; 4]) -> String {
        // Per lexeme: occurrences per field, in first-seen order.
        let mut order: Vec<&str> = Vec::new();
        let mut tf: HashMap<&str, [usize; 4]> = HashMap::new();
        for (f, tokens) in terms.fields.iter().enumerate() {
            for (text, kind) in tokens {
                if text.is_empty() || text.len() > MAX_LEXEME_BYTES {
                    continue;
                }
                let e = tf.entry(text.as_str()).or_insert_with(|| {
                    order.push(text.as_str());
                    [0; 4]
                });
                e[f] += 1;
                let add = self.terms.entry(text.clone()).or_default();
                add.wordish |= matches!(kind, TokenKind::Word | TokenKind::Ident);
                add.han |= matches!(kind, TokenKind::Han | TokenKind::HanBigram);
            }
        }
        let mut lit = String::new();
        for text in order {
            let counts = tf[text];
            let add = self.terms.get_mut(text).expect("added above");
            for (df, &n) in add.df.iter_mut().zip(&counts) {
                *df += i32::from(n > 0);
            }
            add.word += i32::from(counts[..3].iter().any(|c| *c > 0));
            add.any += 1;
            let po = &mut self.postings;
            po.term.push(text.to_owned());
            po.passage.push(passage.to_owned());
            for f in 0..4 {
                po.tf[f].push(counts[f].min(i16::MAX as usize) as i16);
                po.len[f].push(lens[f]);
            }
            if !lit.is_empty() {
                lit.push(' ');
            }
            lit.push('\'');
            for c in text.chars() {
                match c {
                    '\'' => lit.push_str("''"),
                    '\\' => lit.push_str("\\\\"),
                    c => lit.push(c),
                }
            }
            lit.push_str("':");
            // Positions only count occurrences: each lexeme numbers its own,
            // so no passage length runs into PostgreSQL's position limit.
            let mut pos = 0usize;
            for f in 0..4 {
                for _ in 0..counts[f] {
                    if pos == MAX_TF {
                        break;
                    }
                    pos += 1;
                    if pos > 1 {
                        lit.push(',');
                    }
                    lit.push_str(&pos.to_string());
                    if WEIGHTS[f] != 'D' {
                        lit.push(WEIGHTS[f]);
                    }
                }
            }
        }
        lit
    }

    async fn insert(
        self,
        tx: &Transaction<'_>,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<(), CoreError> {
        let t = &tenant.0;
        let n = self.passage.len();
        for start in (0..n).step_by(BATCH) {
            let r = start..(start + BATCH).min(n);
            tx.execute(
                "INSERT INTO passages (tenant, kb_id, passage, kind, created_at, grp, ordinal, owner, tags_lc, valid_from, valid_until,
                                       embed_hash, lex, len_title, len_body, len_tags, len_grams, match_text, han, latin)
                 SELECT $1, $2, u.passage, u.kind, u.created_at, u.grp, u.ordinal, u.owner,
                        ARRAY(SELECT jsonb_array_elements_text(u.tags)), u.valid_from, u.valid_until,
                        u.embed_hash, u.lex::tsvector, u.lt, u.lb, u.lg, u.ln, u.match_text, u.han, u.latin
                 FROM unnest($3::text[], $4::smallint[], $5::bigint[], $6::uuid[], $7::integer[], $8::text[], $9::jsonb[],
                             $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::integer[], $15::integer[],
                             $16::integer[], $17::integer[], $18::text[], $19::integer[], $20::integer[])
                      AS u(passage, kind, created_at, grp, ordinal, owner, tags, valid_from, valid_until, embed_hash, lex, lt, lb, lg, ln,
                           match_text, han, latin)",
                &[
                    t,
                    &kb.0,
                    &&self.passage[r.clone()],
                    &&self.kind[r.clone()],
                    &&self.created_at[r.clone()],
                    &&self.grp[r.clone()],
                    &&self.ordinal[r.clone()],
                    &&self.owner[r.clone()],
                    &&self.tags[r.clone()],
                    &&self.valid_from[r.clone()],
                    &&self.valid_until[r.clone()],
                    &&self.embed_hash[r.clone()],
                    &&self.lex[r.clone()],
                    &&self.lens[0][r.clone()],
                    &&self.lens[1][r.clone()],
                    &&self.lens[2][r.clone()],
                    &&self.lens[3][r.clone()],
                    &&self.match_text[r.clone()],
                    &&self.han[r.clone()],
                    &&self.latin[r.clone()],
                ],
            )
            .await
            .map_err(pg)?;
        }
        let po = &self.postings;
        let rows = po.term.len();
        for start in (0..rows).step_by(BATCH * 40) {
            let r = start..(start + BATCH * 40).min(rows);
            tx.execute(
                "INSERT INTO postings (tenant, kb_id, term, passage, tf_title, tf_body, tf_tags, tf_grams, len_title, len_body, len_tags, len_grams)
                 SELECT $1, $2, u.* FROM unnest($3::text[], $4::text[], $5::smallint[], $6::smallint[], $7::smallint[], $8::smallint[],
                                                $9::integer[], $10::integer[], $11::integer[], $12::integer[]) AS u",
                &[
                    t,
                    &kb.0,
                    &&po.term[r.clone()],
                    &&po.passage[r.clone()],
                    &&po.tf[0][r.clone()],
                    &&po.tf[1][r.clone()],
                    &&po.tf[2][r.clone()],
                    &&po.tf[3][r.clone()],
                    &&po.len[0][r.clone()],
                    &&po.len[1][r.clone()],
                    &&po.len[2][r.clone()],
                    &&po.len[3][r.clone()],
                ],
            )
            .await
            .map_err(pg)?;
        }
        let counted: Vec<usize> = (0..n).filter(|i| self.kind[*i] < 2).collect();
        let sum = |f: usize| {
            counted
                .iter()
                .map(|i| i64::from(self.lens[f][*i]))
                .sum::<i64>()
        };
        let script = |v: &[i32]| counted.iter().map(|i| i64::from(v[*i])).sum::<i64>();
        tx.execute(
            "UPDATE lex_stats SET n = n + $2, sum_title = sum_title + $3, sum_body = sum_body + $4, sum_tags = sum_tags + $5,
                                  sum_grams = sum_grams + $6, han = han + $7, latin = latin + $8 WHERE kb_id = $1",
            &[
                &kb.0,
                &(counted.len() as i64),
                &sum(0),
                &sum(1),
                &sum(2),
                &sum(3),
                &script(&self.han),
                &script(&self.latin),
            ],
        )
        .await
        .map_err(pg)?;
        let mut terms: Vec<(String, TermAdd)> = self.terms.into_iter().collect();
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        for part in terms.chunks(BATCH * 10) {
            let text: Vec<&str> = part.iter().map(|t| t.0.as_str()).collect();
            let chars: Vec<i32> = part.iter().map(|t| t.0.chars().count() as i32).collect();
            let pinyin: Vec<Option<String>> = part
                .iter()
                .map(|t| {
                    if t.1.han && t.0.chars().count() >= 2 {
                        rag_text::pinyin_key(&t.0)
                    } else {
                        None
                    }
                })
                .collect();
            let col = |f: fn(&TermAdd) -> i32| part.iter().map(|t| f(&t.1)).collect::<Vec<i32>>();
            let flag =
                |f: fn(&TermAdd) -> bool| part.iter().map(|t| f(&t.1)).collect::<Vec<bool>>();
            tx.execute(
                "INSERT INTO lex_terms (tenant, kb_id, term, wordish, han, chars, pinyin, df_title, df_body, df_tags, df_grams, df_word, df_any)
                 SELECT $1, $2, u.* FROM unnest($3::text[], $4::boolean[], $5::boolean[], $6::integer[], $7::text[], $8::integer[],
                                                $9::integer[], $10::integer[], $11::integer[], $12::integer[], $13::integer[]) AS u
                 ON CONFLICT (kb_id, term) DO UPDATE SET
                     wordish = lex_terms.wordish OR excluded.wordish, han = lex_terms.han OR excluded.han,
                     pinyin = coalesce(lex_terms.pinyin, excluded.pinyin),
                     df_title = lex_terms.df_title + excluded.df_title, df_body = lex_terms.df_body + excluded.df_body,
                     df_tags = lex_terms.df_tags + excluded.df_tags, df_grams = lex_terms.df_grams + excluded.df_grams,
                     df_word = lex_terms.df_word + excluded.df_word, df_any = lex_terms.df_any + excluded.df_any",
                &[
                    t,
                    &kb.0,
                    &text,
                    &flag(|a| a.wordish),
                    &flag(|a| a.han),
                    &chars,
                    &pinyin,
                    &col(|a| a.df[0]),
                    &col(|a| a.df[1]),
                    &col(|a| a.df[2]),
                    &col(|a| a.df[3]),
                    &col(|a| a.word),
                    &col(|a| a.any),
                ],
            )
            .await
            .map_err(pg)?;
        }
        Ok(())
    }
}
