//! Queries, ranked lists, fused hits and their explanations.

use crate::ids::PassageId;
use crate::model::{PassageKind, Timestamp};
use crate::params::{PathKind, RetrievalParams};
use serde::{Deserialize, Serialize};

/// What a token is.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    /// An English word, stemmed.
    Word,
    /// An identifier kept whole: NVDA, iPhone15, A-12, 3.5km, 16:00.
    Ident,
    /// A number.
    Number,
    /// A Chinese word from the dictionary segmenter (single characters included).
    Han,
    /// A single Chinese character inside a longer word (index side only), so that
    /// one-character queries such as 「虾」 find 「鲜虾」.
    HanChar,
    /// Two adjacent Chinese characters that are not a dictionary word; they
    /// match across segmentation differences between a query and a text.
    HanBigram,
    /// A Chinese stop word (是, 的, 怎么, 吗): it adds to the score of a
    /// passage that other terms of the query find, but never finds one on
    /// its own (as Lucene's common-terms query treats frequent terms).
    HanStop,
    /// A character bigram touching a one-character stop word (是几, 的信):
    /// scored like [`TokenKind::HanStop`].
    HanStopBigram,
}

impl TokenKind {
    /// Whether a passage may be found through this term alone (stop words
    /// and their bigrams only add to the score of passages found otherwise).
    pub fn retrieves(self) -> bool {
        !matches!(self, TokenKind::HanStop | TokenKind::HanStopBigram)
    }

    /// The weight of a query term of this kind in BM25: stop words count
    /// for less than other terms (0.7: of 0.3, 0.5, 0.7, 1 and 1.5, the best
    /// mean of the Chinese development sets, bq dev and XQuAD zh→zh; see
    /// docs/quality.md).
    pub fn query_weight(self) -> f32 {
        if self.retrieves() {
            1.0
        } else {
            0.7
        }
    }

    /// Whether the term is a character bigram, scored in the bigram field.
    pub fn is_bigram(self) -> bool {
        matches!(self, TokenKind::HanBigram | TokenKind::HanStopBigram)
    }
}

/// A term with the byte range in the original text it came from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Token {
    /// The normalised, possibly stemmed term.
    pub text: String,
    /// Byte offset in the original text.
    pub start: usize,
    /// Byte offset one past the end in the original text.
    pub end: usize,
    /// Word position; expansion tokens share their word's position.
    pub position: u32,
    /// Kind.
    pub kind: TokenKind,
}

/// The language a text is mostly written in.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    /// Chinese.
    Zh,
    /// English.
    En,
    /// Both, in comparable amounts.
    Mixed,
    /// Neither could be told (digits, symbols).
    Unknown,
}

/// A query after analysis.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AnalyzedQuery {
    /// The text as the user typed it.
    pub raw: String,
    /// After NFKC, width folding, case folding and Traditional→Simplified.
    pub normalized: String,
    /// Detected language.
    pub language: Language,
    /// Search terms (stop words removed, stemmed).
    pub tokens: Vec<Token>,
    /// Surface words before stemming, for substring matching (stop words removed).
    pub key_terms: Vec<String>,
}

/// Filters applied inside every path.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Filters {
    /// Every listed tag must be present (case-insensitive).
    pub tags: Vec<String>,
    /// Created at or after.
    pub created_after: Option<Timestamp>,
    /// Created at or before.
    pub created_before: Option<Timestamp>,
    /// Evaluate validity windows at this time instead of now.
    pub as_of: Option<Timestamp>,
}

/// A query as the engine receives it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QueryRequest {
    /// Knowledge base name.
    pub kb: String,
    /// The question.
    pub query: String,
    /// The base parameters; `None` uses the knowledge base's settings (a
    /// replay passes the logged run's, so it ranks as that run did).
    pub params: Option<RetrievalParams>,
    /// Changes to the base for this request only, merged once by the engine.
    #[serde(default)]
    pub overrides: crate::RetrievalOverrides,
    /// Filters.
    #[serde(default)]
    pub filters: Filters,
    /// Whether to generate an answer after retrieval.
    #[serde(default)]
    pub generate: bool,
    /// A conversation this question continues: earlier turns are read from
    /// the query log and a follow-up is rewritten into a standalone query.
    #[serde(default)]
    pub conversation_id: Option<String>,
}

/// One candidate in one path's ranked list.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hit {
    /// The passage.
    pub id: PassageId,
    /// Rank in this path, from 1.
    pub rank: u32,
    /// The path's own score (scales differ between paths).
    pub score: f64,
    /// Terms of the query that matched, as this path saw them.
    pub matched: Vec<String>,
}

/// One path's result.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankedList {
    /// Which path.
    pub path: PathKind,
    /// Hits, best first, ranks 1..=n.
    pub hits: Vec<Hit>,
    /// What the path did that a reader should know (synonyms fired, typos corrected…).
    pub notes: Vec<String>,
}

/// One path's share of a fused score.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Contribution {
    /// The path.
    pub path: PathKind,
    /// Rank in that path.
    pub rank: u32,
    /// That path's own score.
    pub path_score: f64,
    /// Effective weight of the path.
    pub weight: f64,
    /// This path's share of the fused score: weight / (k + rank) under RRF,
    /// weight × `normalized_score` under the convex rule. (The name is kept
    /// from when RRF was the only rule.)
    pub rrf: f64,
    /// The path's score normalised to [0, 1] (convex rule only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalized_score: Option<f64>,
}

/// A hit after fusion, with its explanation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FusedHit {
    /// The passage.
    pub id: PassageId,
    /// Rank after fusion, from 1.
    pub rank: u32,
    /// Σ contributions.
    pub score: f64,
    /// score / the maximum possible score: 1.0 means first in every path.
    pub normalized: f64,
    /// Per-path contributions, in path order; they sum to `score`.
    pub contributions: Vec<Contribution>,
}

/// Why a fused candidate did not make the cut.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum DropReason {
    /// Below the top-k cut.
    TopK {
        /// Its rank after fusion.
        rank: u32,
        /// The cut.
        top_k: usize,
    },
    /// Normalised score below the threshold.
    Threshold {
        /// Its normalised score.
        normalized: f64,
        /// The threshold.
        min_score: f64,
    },
}

/// A candidate dropped by fusion.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Dropped {
    /// The passage.
    pub id: PassageId,
    /// Its fused score.
    pub score: f64,
    /// Why.
    pub reason: DropReason,
}

/// The outcome of fusion.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Fused {
    /// Kept hits, best first.
    pub hits: Vec<FusedHit>,
    /// Dropped candidates.
    pub dropped: Vec<Dropped>,
    /// The maximum possible fused score: Σ w_i / (k+1) under RRF, Σ w_i
    /// under the convex rule (over the paths that returned candidates).
    pub max_score: f64,
}

/// A passage's text as shown with a hit.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PassageView {
    /// The passage.
    pub id: PassageId,
    /// Kind.
    pub kind: PassageKind,
    /// Title (question, document title, fact key).
    pub title: String,
    /// Body, possibly shortened to a snippet.
    pub body: String,
    /// Source (document path/URL or FAQ source URL).
    pub source: Option<String>,
    /// Byte ranges in `body` that matched query terms, for highlighting.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<u64>>))]
    pub highlights: Vec<(usize, usize)>,
}
