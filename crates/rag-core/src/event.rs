//! The pipeline as a typed stream of events.
//!
//! The CLI, the HTTP API and the workbench all consume this one stream.

use crate::query::{FusedHit, Language, PassageView, RankedList, Token};
use crate::{Dropped, PathKind};
use serde::{Deserialize, Serialize};

/// How long one stage took.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageTiming {
    /// Stage name (the event type that closed it).
    pub stage: String,
    /// Milliseconds.
    pub ms: f64,
}

/// A numbered source packed into the context.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContextSource {
    /// The `[n]` number.
    pub n: u32,
    /// The passage.
    pub passage: PassageView,
}

/// A reranked candidate's move.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RerankMove {
    /// The passage.
    pub id: crate::PassageId,
    /// Rank after fusion.
    pub from: u32,
    /// Rank after rerank.
    pub to: u32,
    /// The reranker's score, when it gives one.
    pub score: Option<f64>,
}

/// A candidate left out of the context.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContextDropped {
    /// The passage.
    pub id: crate::PassageId,
    /// Its rank.
    pub rank: u32,
    /// Why.
    pub reason: String,
}

/// A source the answer cites, for clickable citations.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CitedSource {
    /// The `[n]` number.
    pub n: u32,
    /// The passage.
    pub id: crate::PassageId,
    /// Title.
    pub title: String,
    /// Document of a chunk.
    pub doc: Option<crate::DocId>,
    /// Byte range of a chunk in its document's text.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<u64>>))]
    pub span: Option<(usize, usize)>,
    /// Source path or URL.
    pub source: Option<String>,
}

/// The support check of one answer sentence.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SentenceCheck {
    /// The sentence.
    pub text: String,
    /// Sources it cites.
    pub cites: Vec<u32>,
    /// "supported", "unsupported" or "uncited".
    pub verdict: String,
    /// The supporting (or closest) source number.
    pub n: Option<u32>,
    /// The supporting (or closest) passage.
    pub passage: Option<crate::PassageId>,
    /// Byte range in that passage's body.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<u64>>))]
    pub span: Option<(usize, usize)>,
    /// Term overlap with it.
    pub overlap: Option<f64>,
    /// Embedding similarity with it.
    pub cosine: Option<f32>,
}

/// Tokens a provider counted.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt: u32,
    /// Completion tokens.
    pub completion: u32,
}

