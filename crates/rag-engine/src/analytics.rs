//! Knowledge-ops figures over a knowledge base's query log: hit rate per
//! day, the most asked questions, misses, entries nobody's question reached
//! ("zombies"), FAQ entries due for review, synonyms that never fire,
//! feedback and the score distributions beside the miss thresholds.
//!
//! Every logged question of the window the viewer may see counts: the log
//! is read a page at a time (newest first, by a `(created_at, id)` cursor)
//! and each page is folded into the totals on a blocking thread, so memory
//! stays one page whatever the log's size.

use crate::Engine;
use rag_core::{CoreError, LogFilter, PassageId, QueryLogRecord, TenantId, Timestamp, Viewer};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Log rows read per page.
const PAGE: usize = 2_000;
/// Entries listed as never retrieved or due for review, at most.
const LISTED: usize = 500;

/// A passage nobody's question reached.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NeverRetrieved {
    /// The passage.
    pub id: PassageId,
    /// Its title.
    pub title: String,
}

/// One day of questions.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DayStat {
    /// Start of the day (UTC), unix seconds.
    pub day: i64,
    /// Questions.
    pub queries: usize,
    /// Answered from the knowledge base.
    pub hits: usize,
    /// Misses.
    pub misses: usize,
}

/// A question asked more than once.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopQuery {
    /// The question (as first asked; grouped case- and space-insensitively).
    pub query: String,
    /// Times asked.
    pub count: usize,
    /// Times it was a miss.
    pub misses: usize,
    /// Last asked (unix seconds).
    pub last_at: i64,
}

/// An FAQ entry due for review.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Unreviewed {
    /// The entry.
    pub id: rag_core::FaqId,
    /// Its question.
    pub question: String,
    /// Last change (unix seconds).
    pub updated_at: i64,
}

/// Knowledge-ops figures over the query log.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analytics {
    /// The window, in days.
    pub days: u32,
    /// Questions logged in the window (all of them the caller may see).
    pub queries: usize,
    /// Of those, answered by the knowledge base (not a miss, at least one hit).
    pub hits: usize,
    /// Misses.
    pub misses: usize,
    /// hits / queries.
    pub hit_rate: f64,
    /// Per day (UTC), oldest first, days without questions included.
    pub by_day: Vec<DayStat>,
    /// The most asked questions with their misses.
    pub top_queries: Vec<TopQuery>,
    /// Feedback counts.
    pub useful: usize,
    /// Feedback counts.
    pub not_useful: usize,
    /// useful / (useful + not_useful), when any feedback was given.
    pub usefulness: Option<f64>,
    /// The latest missed questions.
    pub recent_misses: Vec<String>,
    /// Searchable FAQ entries and chunks that no question of the window retrieved ("zombies").
    pub never_retrieved: Vec<NeverRetrieved>,
    /// FAQ entries not changed for `review_days` days.
    pub unreviewed: Vec<Unreviewed>,
    /// The review age, in days.
    pub review_days: u32,
    /// Synonym groups none of whose terms fired in the window.
    pub synonyms_never_fired: Vec<Vec<String>>,
    /// Histogram of the best normalised fused score, ten buckets over [0, 1].
    pub top_score_histogram: Vec<usize>,
    /// Histogram of the best cosine of the dense path, ten buckets over [0, 1] (questions where it ran).
    pub top_cosine_histogram: Vec<usize>,
    /// The knowledge base's miss threshold on the fused score (drawn on its histogram).
    pub min_fused: Option<f64>,
    /// The knowledge base's miss threshold on the cosine.
    pub min_cosine: Option<f64>,
}

const DAY: i64 = 86_400;

/// The running totals of the log pages read so far.
struct Totals {
    first_day: i64,
    seen: HashSet<PassageId>,
    fired: HashSet<String>,
    fused_hist: Vec<usize>,
    cosine_hist: Vec<usize>,
    queries: usize,
    hits: usize,
    misses: usize,
    useful: usize,
    not_useful: usize,
    recent_misses: Vec<String>,
    by_day: Vec<DayStat>,
    grouped: HashMap<String, TopQuery>,
}

impl Totals {
    fn new(since: Timestamp, now: Timestamp, days: u32) -> Self {
        let first_day = since.div_euclid(DAY) * DAY;
        Totals {
            first_day,
            seen: HashSet::new(),
            fired: HashSet::new(),
            fused_hist: vec![0; 10],
            cosine_hist: vec![0; 10],
            queries: 0,
            hits: 0,
            misses: 0,
            useful: 0,
            not_useful: 0,
            recent_misses: Vec::new(),
            by_day: (0..=days as i64)
                .map(|i| DayStat {
                    day: first_day + i * DAY,
                    queries: 0,
                    hits: 0,
                    misses: 0,
                })
                .filter(|d| d.day <= now)
                .collect(),
            grouped: HashMap::new(),
        }
    }

