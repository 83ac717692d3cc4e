//! Per-request changes to a knowledge base's retrieval settings, merged in
//! one place. The CLI, the HTTP API and re-fusion build a
//! [`RetrievalOverrides`]; the engine applies it once, after its one read of
//! the knowledge base, and reports where the values that matter came from
//! ([`Provenance`]).

use crate::params::{Bm25Params, FusionRule, PathKind, PathWeights, RetrievalParams};
use serde::{Deserialize, Serialize};

/// Every knob a request may set; `None` keeps the base value (the
/// knowledge base's settings, or a logged run's parameters on replay).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RetrievalOverrides {
    /// Paths that run.
    pub paths: Option<Vec<PathKind>>,
    /// Candidates each path returns.
    pub per_path_k: Option<usize>,
    /// Hits kept after fusion.
    pub top_k: Option<usize>,
    /// Hits kept after rerank.
    pub rerank_top_k: Option<usize>,
    /// RRF k.
    pub k: Option<f64>,
    /// The fusion rule.
    pub fusion_rule: Option<FusionRule>,
    /// Per-path fusion weights.
    pub weights: Option<PathWeights>,
    /// λ in [0, 1]: 0 = vectors only, 1 = lexical only.
    pub lexical_interpolation: Option<f64>,
    /// Whether λ is suggested per query when none is set.
    pub auto_interpolation: Option<bool>,
    /// Fused hits below this normalised score are dropped.
    pub min_score: Option<f64>,
    /// Whether the configured reranker runs.
    pub rerank: Option<bool>,
    /// BM25 knobs.
    pub bm25: Option<Bm25Params>,
    /// Fuzzy path: minimum trigram similarity.
    pub fuzzy_threshold: Option<f32>,
}

/// Where a value in effect came from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The request set it.
    Request,
    /// The base parameters (the knowledge base's settings, or the logged
    /// parameters a replay starts from) had it.
    Base,
    /// Nobody set it.
    Unset,
}

/// Where the values whose source a reader needs came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provenance {
    /// λ (`fusion.lexical_interpolation`).
    pub lexical_interpolation: Origin,
    /// The fusion rule (`fusion.rule`): `Base` whenever the request did not
    /// set it (the knowledge base's settings always hold a rule).
    pub fusion_rule: Origin,
}

impl RetrievalOverrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == RetrievalOverrides::default()
    }

    /// The parameters in effect: `base` with every set field replaced, and
    /// where λ came from. The result is not validated here: the caller
    /// validates it ([`RetrievalParams::validate`]) once.
    pub fn apply(&self, base: &RetrievalParams) -> (RetrievalParams, Provenance) {
        let mut p = base.clone();
        if let Some(v) = &self.paths {
            p.paths = v.clone();
        }
        if let Some(v) = self.per_path_k {
            p.per_path_k = v;
        }
        if let Some(v) = self.top_k {
            p.fusion.top_k = v;
        }
        if let Some(v) = self.rerank_top_k {
            p.rerank_top_k = v;
        }
        if let Some(v) = self.k {
            p.fusion.k = v;
        }
        if let Some(v) = self.weights {
            p.fusion.weights = v;
        }
        let fusion_rule = match self.fusion_rule {
            Some(v) => {
                p.fusion.rule = v;
                Origin::Request
            }
            None => Origin::Base,
        };
        if let Some(v) = self.auto_interpolation {
            p.fusion.auto_interpolation = v;
        }
        if let Some(v) = self.min_score {
            p.fusion.min_score = v;
        }
        if let Some(v) = self.rerank {
            p.rerank = v;
        }
        if let Some(v) = self.bm25 {
            p.bm25 = v;
        }
        if let Some(v) = self.fuzzy_threshold {
            p.fuzzy_threshold = v;
        }
        let lexical_interpolation = match self.lexical_interpolation {
            Some(v) => {
                p.fusion.lexical_interpolation = Some(v);
                Origin::Request
            }
            None if base.fusion.lexical_interpolation.is_some() => Origin::Base,
            None => Origin::Unset,
        };
        (
            p,
            Provenance {
                lexical_interpolation,
                fusion_rule,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_keeps_what_is_unset_and_says_where_lambda_came_from() {
        let mut base = RetrievalParams::default();
        let (p, prov) = RetrievalOverrides::default().apply(&base);
        assert_eq!(p, base);
        assert_eq!(prov.lexical_interpolation, Origin::Unset);
        base.fusion.lexical_interpolation = Some(0.7);
        let (p, prov) = RetrievalOverrides::default().apply(&base);
        assert_eq!(p.fusion.lexical_interpolation, Some(0.7));
        assert_eq!(prov.lexical_interpolation, Origin::Base);
        let o = RetrievalOverrides {
            lexical_interpolation: Some(0.2),
            per_path_k: Some(7),
            ..Default::default()
        };
        let (p, prov) = o.apply(&base);
        assert_eq!(
            (p.fusion.lexical_interpolation, p.per_path_k),
            (Some(0.2), 7)
        );
        assert_eq!(prov.lexical_interpolation, Origin::Request);
    }
}
