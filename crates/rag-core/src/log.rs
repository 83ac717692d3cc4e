//! The query log: one row per question, enough to replay it, judge it and
//! find what the knowledge base is missing.

use crate::auth::Viewer;
use crate::event::{CitedSource, StageTiming, TokenUsage};
use crate::ids::{KbId, PassageId, TenantId};
use crate::model::Timestamp;
use crate::params::{PathKind, RetrievalParams};
use crate::query::Filters;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One fused hit as logged.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoggedHit {
    /// The passage.
    pub id: PassageId,
    /// Title when logged.
    pub title: String,
    /// Fused rank.
    pub rank: u32,
    /// Normalised fused score.
    pub normalized: f64,
    /// Rank in each path that found it.
    pub path_ranks: Vec<(PathKind, u32)>,
}

/// A question and everything that happened to it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QueryLogRecord {
    /// The query run's id.
    pub id: String,
    /// Tenant.
    pub tenant: TenantId,
    /// Knowledge base.
    pub kb: KbId,
    /// Its name at the time.
    pub kb_name: String,
    /// Conversation, when the question continued one.
    pub conversation_id: Option<String>,
    /// When.
    pub created_at: Timestamp,
    /// The question as asked.
    pub query: String,
    /// The standalone query actually searched, when a follow-up was rewritten.
    pub rewritten_query: Option<String>,
    /// The parameters, so the question can be replayed.
    pub params: RetrievalParams,
    /// Filters.
    pub filters: Filters,
    /// The fused ranking.
    pub fused: Vec<LoggedHit>,
    /// The answer (None when only retrieval ran).
    pub answer: Option<String>,
    /// Generator.
    pub generator: Option<String>,
    /// Model.
    pub model: Option<String>,
    /// Best cosine of the dense path, when it ran.
    pub top1_cosine: Option<f64>,
    /// Best normalised fused score.
    pub top_fused_score: Option<f64>,
    /// Sources cited by the answer.
    pub cited: Vec<CitedSource>,
    /// The knowledge base could not answer.
    pub kb_miss: bool,
    /// Per-phase latency.
    pub timings: Vec<StageTiming>,
    /// Total milliseconds.
    pub total_ms: f64,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// User feedback: "useful" or "not_useful".
    pub feedback: Option<String>,
    /// The synonym groups that fired (each as its terms), for "synonyms that never fire".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fired_synonyms: Vec<Vec<String>>,
    /// The owner whose restricted documents the run could see (None: a caller
    /// without owner); the row is visible to that owner's keys only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// Which log rows to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogFilter {
    /// Only misses (true) or only answered (false).
    pub kb_miss: Option<bool>,
    /// Only this conversation.
    pub conversation_id: Option<String>,
    /// Created at or after.
    pub since: Option<Timestamp>,
    /// At most this many, newest first.
    pub limit: usize,
    /// Only rows older than this `(created_at, id)` in the listing's order:
    /// the last row of the previous page, to read the log a page at a time.
    pub before: Option<(Timestamp, String)>,
    /// Whose rows may be listed (rows written by an owner are that owner's).
    pub viewer: crate::auth::Viewer,
}

/// Storage of the query log, scoped by tenant like everything else.
#[async_trait]
pub trait QueryLogStore: Send + Sync {
    /// Appends a record.
    async fn log_query(&self, record: &QueryLogRecord) -> crate::error::Result<()>;
    /// Records of a knowledge base, newest first.
    async fn query_log(
        &self,
        tenant: &TenantId,
        kb: KbId,
        filter: &LogFilter,
    ) -> crate::error::Result<Vec<QueryLogRecord>>;
    /// One record, if it exists for the tenant and the viewer may see it.
    async fn query_log_entry(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
    ) -> crate::error::Result<Option<QueryLogRecord>>;
    /// Sets feedback; `false` when no such record exists for the tenant and viewer.
    async fn set_feedback(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
        feedback: &str,
    ) -> crate::error::Result<bool>;
    /// Conversations of a knowledge base the viewer may see, latest activity first.
    async fn conversations(
        &self,
        tenant: &TenantId,
        kb: KbId,
        viewer: &Viewer,
        limit: usize,
    ) -> crate::error::Result<Vec<ConversationSummary>>;
    /// Forgets a conversation's turns in a knowledge base (the viewer's rows
    /// only); returns how many turns were removed.
    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        kb: KbId,
        id: &str,
        viewer: &Viewer,
    ) -> crate::error::Result<usize>;
}

/// A conversation as the query log knows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// Its id, as clients send it with each question.
    pub id: String,
    /// Questions asked in it.
    pub turns: usize,
    /// The first question.
    pub first_query: String,
    /// The latest question.
    pub last_query: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its latest activity.
    pub last_at: Timestamp,
    /// Turns the knowledge base could not answer.
    pub misses: usize,
}
