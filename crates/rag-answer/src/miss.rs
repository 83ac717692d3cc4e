//! The honest miss: when retrieval found nothing good enough, no knowledge
//! goes into the prompt and the user gets a short "not found" reply in the
//! question's language that invites them to rephrase or ask for a person.
//!
//! The decision reads two signals against a knowledge base's thresholds: the
//! best normalised fused score (1.0 = first in every path) and the best
//! cosine of the dense path. A query is a miss when there is no hit, when
//! the fused score is under its threshold, or when the dense path ran and its
//! best cosine is under its threshold. A signal that was not measured (no
//! dense path) does not decide.

use crate::lang::AnswerLanguage;
use serde::{Deserialize, Serialize};

/// A knowledge base's miss thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MissThresholds {
    /// Minimum best normalised fused score. A hit ranked first by one path
    /// of six equally weighted ones scores about 0.17, so keep this low;
    /// `None` disables the check.
    pub min_fused: Option<f64>,
    /// Minimum best cosine of the dense path (query vs passage); `None`
    /// disables the check. Measured with multilingual-e5-small over the demo
    /// FAQ ("question: answer" passages): relevant questions in the entries'
    /// language score 0.90–0.94; off-topic Chinese questions 0.86–0.87; a
    /// relevant English question over the Chinese entries 0.82; off-topic
    /// English questions 0.74–0.81. The default 0.80 therefore only catches
    /// clear misses and keeps cross-language questions; a knowledge base
    /// asked in its own language can use about 0.89.
    pub min_cosine: Option<f32>,
}

impl Default for MissThresholds {
    fn default() -> Self {
        MissThresholds {
            min_fused: Some(0.05),
            min_cosine: Some(0.80),
        }
    }
}

/// What retrieval measured for a query.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MissSignals {
    /// Number of hits after fusion (and reranking).
    pub hits: usize,
    /// Best normalised fused score, if any hit.
    pub best_fused: Option<f64>,
    /// Best cosine of the dense path, if it ran and found anything.
    pub best_cosine: Option<f32>,
}

/// Why a query is a miss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum MissReason {
    /// Retrieval returned nothing.
    NoHits,
    /// The best fused score is under the threshold.
    LowFusedScore {
        /// Best normalised fused score.
        best: f64,
        /// Threshold.
        min: f64,
    },
    /// The best cosine is under the threshold.
    LowCosine {
        /// Best cosine.
        best: f32,
        /// Threshold.
        min: f32,
    },
}

impl std::fmt::Display for MissReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MissReason::NoHits => write!(f, "no hits"),
            MissReason::LowFusedScore { best, min } => {
                write!(f, "best normalised fused score {best:.3} is under {min:.3}")
            }
            MissReason::LowCosine { best, min } => {
                write!(f, "best cosine {best:.3} is under {min:.3}")
            }
        }
    }
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissDecision {
    /// Whether the knowledge base has no answer (log `kb_miss=true`, queue for the maintainer).
    pub kb_miss: bool,
    /// Every reason that applied (empty when not a miss).
    pub reasons: Vec<MissReason>,
}

/// Decides whether a query is a knowledge-base miss.
pub fn decide_miss(signals: &MissSignals, thresholds: &MissThresholds) -> MissDecision {
    let mut reasons = Vec::new();
    if signals.hits == 0 || signals.best_fused.is_none() {
        reasons.push(MissReason::NoHits);
    }
    if let (Some(best), Some(min)) = (signals.best_fused, thresholds.min_fused) {
        if best < min {
            reasons.push(MissReason::LowFusedScore { best, min });
        }
    }
    if let (Some(best), Some(min)) = (signals.best_cosine, thresholds.min_cosine) {
        if best < min {
            reasons.push(MissReason::LowCosine { best, min });
        }
    }
    MissDecision {
        kb_miss: !reasons.is_empty(),
        reasons,
    }
}

/// The short reply to a miss: the fixed sentence, then an invitation to
/// rephrase or ask for a person.
pub fn miss_reply(language: AnswerLanguage) -> &'static str {
    match language {
        AnswerLanguage::Zh => "知识库中没有相关信息。您可以换个说法再问一次，或者联系人工客服。",
        AnswerLanguage::En => "The knowledge base does not cover this. You can rephrase the question, or ask to talk to a person.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_decide() {
        let t = MissThresholds::default();
        let good = MissSignals {
            hits: 3,
            best_fused: Some(0.4),
            best_cosine: Some(0.86),
        };
        assert_eq!(
            decide_miss(&good, &t),
            MissDecision {
                kb_miss: false,
                reasons: vec![]
            }
        );
        let d = decide_miss(
            &MissSignals {
                best_cosine: Some(0.76),
                ..good
            },
            &t,
        );
        assert!(d.kb_miss);
        assert_eq!(
            d.reasons,
            vec![MissReason::LowCosine {
                best: 0.76,
                min: 0.80
            }]
        );
        let d = decide_miss(
            &MissSignals {
                best_fused: Some(0.01),
                best_cosine: None,
                ..good
            },
            &t,
        );
        assert_eq!(
            d.reasons,
            vec![MissReason::LowFusedScore {
                best: 0.01,
                min: 0.05
            }]
        );
        // Without a dense path, the cosine does not decide.
        assert!(
            !decide_miss(
                &MissSignals {
                    best_cosine: None,
                    ..good
                },
                &t
            )
            .kb_miss
        );
        assert_eq!(
            decide_miss(&MissSignals::default(), &t).reasons,
            vec![MissReason::NoHits]
        );
        // Disabled thresholds.
        let off = MissThresholds {
            min_fused: None,
            min_cosine: None,
        };
        assert!(
            !decide_miss(
                &MissSignals {
                    best_cosine: Some(0.1),
                    best_fused: Some(0.001),
                    hits: 1
                },
                &off
            )
            .kb_miss
        );
    }

    #[test]
    fn replies_start_with_the_fixed_sentence() {
        for l in [AnswerLanguage::Zh, AnswerLanguage::En] {
            assert!(miss_reply(l).starts_with(l.not_covered_sentence()));
        }
        assert!(miss_reply(AnswerLanguage::Zh).contains("人工"));
        assert!(miss_reply(AnswerLanguage::En).contains("rephrase"));
    }
}
