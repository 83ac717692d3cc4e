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
        /// Suggested λ for this query (identifiers and short queries lean lexical).
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
        /// The λ applied, if any (set by the request, or suggested for the query).
        lexical_interpolation: Option<f64>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// Reranking finished.
    Reranked {
        /// Which reranker ("identity" when none is configured).
        reranker: String,
        /// Hits in their new order.
        hits: Vec<FusedHit>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// The context for the generator was packed.
    ContextAssembled {
        /// Numbered sources.
        sources: Vec<ContextSource>,
        /// Milliseconds.
        elapsed_ms: f64,
    },
    /// A piece of the answer.
    AnswerToken {
        /// Text.
        text: String,
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
            PipelineEvent::ContextAssembled { .. } => "context_assembled",
            PipelineEvent::AnswerToken { .. } => "answer_token",
            PipelineEvent::Done { .. } => "done",
            PipelineEvent::Error { .. } => "error",
        }
    }
}
