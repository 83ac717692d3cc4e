//! Domain types, pipeline events and the seam traits of ragscope.
//!
//! Every other crate of the workspace depends on this one, and this one depends
//! on nothing of ours and performs no I/O. The traits name roles in the query
//! pipeline: [`Retriever`], [`Fuser`], [`Reranker`], [`Embedder`],
//! [`Generator`] and the store seam [`StoreRead`] / [`StoreWrite`].
//!
//! ```
//! use rag_core::{PathKind, FusionParams};
//! let params = FusionParams::default();
//! assert_eq!(params.k, 60.0);
//! assert!(PathKind::Bm25.is_lexical());
//! ```
#![warn(missing_docs)]

pub mod auth;
pub mod error;
pub mod event;
pub mod failpoint;
pub mod ids;
pub mod intent;
pub mod link;
pub mod log;
pub mod metrics;
pub mod model;
pub mod overrides;
pub mod pages;
pub mod params;
pub mod query;
pub mod redact;
pub mod seams;
pub mod sentence_vectors;
pub mod source;
mod write_op;

pub use auth::{ApiKeyInfo, KeyStore, Role, Viewer, OPERATOR_OWNER};
pub use error::{CoreError, UserError};
pub use event::{
    CitedSource, ContextDropped, PipelineEvent, RerankMove, SentenceCheck, StageTiming, TokenUsage,
};
pub use ids::{ChunkId, DocId, FactId, FaqId, KbId, PassageId, SourceId, TenantId};
pub use intent::{
    validate_intents, webhook_is_local, Intent, Webhook, WebhookCall, WebhookReply, WebhookSource,
};
pub use log::{ConversationSummary, LogFilter, LoggedHit, QueryLogRecord, QueryLogStore};
pub use metrics::Metrics;
pub use model::*;
pub use overrides::{Origin, Provenance, RetrievalOverrides};
pub use pages::{FaqCursor, FaqPage, FaqQuery, PassageCursor, PassagePage};
pub use params::*;
pub use query::*;
pub use seams::*;
pub use sentence_vectors::SentenceVectors;
pub use source::{FetchError, FetchedPage, Fetcher, PageOutcome, Source, SourcePage, SourceStatus};
