//! Algorithm knobs with validation.

use crate::error::UserError;
use serde::{Deserialize, Serialize};

/// A retrieval path.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// BM25 over title, body and tags with OR semantics.
    Bm25,
    /// Substring match of the query and its key terms (the seeds' ILIKE path).
    Substring,
    /// Typo-tolerant match: character trigrams, and pinyin for Chinese homophones.
    Fuzzy,
    /// BM25 over the query expanded with the knowledge base's synonyms.
    Synonym,
    /// Structured key/value facts.
    Fact,
    /// BM25 over the question's words translated into the other language
    /// by a bilingual dictionary (Chinese questions over English text and
    /// the reverse).
    Translated,
    /// Dense vector recall (arrives with an embedder).
    Dense,
    /// A second embedder's opinion of the candidates the other paths found
    /// (English questions over English passages, when one is configured):
    /// it scores, it does not recall; it shares the dense weight.
    SecondDense,
}

impl PathKind {
    /// All paths, lexical first.
    pub const ALL: [PathKind; 8] = [
        PathKind::Bm25,
        PathKind::Substring,
        PathKind::Fuzzy,
        PathKind::Synonym,
        PathKind::Fact,
        PathKind::Translated,
        PathKind::Dense,
        PathKind::SecondDense,
    ];
    /// The lexical paths.
    pub const LEXICAL: [PathKind; 6] = [
        PathKind::Bm25,
        PathKind::Substring,
        PathKind::Fuzzy,
        PathKind::Synonym,
        PathKind::Fact,
        PathKind::Translated,
    ];

    /// Whether the path is lexical (every path but the two dense ones).
    pub fn is_lexical(self) -> bool {
        !self.is_dense()
    }

    /// Whether the path scores by vectors (dense, and the second embedder's).
    pub fn is_dense(self) -> bool {
        matches!(self, PathKind::Dense | PathKind::SecondDense)
    }

    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::Bm25 => "bm25",
            PathKind::Substring => "substring",
            PathKind::Fuzzy => "fuzzy",
            PathKind::Synonym => "synonym",
            PathKind::Fact => "fact",
            PathKind::Translated => "translated",
            PathKind::Dense => "dense",
            PathKind::SecondDense => "second_dense",
        }
    }

    /// Parses a stable name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How BM25 treats the title, body and tags fields.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum FieldMode {
    /// One flat field: title, body and tags concatenated.
    Flat,
    /// A BM25 score per field with its own statistics, summed with weights.
    MultiField {
        /// Weight of the title (document title, FAQ question).
        title: f32,
        /// Weight of the body.
        body: f32,
        /// Weight of the tags.
        tags: f32,
    },
}

/// BM25 parameters.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation.
    pub b: f32,
    /// Field treatment.
    pub fields: FieldMode,
    /// Weight of the Chinese character-bigram field next to the word fields
    /// (0 switches it off).
    pub ngram_weight: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        // Chosen on SciFact's train judgements; see README "Quality".
        Bm25Params {
            k1: 1.5,
            b: 0.75,
            fields: FieldMode::Flat,
            ngram_weight: 0.5,
        }
    }
}

impl Bm25Params {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), UserError> {
        if !(self.k1.is_finite() && (0.0..=10.0).contains(&self.k1)) {
            return Err(UserError::InvalidParam {
                name: "bm25.k1",
                reason: "must be in [0, 10]".into(),
            });
        }
        if !(self.b.is_finite() && (0.0..=1.0).contains(&self.b)) {
            return Err(UserError::InvalidParam {
                name: "bm25.b",
                reason: "must be in [0, 1]".into(),
            });
        }
        if !(self.ngram_weight.is_finite() && (0.0..=10.0).contains(&self.ngram_weight)) {
            return Err(UserError::InvalidParam {
                name: "bm25.ngram_weight",
                reason: "must be in [0, 10]".into(),
            });
        }
        if let FieldMode::MultiField { title, body, tags } = self.fields {
            if [title, body, tags]
                .iter()
                .any(|w| !w.is_finite() || *w < 0.0)
            {
                return Err(UserError::InvalidParam {
                    name: "bm25.fields",
                    reason: "field weights must be finite and non-negative".into(),
                });
            }
        }
        Ok(())
    }
}

/// Per-path fusion weights.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PathWeights {
    /// BM25.
    pub bm25: f64,
    /// Substring.
    pub substring: f64,
    /// Fuzzy.
    pub fuzzy: f64,
    /// Synonym.
    pub synonym: f64,
    /// Facts.
    pub fact: f64,
    /// The question's words translated by the bilingual dictionary.
    pub translated: f64,
    /// Dense.
    pub dense: f64,
    /// The second embedder (its share of the dense weight is
    /// `second_dense / (dense + second_dense)` when both take part).
    pub second_dense: f64,
}