/// One step of a query, as it completes.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PipelineEvent {
    /// The query was accepted.
    QueryReceived {
        /// Id of this query run.
        query_id: String,
        /// Knowledge base name.
        kb: String,
        /// The query text.
        query: String,
        /// Paths that will run.
        paths: Vec<PathKind>,
    },
    /// Analysis finished.
    QueryAnalyzed {
        /// Normalised text.
        normalized: String,
        /// Detected language.
        language: Language,
        /// Search tokens.
        tokens: Vec<Token>,
        /// The question as asked, when a follow-up was rewritten into a standalone query.
        #[serde(default)]
        rewritten_from: Option<String>,
        /// How it was rewritten.
        #[serde(default)]
        rewrite_method: Option<String>,
        /// Suggested λ for this query (identifiers and short queries lean
        /// lexical), before recall; the `fused` event carries the λ applied.
        suggested_lexical_interpolation: f64,
        /// Why that suggestion.
        suggestion_reason: String,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// One recall path finished.
    Recall {
        /// The path's list.
        list: RankedList,
        /// Texts of the listed hits.
        passages: Vec<PassageView>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// A recall path failed; the others continue.
    RecallFailed {
        /// The path.
        path: PathKind,
        /// What happened.
        message: String,
    },
    /// Fusion finished.
    Fused {
        /// Kept hits with explanations.
        hits: Vec<FusedHit>,
        /// Dropped candidates with reasons.
        dropped: Vec<Dropped>,
        /// Maximum possible fused score.
        max_score: f64,
        /// RRF k.
        k: f64,
        /// The fusion rule that ran (absent in events logged before rules could be chosen).
        #[serde(default)]
        rule: Option<crate::FusionRule>,
        /// Why that rule, and what it reads.
        #[serde(default)]
        rule_reason: Option<String>,
        /// The λ applied, if any (set by the request, or suggested for the query
        /// and possibly raised after recall when BM25 has a clear winner).
        lexical_interpolation: Option<f64>,
        /// Why that λ.
        #[serde(default)]
        interpolation_reason: Option<String>,
        /// The factor the automatic λ rule put on the second embedder's
        /// weight (FAQ matching raises it; see `interpolation_reason`);
        /// absent when it left the weight as set. A re-fusion that reuses
        /// the applied λ applies it too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        second_weight_factor: Option<f64>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// Reranking finished.
    Reranked {
        /// Which reranker ("identity" when none is configured).
        reranker: String,
        /// Hits in their new order.
        hits: Vec<FusedHit>,
        /// Why the reranker did not run or failed ("rerank skipped: …"); the fused order was kept.
        #[serde(default)]
        skipped: Option<String>,
        /// Each kept candidate's move: fused rank → new rank, with the reranker's score.
        #[serde(default)]
        moves: Vec<RerankMove>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// The question matched an intent: its webhook was called. When the
    /// webhook answered, its answer follows and no recall runs; when it
    /// failed, the normal pipeline follows.
    Routed {
        /// The intent's name.
        intent: String,
        /// The match score (0–1).
        score: f64,
        /// The intent's threshold.
        threshold: f64,
        /// The example question that matched best.
        example: String,
        /// Whether the webhook answered.
        answered: bool,
        /// Why the webhook call failed, if it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Sources the webhook's answer names.
        #[serde(default)]
        sources: Vec<crate::intent::WebhookSource>,
        /// The webhook's latency in milliseconds.
        webhook_ms: f64,
    },
    /// The context for the generator was packed.
    ContextAssembled {
        /// Numbered sources.
        sources: Vec<ContextSource>,
        /// The packing profile used.
        #[serde(default)]
        profile: String,
        /// Candidates left out, with the reason.
        #[serde(default)]
        dropped: Vec<ContextDropped>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// A piece of the answer.
    AnswerToken {
        /// Text.
        text: String,
    },
    /// The answer is complete and checked.
    Answered {
        /// The answer after citation checking.
        text: String,
        /// Which generator ("extractive", "miss", or the LLM client's name).
        generator: String,
        /// The model as the provider named it.
        model: Option<String>,
        /// Language of the answer ("zh" or "en").
        language: String,
        /// The knowledge base did not support an answer: the fixed reply was given.
        kb_miss: bool,
        /// Why it was a miss.
        miss_reasons: Vec<String>,
        /// `[n]` markers that pointed outside the packed sources and were removed.
        removed_citations: Vec<u32>,
        /// Sources the answer cites.
        cited: Vec<CitedSource>,
        /// Per answer sentence: the passage span that supports it, or unsupported.
        support: Vec<SentenceCheck>,
        /// Token usage reported by the provider.
        usage: Option<TokenUsage>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// The query finished.
    Done {
        /// Per-phase timings: non-overlapping phases in order (prepare,
        /// query_analyzed, recall, fused, reranked, context_assembled, …) whose
        /// sum is the total up to scheduling gaps.
        timings: Vec<StageTiming>,
        /// Each recall path's own time (they run in parallel inside the recall phase).
        #[serde(default)]
        paths: Vec<StageTiming>,
        /// Total milliseconds.
        total_ms: f64,
        /// Warnings (a path failed softly, a limit applied…).
        warnings: Vec<String>,
    },
    /// The query failed; nothing follows.
    Error {
        /// Stable snake_case code.
        code: String,
        /// Human-readable message.
        message: String,
    },
}

impl PipelineEvent {
    /// The event's type name, as on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            PipelineEvent::QueryReceived { .. } => "query_received",
            PipelineEvent::QueryAnalyzed { .. } => "query_analyzed",
            PipelineEvent::Recall { .. } => "recall",
            PipelineEvent::RecallFailed { .. } => "recall_failed",
            PipelineEvent::Fused { .. } => "fused",
            PipelineEvent::Reranked { .. } => "reranked",
            PipelineEvent::Routed { .. } => "routed",
            PipelineEvent::ContextAssembled { .. } => "context_assembled",
            PipelineEvent::AnswerToken { .. } => "answer_token",
            PipelineEvent::Answered { .. } => "answered",
            PipelineEvent::Done { .. } => "done",
            PipelineEvent::Error { .. } => "error",
        }
    }
}
