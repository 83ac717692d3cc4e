//! Compute-only answer building for ragscope: everything between the ranked
//! hits and the answer a user reads, without I/O (no network, no files, no
//! async runtime), so it can be tested exhaustively and run anywhere.
//!
//! - [`pack`]: ranked hits → numbered sources `[n] title\n body` within a
//!   budget ([`PackProfile::faq`], [`PackProfile::document`]), with the
//!   dropped ones and why.
//! - [`prompt`]: a knowledge base's [`PromptTemplate`] → chat messages; the
//!   sources are escaped, quoted data inside one `<sources>` block.
//! - [`extractive`]: the deterministic extractive answer (the generator used
//!   when no LLM is configured).
//! - [`citations`]: out-of-range `[n]` removed and reported; the sources cited.
//! - [`support`]: each answer sentence against the sources it cites, by term
//!   overlap and embedding similarity (embeddings are an input, [`embed`]).
//! - [`miss`]: the honest miss decision and reply.
//! - [`followup`]: follow-up questions rewritten into standalone queries.
//! - [`faq_tool`]: the FAQ lookup tool's text output for agents.
//! - [`drafts`]: the prompt that asks an LLM for FAQ pairs from a document,
//!   and the parser that repairs, checks and explains its JSON reply.
//! - [`sentences`]: the sentence splitter they share (Chinese and English).

pub mod citations;
pub mod drafts;
pub mod embed;
pub mod extractive;
pub mod faq_tool;
pub mod followup;
pub mod lang;
pub mod miss;
pub mod pack;
pub mod prompt;
pub mod sentences;
pub mod support;
mod terms;

pub use citations::{
    check_citations, find_markers, strip_markers, CheckedCitations, CitedSource, Marker,
    RemovedCitation,
};
pub use drafts::{draft_prompt, parse_drafts, DraftError, DraftPrompt, DraftedPair, ParsedDrafts};
pub use embed::{cosine, PrecomputedEmbeddings, SentenceEmbedder};
pub use extractive::{
    extractive_answer, ExtractiveAnswer, ExtractiveConfig, Quote, EXTRACTIVE_NAME,
};
pub use faq_tool::{format_faq_tool, FaqToolHit};
pub use followup::{rewrite_followup, Rewrite, RewriteMethod, Turn};
pub use lang::AnswerLanguage;
pub use miss::{decide_miss, miss_reply, MissDecision, MissReason, MissSignals, MissThresholds};
pub use pack::{
    pack, render_source, PackCandidate, PackDropReason, PackDropped, PackProfile, Packed,
};
pub use prompt::{
    escape_data, sources_block, PromptError, PromptTemplate, SOURCES_CLOSE, SOURCES_OPEN,
};
pub use sentences::{split_sentences, SentenceSpan};
pub use support::{
    check_support, support_texts, SentenceSupport, SupportConfig, SupportMatch, SupportReport,
    Verdict,
};