impl Default for PathWeights {
    fn default() -> Self {
        // Chosen on SciFact's train judgements and the demo knowledge base; see README.
        PathWeights {
            bm25: 1.0,
            substring: 0.1,
            fuzzy: 1.0,
            synonym: 0.5,
            fact: 1.0,
            // Chosen on the mixed-language XQuAD development set, in
            // hybrid and lexical mode (scripts/eval/make-mixed-xquad.py;
            // docs/quality.md).
            translated: 1.0,
            dense: 1.0,
            second_dense: 1.0,
        }
    }
}

impl PathWeights {
    /// Weight of one path.
    pub fn of(&self, p: PathKind) -> f64 {
        match p {
            PathKind::Bm25 => self.bm25,
            PathKind::Substring => self.substring,
            PathKind::Fuzzy => self.fuzzy,
            PathKind::Synonym => self.synonym,
            PathKind::Fact => self.fact,
            PathKind::Translated => self.translated,
            PathKind::Dense => self.dense,
            PathKind::SecondDense => self.second_dense,
        }
    }

    /// Sets the weight of one path.
    pub fn set(&mut self, p: PathKind, w: f64) {
        match p {
            PathKind::Bm25 => self.bm25 = w,
            PathKind::Substring => self.substring = w,
            PathKind::Fuzzy => self.fuzzy = w,
            PathKind::Synonym => self.synonym = w,
            PathKind::Fact => self.fact = w,
            PathKind::Translated => self.translated = w,
            PathKind::Dense => self.dense = w,
            PathKind::SecondDense => self.second_dense = w,
        }
    }
}

/// How the ranked lists of the paths are combined.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum FusionRule {
    /// Weighted reciprocal rank fusion: Σ w / (k + rank). Reads ranks only.
    Rrf,
    /// A convex combination of each path's scores, min-max normalised
    /// between its best score and its score at a fixed rank: reads how far
    /// ahead a path's best candidates are, not only their order.
    #[default]
    Convex,
}

impl FusionRule {
    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FusionRule::Rrf => "rrf",
            FusionRule::Convex => "convex",
        }
    }
}

/// Fusion parameters: the rule, the per-path weights and the λ split.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FusionParams {
    /// Which fusion function combines the paths.
    pub rule: FusionRule,
    /// The RRF constant.
    pub k: f64,
    /// Per-path weights before interpolation.
    pub weights: PathWeights,
    /// λ in [0,1]: 0 = vector only, 1 = lexical only. `None` uses the raw
    /// weights, or, with `auto_interpolation`, the λ suggested for the query
    /// when the dense path takes part.
    pub lexical_interpolation: Option<f64>,
    /// Use the query's suggested λ when none is set and the dense path takes part.
    pub auto_interpolation: bool,
    /// Hits kept after fusion.
    pub top_k: usize,
    /// Hits whose normalised score is below this are dropped.
    pub min_score: f64,
}

impl Default for FusionParams {
    fn default() -> Self {
        FusionParams {
            rule: FusionRule::default(),
            k: 60.0,
            weights: PathWeights::default(),
            lexical_interpolation: None,
            auto_interpolation: true,
            top_k: 10,
            min_score: 0.0,
        }
    }
}

/// The largest fusion weight a request or a knowledge base may set: with
/// RRF contributions of at most `w/(k+1)`, scores stay far from overflow.
pub const MAX_WEIGHT: f64 = 1e3;

/// The largest RRF `k`.
pub const MAX_RRF_K: f64 = 1e6;

impl FusionParams {
    /// Checks ranges: `k` in (0, 1e6], every weight finite in [0, 1e3], λ
    /// and `min_score` in [0, 1], `top_k` in 1..=1000.
    pub fn validate(&self) -> Result<(), UserError> {
        if !(self.k.is_finite() && self.k > 0.0 && self.k <= MAX_RRF_K) {
            return Err(UserError::InvalidParam {
                name: "fusion.k",
                reason: format!("must be a number in (0, {MAX_RRF_K}]"),
            });
        }
        if let Some(l) = self.lexical_interpolation {
            if !(0.0..=1.0).contains(&l) {
                return Err(UserError::InvalidParam {
                    name: "lexical_interpolation",
                    reason: "must be in [0, 1]".into(),
                });
            }
        }
        for p in PathKind::ALL {
            let w = self.weights.of(p);
            if !(w.is_finite() && (0.0..=MAX_WEIGHT).contains(&w)) {
                return Err(UserError::InvalidParam {
                    name: "weights",
                    reason: format!("{p} weight must be a number in [0, {MAX_WEIGHT}]"),
                });
            }
        }
        if self.top_k == 0 || self.top_k > 1000 {
            return Err(UserError::InvalidParam {
                name: "fusion.top_k",
                reason: "must be in 1..=1000".into(),
            });
        }
        if !(0.0..=1.0).contains(&self.min_score) {
            return Err(UserError::InvalidParam {
                name: "fusion.min_score",
                reason: "must be in [0, 1]".into(),
            });
        }
        Ok(())
    }