    /// Folds one page of rows (newest first) into the totals.
    fn add(&mut self, rows: &[QueryLogRecord]) {
        let bucket = |s: f64| ((s.clamp(0.0, 1.0) * 10.0) as usize).min(9);
        for r in rows {
            self.queries += 1;
            self.seen.extend(r.fused.iter().map(|h| h.id));
            self.fired
                .extend(r.fired_synonyms.iter().flatten().map(|t| t.to_lowercase()));
            let missed = r.kb_miss || (r.fused.is_empty() && !routed(r));
            if missed {
                self.misses += 1;
                if self.recent_misses.len() < 20 {
                    self.recent_misses.push(r.query.clone());
                }
            } else {
                self.hits += 1;
            }
            let slot = (r.created_at.div_euclid(DAY) * DAY - self.first_day) / DAY;
            if let Some(d) = usize::try_from(slot)
                .ok()
                .and_then(|s| self.by_day.get_mut(s))
            {
                d.queries += 1;
                if missed {
                    d.misses += 1;
                } else {
                    d.hits += 1;
                }
            }
            let key: String = r
                .query
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            // Rows come newest first: the first one seen names the group.
            let e = self.grouped.entry(key).or_insert_with(|| TopQuery {
                query: r.query.clone(),
                count: 0,
                misses: 0,
                last_at: r.created_at,
            });
            e.count += 1;
            e.misses += missed as usize;
            e.last_at = e.last_at.max(r.created_at);
            if let Some(s) = r.top_fused_score {
                self.fused_hist[bucket(s)] += 1;
            }
            if let Some(c) = r.top1_cosine {
                self.cosine_hist[bucket(c)] += 1;
            }
            match r.feedback.as_deref() {
                Some("useful") => self.useful += 1,
                Some("not_useful") => self.not_useful += 1,
                _ => {}
            }
        }
    }
}

/// Whether an intent's webhook answered the row (no passage is expected).
fn routed(r: &QueryLogRecord) -> bool {
    r.generator
        .as_deref()
        .is_some_and(|g| g.starts_with("intent:"))
}

impl Engine {
    /// The knowledge-ops figures of the last `days` days of a knowledge
    /// base's query log, over the rows `viewer` may see.
    pub async fn analytics(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        viewer: &Viewer,
        days: u32,
        review_days: u32,
    ) -> Result<Analytics, CoreError> {
        self.analytics_paged(tenant, kb_name, viewer, days, review_days, PAGE)
            .await
    }

