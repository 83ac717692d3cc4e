//! The ragscope engine.
//!
//! [`Engine`] owns no I/O of its own: it is handed a store and the other
//! components as trait objects ([`Components`]) and runs
//!
//! - the **query pipeline** ([`Engine::query`]): analyse → recall on every
//!   enabled path in parallel → weighted RRF fusion → rerank → context packing,
//!   emitting a [`PipelineEvent`](rag_core::PipelineEvent) as each stage
//!   completes; CPU work runs on blocking threads, never on the async runtime;
//! - **ingest** ([`Engine::ingest`]): parse a file into a document with chunks
//!   or into FAQ entries, and commit it to the store in one atomic write;
//! - **drafting** ([`Engine::draft_faqs`]): FAQ entries drafted by the
//!   configured LLM from a document, linked to it; re-syncing the document
//!   replaces the drafts nobody edited and keeps the edited ones.
//!
//! ```no_run
//! # async fn demo(engine: rag_engine::Engine) {
//! use rag_core::{QueryRequest, TenantId};
//! let request = QueryRequest { kb: "demo".into(), query: "怎么退款".into(), params: None, overrides: Default::default(), filters: Default::default(), generate: false, conversation_id: None };
//! let events = engine.query_collect(&TenantId::default_tenant(), request).await;
//! assert_eq!(events.last().unwrap().kind(), "done");
//! # }
//! ```

mod analytics;
mod answer;
mod blocking;
mod chunk;
mod dense;
mod dense_file;
mod dictionary;
mod drafts;
mod embed;
mod emit;
mod engine;
mod export;
mod extractor;
mod feedback;
mod first_build;
mod fusion_rule;
mod heap;
mod in_place;
mod index_files;
mod ingest;
mod ingest_batch;
mod intents;
mod job;
mod kb_index;
mod lambda;
mod manage;
mod map_sample;
mod mapped;
pub mod parse;
mod passages;
pub mod pipeline;
mod reembed;
mod retrievers;
mod second;
mod segmented_build;
mod sentences;
mod sources;
mod stages;
mod why_not;

pub use analytics::{Analytics, DayStat, NeverRetrieved, TopQuery, Unreviewed};
pub use chunk::ChunkParams;
pub use dense::DenseIndex;
pub use dictionary::Dictionary;
pub use drafts::{DraftFailure, DraftOutcome, DRAFT_BUDGET_CHARS};
pub use embed::{text_hash, CachedEmbedder, EmbedStats};
pub use engine::{Components, Engine, EngineConfig, KbIndex};
pub use export::{ExportCounts, ExportLine, SecondExport, EXPORT_FORMAT, EXPORT_VERSION};
pub use extractor::{ExtractFailure, ExtractJob, Extractor, InProcessExtractor};
pub use ingest::{IngestOutcome, IngestStatus};
pub use ingest_batch::IngestFile;
pub use job::{FailedFile, IngestOptions, IngestProgress, IngestSummary, NotDrafted, TokenCountFn};
pub use manage::{FaqPatch, Lexicon, NewFaq};
pub use map_sample::MapSample;
pub use parse::{parse_facts_tsv, parse_synonyms_tsv, ParseError};
pub use pipeline::{error_code, PipelineOutput, QueryOptions};
pub use rag_ingest;
pub use reembed::ReembedReport;
pub use sources::{NewSource, SourceLimits};
pub use why_not::{PathVerdict, WhyNot};
