//! Lexical recall paths over an in-memory inverted index.
//!
//! A [`LexicalIndex`] is built from one knowledge base's [`KbSnapshot`] and
//! kept current with [`LexicalIndex::apply`], which takes the changes of
//! later commits ([`rag_core::KbChanges`]) and returns a new index sharing
//! the old one's immutable segments: a write costs what it wrote, not the
//! size of the knowledge base, and answers equal a fresh build's. It answers five paths, each returning its own ranked list:
//!
//! - [`LexicalIndex::bm25`]: BM25 with OR semantics over title, body and tags
//!   (flat or per-field, see [`rag_core::FieldMode`]);
//! - [`LexicalIndex::substring`]: the query and its key terms as substrings of
//!   the normalised text (the seeds' `ILIKE` path), weighted by rarity;
//! - [`LexicalIndex::fuzzy`]: typo tolerance: unknown English terms are
//!   matched to vocabulary terms by character-trigram similarity, Chinese
//!   character windows to vocabulary words with the same pinyin (退宽 → 退款);
//! - [`LexicalIndex::synonym`]: BM25 over the query expanded with the
//!   knowledge base's synonym groups, recording which fired;
//! - [`LexicalIndex::facts`]: structured key/value facts hit by their key or a
//!   synonym of it.
//!
//! The crate is synchronous and compute-only; callers run it off the async runtime.
//!
//! ```
//! use rag_core::*;
//! use rag_lexical::{LexicalIndex, Filter};
//! use rag_text::Analyzer;
//! let faq = |q: &str, a: &str| Passage {
//!     id: PassageId::Faq(FaqId::generate()), title: q.into(), body: a.into(), tags: vec![], aliases: vec![],
//!     doc: None, source: None, span: None, created_at: 0, valid_from: None, valid_until: None, searchable: true,
//!     owner: None,
//! };
//! let snapshot = KbSnapshot { passages: vec![faq("怎么退款", "在订单页申请退款"), faq("营业时间", "16:00 开门")], ..Default::default() };
//! let index = LexicalIndex::build(&Analyzer::new(), &snapshot);
//! let q = index.analyze_query("退宽");
//! let list = index.fuzzy(&q, 10, 0.3, &Bm25Params::default(), &Filter::everything());
//! assert_eq!(list.hits.len(), 1);
//! ```

mod blob;
mod bm25;
mod facts;
mod filter;
mod fuzzy;
mod highlight;
mod index;
mod language;
mod lengths;
mod lists;
mod maxscore;
mod memory;
mod ngram;
mod persist;
mod persist_segment;
mod postings;
mod segment;
mod segmented;
mod skip;
mod substring;
mod synonyms;
mod translated;
mod vocab;

pub use blob::SharedBytes;
pub use bm25::idf;
pub use filter::Filter;
pub use fuzzy::{
    han_windows, no_correction_note, swap_variants, typo_corrections, HOMOPHONE_SIMILARITY,
    MAX_CORRECTIONS, TYPO_CANDIDATES,
};
pub use highlight::highlight;
pub use index::{passage_terms, ApplyReport, LexicalIndex, PassageTerms, SEGMENT_PASSAGES};
pub use language::{language_of_script, script_of};
pub use persist::{DecodeError, Manifest, ReadSegment, SegmentFile};
pub use substring::{verify_cap, SubstringMatch, SubstringPlan, MIN_COVERAGE};
pub use translated::{other_language, translated_terms, NOTHING_HERE};