    /// The effective weight of each path given the paths that take part
    /// (returned candidates).
    ///
    /// Without interpolation the raw weights apply. With λ, each lexical path p
    /// gets λ·w_p/Σw_lexical over the lexical paths that take part, and the
    /// dense path 1−λ (shared by weight with the second embedder's path
    /// when that takes part too).
    pub fn effective_weight(&self, path: PathKind, running: &[PathKind]) -> f64 {
        let Some(lambda) = self.lexical_interpolation else {
            return self.weights.of(path);
        };
        // Each side's share is split among its running paths by weight.
        let total: f64 = running
            .iter()
            .filter(|p| p.is_dense() == path.is_dense())
            .map(|p| self.weights.of(*p))
            .sum();
        if path.is_dense() {
            return if !running.contains(&PathKind::SecondDense) {
                // Dense alone takes the whole share, whatever its weight.
                if path == PathKind::Dense {
                    1.0 - lambda
                } else {
                    0.0
                }
            } else if total <= 0.0 {
                0.0
            } else {
                (1.0 - lambda) * self.weights.of(path) / total
            };
        }
        if total <= 0.0 {
            0.0
        } else {
            lambda * self.weights.of(path) / total
        }
    }
}

/// Every path list that was the default of an earlier version: a
/// knowledge base stored with one of these ran every path there was, and
/// runs every path there is now ([`RetrievalParams::with_current_paths`]).
const EARLIER_DEFAULT_PATHS: [&[PathKind]; 2] = [
    &[
        PathKind::Bm25,
        PathKind::Substring,
        PathKind::Fuzzy,
        PathKind::Synonym,
        PathKind::Fact,
        PathKind::Dense,
    ],
    &[
        PathKind::Bm25,
        PathKind::Substring,
        PathKind::Fuzzy,
        PathKind::Synonym,
        PathKind::Fact,
        PathKind::Dense,
        PathKind::SecondDense,
    ],
];

/// Everything that shapes retrieval; stored per knowledge base, overridable per request.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RetrievalParams {
    /// Candidates each path returns.
    pub per_path_k: usize,
    /// Paths that run.
    pub paths: Vec<PathKind>,
    /// BM25 knobs.
    pub bm25: Bm25Params,
    /// Typo path: the trigram similarity a vocabulary word needs to be
    /// checked as a correction (which then must be within the edits the
    /// word's length allows).
    pub fuzzy_threshold: f32,
    /// Fusion.
    pub fusion: FusionParams,
    /// Hits kept after rerank.
    pub rerank_top_k: usize,
    /// Whether the configured reranker runs (off: the fused order is kept).
    pub rerank: bool,
}

impl RetrievalParams {
    /// Stored settings as this version reads them: a path list that was
    /// an earlier version's default (every path there was then) becomes
    /// today's, so a knowledge base made before a path existed gets it;
    /// a list its owner chose stays as it is.
    pub fn with_current_paths(mut self) -> Self {
        if EARLIER_DEFAULT_PATHS.contains(&self.paths.as_slice()) {
            self.paths = PathKind::ALL.to_vec();
        }
        self
    }
}

impl Default for RetrievalParams {
    fn default() -> Self {
        RetrievalParams {
            per_path_k: 20,
            paths: PathKind::ALL.to_vec(),
            bm25: Bm25Params::default(),
            fuzzy_threshold: 0.2,
            fusion: FusionParams::default(),
            rerank_top_k: 5,
            rerank: true,
        }
    }
}

impl RetrievalParams {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), UserError> {
        if self.per_path_k == 0 || self.per_path_k > 1000 {
            return Err(UserError::InvalidParam {
                name: "per_path_k",
                reason: "must be in 1..=1000".into(),
            });
        }
        if self.paths.is_empty() {
            return Err(UserError::InvalidParam {
                name: "paths",
                reason: "at least one path must run".into(),
            });
        }
        if !(0.0..=1.0).contains(&self.fuzzy_threshold) {
            return Err(UserError::InvalidParam {
                name: "fuzzy_threshold",
                reason: "must be in [0, 1]".into(),
            });
        }
        if self.rerank_top_k == 0 || self.rerank_top_k > 1000 {
            return Err(UserError::InvalidParam {
                name: "rerank_top_k",
                reason: "must be in 1..=1000".into(),
            });
        }
        self.bm25.validate()?;
        self.fusion.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_default_path_list_runs_every_path_a_chosen_one_stays() {
        for earlier in EARLIER_DEFAULT_PATHS {
            let stored = RetrievalParams {
                paths: earlier.to_vec(),
                ..RetrievalParams::default()
            };
            assert_eq!(stored.with_current_paths().paths, PathKind::ALL.to_vec());
        }
        let chosen = RetrievalParams {
            paths: vec![PathKind::Bm25, PathKind::Dense],
            ..RetrievalParams::default()
        };
        assert_eq!(
            chosen.clone().with_current_paths().paths,
            vec![PathKind::Bm25, PathKind::Dense]
        );
        // Settings stored as JSON by the version before the translated path.
        let json = r#"{"retrieval":{"paths":["bm25","substring","fuzzy","synonym","fact","dense","second_dense"]}}"#;
        let settings: crate::KbSettings = serde_json::from_str(json).unwrap();
        assert!(settings
            .upgraded()
            .retrieval
            .paths
            .contains(&PathKind::Translated));
    }
}