    pub(crate) async fn analytics_paged(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        viewer: &Viewer,
        days: u32,
        review_days: u32,
        page: usize,
    ) -> Result<Analytics, CoreError> {
        let kb = self.kb(tenant, kb_name).await?;
        let now = rag_core::now();
        let since = now - days as i64 * DAY;
        let mut totals = Totals::new(since, now, days);
        let mut before = None;
        loop {
            let rows = self
                .store()
                .query_log(
                    tenant,
                    kb.id,
                    &LogFilter {
                        limit: page,
                        since: Some(since),
                        before: before.clone(),
                        viewer: viewer.clone(),
                        ..Default::default()
                    },
                )
                .await?;
            let full = rows.len() >= page;
            before = rows.last().map(|r| (r.created_at, r.id.clone()));
            let (t, more) = tokio::task::spawn_blocking(move || {
                let mut t = totals;
                t.add(&rows);
                (t, full)
            })
            .await
            .map_err(|e| CoreError::Component {
                component: "analytics".into(),
                message: e.to_string(),
            })?;
            totals = t;
            if !more || before.is_none() {
                break;
            }
        }
        let index = self.index(tenant, &kb).await?;
        // A store that holds the text lists what was never retrieved itself.
        let listed_by_store = match (index.store_passages, self.store().store_recall()) {
            (Some(_), Some(recall)) => {
                let seen: Vec<PassageId> = totals.seen.iter().copied().collect();
                let ids = recall
                    .passages_except(tenant, kb.id, viewer, &seen, LISTED)
                    .await?;
                let passages = self
                    .passages_by_id((tenant, kb.id), &index, ids.iter().copied())
                    .await?;
                let title = |id| passages.get(id).map(|p| p.title.clone());
                Some(
                    ids.iter()
                        .map(|id| NeverRetrieved {
                            id: *id,
                            title: title(id).unwrap_or_default(),
                        })
                        .collect::<Vec<_>>(),
                )
            }
            _ => None,
        };
        let lexicon = self.lexicon(tenant, kb_name).await?;
        let unreviewed = self
            .unreviewed(tenant, kb.id, now - review_days as i64 * DAY)
            .await?;
        let viewer = viewer.clone();
        let (min_fused, min_cosine) = (kb.settings.answer.min_fused, kb.settings.answer.min_cosine);
        tokio::task::spawn_blocking(move || {
            let t = totals;
            let mut top_queries: Vec<TopQuery> = t.grouped.into_values().collect();
            top_queries.sort_by(|a, b| {
                b.count
                    .cmp(&a.count)
                    .then(b.last_at.cmp(&a.last_at))
                    .then_with(|| a.query.cmp(&b.query))
            });
            top_queries.truncate(20);
            let never_retrieved = listed_by_store.unwrap_or_else(|| {
                index
                    .lexical
                    .passage_metas()
                    .filter(|p| {
                        p.searchable && viewer.sees(p.owner.as_deref()) && !t.seen.contains(&p.id)
                    })
                    .take(LISTED)
                    .map(|p| NeverRetrieved {
                        id: p.id,
                        // The metas may leave the title out: the whole passage has it.
                        title: index
                            .lexical
                            .passage(p.id)
                            .map(|whole| whole.title.clone())
                            .unwrap_or_default(),
                    })
                    .collect()
            });
            let synonyms_never_fired = lexicon
                .synonyms
                .iter()
                .filter(|g| !g.terms.iter().any(|x| t.fired.contains(&x.to_lowercase())))
                .map(|g| g.terms.clone())
                .collect();
            let (useful, not_useful) = (t.useful, t.not_useful);
            Analytics {
                days,
                queries: t.queries,
                hits: t.hits,
                misses: t.misses,
                hit_rate: if t.queries == 0 {
                    0.0
                } else {
                    t.hits as f64 / t.queries as f64
                },
                by_day: t.by_day,
                top_queries,
                useful,
                not_useful,
                usefulness: (useful + not_useful > 0)
                    .then(|| useful as f64 / (useful + not_useful) as f64),
                recent_misses: t.recent_misses,
                never_retrieved,
                unreviewed,
                review_days,
                synonyms_never_fired,
                top_score_histogram: t.fused_hist,
                top_cosine_histogram: t.cosine_hist,
                min_fused,
                min_cosine,
            }
        })
        .await
        .map_err(|e| CoreError::Component {
            component: "analytics".into(),
            message: e.to_string(),
        })
    }
}

impl Engine {
    /// The [`LISTED`] FAQ entries changed longest ago, all before `before`,
    /// oldest first (ties in listing order). The entries are read a page at
    /// a time and at most twice [`LISTED`] are held besides a page, so
    /// memory does not grow with the knowledge base.
    async fn unreviewed(
        &self,
        tenant: &TenantId,
        kb: rag_core::KbId,
        before: i64,
    ) -> Result<Vec<Unreviewed>, CoreError> {
        // Each kept entry with its key: (last change, listing position).
        let mut oldest: Vec<((i64, usize), Unreviewed)> = Vec::new();
        let mut seen = 0usize;
        self.each_faq_page(tenant, kb, |page| {
            for f in page {
                seen += 1;
                if f.updated_at < before {
                    let entry = Unreviewed {
                        id: f.id,
                        question: f.question.clone(),
                        updated_at: f.updated_at,
                    };
                    oldest.push(((f.updated_at, seen), entry));
                }
            }
            // Keys are distinct, so the LISTED smallest are well defined.
            if oldest.len() > 2 * LISTED {
                oldest.select_nth_unstable_by_key(LISTED - 1, |(key, _)| *key);
                oldest.truncate(LISTED);
            }
            Ok(())
        })
        .await?;
        oldest.sort_unstable_by_key(|(key, _)| *key);
        oldest.truncate(LISTED);
        Ok(oldest.into_iter().map(|(_, entry)| entry).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Components, EngineConfig};
    use rag_core::{KbSettings, RetrievalParams};
    use std::sync::Arc;

    fn row(n: usize, kb: rag_core::KbId, at: Timestamp) -> QueryLogRecord {
        QueryLogRecord {
            id: format!("row-{n:03}"),
            tenant: TenantId::default_tenant(),
            kb,
            kb_name: "kb".into(),
            conversation_id: None,
            created_at: at,
            query: format!("question {}", n % 3),
            rewritten_query: None,
            params: RetrievalParams::default(),
            filters: Default::default(),
            fused: Vec::new(),
            answer: None,
            generator: None,
            model: None,
            top1_cosine: None,
            top_fused_score: Some(0.05 + 0.1 * (n % 10) as f64),
            cited: Vec::new(),
            kb_miss: n.is_multiple_of(2),
            timings: Vec::new(),
            total_ms: 1.0,
            usage: None,
            feedback: (n % 4 == 1).then(|| "useful".to_owned()),
            fired_synonyms: Vec::new(),
            owner: None,
        }
    }

    /// A lexical engine over a fresh embedded store with one knowledge
    /// base, "kb" (the directory must outlive the engine).
    async fn lexical_kb() -> (tempfile::TempDir, Engine, TenantId, rag_core::KnowledgeBase) {
        let dir = tempfile::tempdir().unwrap();
        let store =
            rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap();
        let engine = Engine::new(
            Components::lexical(Arc::new(store)),
            EngineConfig::default(),
        );
        let tenant = TenantId::default_tenant();
        let kb = engine
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        (dir, engine, tenant, kb)
    }

    #[tokio::test]
    async fn every_row_of_the_window_counts_whatever_the_page_size() {
        let (_dir, engine, tenant, kb) = lexical_kb().await;
        let now = rag_core::now();
        // Eleven rows, several sharing a second (the cursor's tie-break on
        // the id), one outside the window.
        for n in 0..11 {
            let at = if n == 10 {
                now - 40 * DAY
            } else {
                now - (n / 3) as i64
            };
            engine.store().log_query(&row(n, kb.id, at)).await.unwrap();
        }
        let run = |page| {
            let (engine, tenant) = (engine.clone(), tenant.clone());
            async move {
                engine
                    .analytics_paged(&tenant, "kb", &Viewer::Public, 30, 90, page)
                    .await
                    .unwrap()
            }
        };
        let whole = run(1000).await;
        assert_eq!(whole.queries, 10);
        assert_eq!((whole.misses, whole.hits), (10, 0), "no row has hits");
        assert_eq!(whole.useful, 3);
        assert_eq!(whole.top_score_histogram.iter().sum::<usize>(), 10);
        assert_eq!(whole.top_queries.iter().map(|q| q.count).sum::<usize>(), 10);
        for page in [1, 2, 3, 4] {
            assert_eq!(run(page).await, whole, "page size {page}");
        }
    }

    #[tokio::test]
    async fn the_oldest_entries_are_listed_for_review_whatever_the_knowledge_base_size() {
        let (_dir, engine, tenant, kb) = lexical_kb().await;
        let now = rag_core::now();
        // More entries than are listed and than a page holds; last changes
        // in 400 distinct days, so many tie; one in five changed recently; the
        // last ones due but not among the oldest.
        let n = 1_300usize;
        let changed = |i: usize| {
            if i.is_multiple_of(5) {
                now - DAY
            } else if i >= n - 100 {
                // Due for review, but the youngest of those that are.
                now - 91 * DAY
            } else {
                now - (100 + (i * 7919) % 400) as i64 * DAY
            }
        };
        let ops = (0..n)
            .map(|i| {
                rag_core::WriteOp::PutFaq(rag_core::FaqEntry {
                    id: rag_core::FaqId::generate(),
                    kb: kb.id,
                    question: format!("question {i}"),
                    answer: "answer".into(),
                    status: rag_core::FaqStatus::Approved,
                    edited: false,
                    source_url: None,
                    tags: Vec::new(),
                    // Listing order is creation order.
                    created_at: now - 10 * DAY + i as i64,
                    updated_at: changed(i),
                    valid_from: None,
                    valid_until: None,
                    source_doc: None,
                })
            })
            .collect();
        engine.store().apply(&tenant, kb.id, ops).await.unwrap();

        let got = engine
            .analytics(&tenant, "kb", &Viewer::Public, 30, 90)
            .await
            .unwrap()
            .unreviewed;
        // What sorting every entry would list: changed before 90 days ago,
        // oldest first, ties in creation order, the first LISTED.
        let mut want: Vec<usize> = (0..n).filter(|&i| changed(i) < now - 90 * DAY).collect();
        want.sort_by_key(|&i| changed(i));
        want.truncate(LISTED);
        assert_eq!(got.len(), LISTED);
        let got: Vec<String> = got.into_iter().map(|u| u.question).collect();
        let want: Vec<String> = want.iter().map(|i| format!("question {i}")).collect();
        assert_eq!(got, want);
    }
}
