//! `ragscope tune`: chooses fusion parameters for a knowledge base on a
//! golden set by k-fold cross-validation.
//!
//! Retrieval runs once per question (every path of the knowledge base's
//! settings, with deep lists); each candidate's ranking is then fused again
//! in memory with `rag-fusion`, so the whole grid costs one retrieval per
//! question. The cross-validated gain (each fold's choice made on the other
//! folds only, scored on the fold) is reported with a paired-bootstrap 95 %
//! interval; the settings chosen on all questions are saved only when that
//! gain reaches `--min-gain` and the interval excludes zero.

use crate::tune_cv::{best_on, cross_validate, paired_bootstrap, Bootstrap};
use crate::{core_err, App, UserFacing};
use clap::Args;
use rag_core::metrics::{golden_ranking, passage_keys, score_expected, Metrics};
use rag_core::{
    FusionParams, FusionRule, KbSettings, LogFilter, PassageId, PathKind, PipelineEvent,
    QueryRequest, RankedList, RetrievalParams, Viewer, WriteOp,
};
use rag_engine::QueryOptions;
use rag_store::OpenMode;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// Reads one metric of a question's result.
type MetricFn = fn(&Metrics) -> f64;

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The knowledge base.
    #[arg(long)]
    pub kb: String,
    /// Golden set, JSON Lines: {"question": "...", "expected": [entry ids or document sources]}.
    #[arg(long, required_unless_present = "from_log")]
    pub golden: Option<PathBuf>,
    /// Use the query log instead: questions with "useful" feedback and the
    /// passages their answers cited.
    #[arg(long)]
    pub from_log: bool,
    /// Smallest cross-validated nDCG@10 gain that is saved.
    #[arg(long, default_value_t = 0.005)]
    pub min_gain: f64,
    /// Number of cross-validation folds.
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Seed of the folds and the bootstrap.
    #[arg(long, default_value_t = 20)]
    pub seed: u64,
    /// Report only; never save.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Deserialize)]
struct GoldenLine {
    question: String,
    expected: Vec<String>,
}

/// One question of the golden set with the paths' lists of its single run.
struct Sample {
    expected: Vec<String>,
    lists: Vec<RankedList>,
    /// λ the run applied (the query's suggestion, when automatic).
    applied_lambda: Option<f64>,
    /// The factor the automatic rule put on the second embedder's weight.
    second_factor: f64,
}

/// The fusion candidates: the current settings first, then a grid over the
/// rule, the RRF constant, λ (when the dense path returned candidates), the
/// lexical weights and, when the second embedder scored candidates, its
/// weight (halved and doubled).
pub fn candidates(current: &FusionParams, dense: bool, second: bool) -> Vec<FusionParams> {
    let mut out = vec![*current];
    // The grid around the current settings and around the defaults.
    let defaults = FusionParams {
        top_k: current.top_k,
        min_score: current.min_score,
        ..FusionParams::default()
    };
    for base in [*current, defaults] {
        grid_around(&base, dense, &mut out);
        if second {
            for factor in [0.5, 2.0] {
                let mut varied = base;
                varied.weights.second_dense *= factor;
                grid_around(&varied, dense, &mut out);
            }
        }
    }
    out
}

fn grid_around(current: &FusionParams, dense: bool, out: &mut Vec<FusionParams>) {
    let lambdas: Vec<Option<f64>> = if dense {
        vec![
            None,
            Some(0.2),
            Some(0.35),
            Some(0.5),
            Some(0.65),
            Some(0.8),
        ]
    } else {
        vec![current.lexical_interpolation]
    };
    for rule in [FusionRule::Convex, FusionRule::Rrf] {
        for k in [5.0, 20.0, 60.0, 120.0] {
            for lambda in &lambdas {
                for w in 0..3 {
                    let mut p = *current;
                    p.rule = rule;
                    p.k = k;
                    p.lexical_interpolation = *lambda;
                    match w {
                        1 => p.weights.bm25 = current.weights.bm25 * 2.0,
                        2 => {
                            for path in PathKind::LEXICAL {
                                if path != PathKind::Bm25 {
                                    p.weights.set(path, current.weights.of(path) * 0.5);
                                }
                            }
                        }
                        _ => {}
                    }
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
}

fn describe(p: &FusionParams) -> String {
    let lambda = match p.lexical_interpolation {
        Some(l) => format!("{l}"),
        None if p.auto_interpolation => "auto".into(),
        None => "none".into(),
    };
    let w = &p.weights;
    format!(
        "rule={} k={} λ={lambda} weights bm25={} substring={} fuzzy={} synonym={} fact={} translated={} dense={} second_dense={}",
        p.rule.as_str(),
        p.k,
        w.bm25,
        w.substring,
        w.fuzzy,
        w.synonym,
        w.fact,
        w.translated,
        w.dense,
        w.second_dense
    )
}

pub async fn run(app: &App, args: TuneArgs) -> anyhow::Result<()> {
    let engine = app.engine(OpenMode::ReadWrite)?;
    let tenant = app.tenant.clone();
    let kb = engine.kb(&tenant, &args.kb).await.map_err(core_err)?;
    let golden: Vec<GoldenLine> = if args.from_log {
        let rows = engine
            .store()
            .query_log(
                &tenant,
                kb.id,
                &LogFilter {
                    limit: 100_000,
                    viewer: Viewer::Everything,
                    ..Default::default()
                },
            )
            .await
            .map_err(core_err)?;
        rows.into_iter()
            .filter(|r| r.feedback.as_deref() == Some("useful") && !r.cited.is_empty())
            .map(|r| GoldenLine {
                question: r.rewritten_query.unwrap_or(r.query),
                expected: r.cited.iter().map(|c| c.id.to_string()).collect(),
            })
            .collect()
    } else {
        let path = args.golden.as_ref().expect("clap requires --golden");
        let text = std::fs::read_to_string(path)
            .map_err(|e| UserFacing(format!("{}: {e}", path.display())))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| UserFacing(format!("{}:{}: {e}", path.display(), i + 1)).into())
            })
            .collect::<anyhow::Result<_>>()?
    };
    let golden: Vec<GoldenLine> = golden
        .into_iter()
        .filter(|g| !g.expected.is_empty())
        .collect();
    if golden.len() < args.folds.max(2) {
        return Err(UserFacing(format!(
            "the golden set has {} questions with expected answers; {}-fold cross-validation needs at least {}",
            golden.len(),
            args.folds,
            args.folds.max(2)
        ))
        .into());
    }

    // One retrieval per question, deep lists, all the settings' paths.
    let current = kb.settings.retrieval.clone();
    let wide = RetrievalParams {
        per_path_k: current.per_path_k.max(100),
        rerank: false,
        fusion: FusionParams {
            top_k: 100,
            ..current.fusion
        },
        ..current.clone()
    };
    let index = engine.index(&tenant, &kb).await.map_err(core_err)?;
    // The names a passage answers to: its id, its entry or chunk uuid, its
    // document's id and its source; gathered for every listed passage.
    let mut keys: HashMap<PassageId, Vec<String>> = HashMap::new();
    let mut samples = Vec::with_capacity(golden.len());
    for g in &golden {
        let request = QueryRequest {
            kb: args.kb.clone(),
            query: g.question.clone(),
            params: Some(wide.clone()),
            overrides: Default::default(),
            filters: Default::default(),
            generate: false,
            conversation_id: None,
        };
        let (mut applied, mut second_factor) = (None, 1.0);
        let mut watch = |e: PipelineEvent| {
            if let PipelineEvent::Fused {
                lexical_interpolation,
                second_weight_factor,
                ..
            } = e
            {
                applied = lexical_interpolation;
                second_factor = second_weight_factor.unwrap_or(1.0);
            }
        };
        let result = engine
            .run(
                &tenant,
                request,
                QueryOptions {
                    views: false,
                    log: false,
                    viewer: Viewer::Everything,
                },
                &mut watch,
            )
            .await;
        let lists = match result {
            Ok(out) => out.lists,
            Err(e) if e.is_user_error() => Vec::new(),
            Err(e) => return Err(core_err(e)),
        };
        let new: Vec<PassageId> = lists
            .iter()
            .flat_map(|l| l.hits.iter().map(|h| h.id))
            .filter(|id| !keys.contains_key(id))
            .collect();
        let passages = engine
            .passages_by_id((&tenant, kb.id), &index, new.iter().copied())
            .await
            .map_err(core_err)?;
        for id in new {
            let p = passages.get(&id);
            let named = passage_keys(
                id,
                p.and_then(|p| p.doc),
                p.and_then(|p| p.source.as_deref()),
            );
            keys.insert(id, named);
        }
        samples.push(Sample {
            expected: g.expected.clone(),
            lists,
            applied_lambda: applied,
            second_factor,
        });
    }
    let dense = samples.iter().any(|s| {
        s.lists
            .iter()
            .any(|l| l.path == PathKind::Dense && !l.hits.is_empty())
    });
    let second = samples.iter().any(|s| {
        s.lists
            .iter()
            .any(|l| l.path == PathKind::SecondDense && !l.hits.is_empty())
    });
    let grid = candidates(&current.fusion, dense, second);
    let keys_of = |id: PassageId| -> Vec<String> {
        keys.get(&id)
            .cloned()
            .unwrap_or_else(|| passage_keys(id, None, None))
    };

    // metrics[candidate][question]
    let metrics: Vec<Vec<Metrics>> = grid
        .iter()
        .map(|params| {
            samples
                .iter()
                .map(|s| {
                    let mut p = *params;
                    p.top_k = 100;
                    if p.lexical_interpolation.is_none() && p.auto_interpolation {
                        p.lexical_interpolation = s.applied_lambda;
                        p.weights.second_dense *= s.second_factor;
                    }
                    let fused = rag_fusion::fuse(&s.lists, &p);
                    let hits: Vec<PassageId> = fused.hits.iter().map(|h| h.id).collect();
                    let ranked = golden_ranking(&hits, keys_of, &s.expected);
                    score_expected(&ranked, &s.expected)
                })
                .collect()
        })
        .collect();
    let objective: Vec<Vec<f64>> = metrics
        .iter()
        .map(|c| c.iter().map(|m| m.ndcg10).collect())
        .collect();
    let n = samples.len();
    let cv = cross_validate(n, args.folds, args.seed, |train| best_on(&objective, train));
    let mut held_out = vec![0usize; n];
    for fold in &cv {
        // No question scores the choice it helped make.
        debug_assert!(fold.test.iter().all(|q| !fold.train.contains(q)));
        for &q in &fold.test {
            held_out[q] = fold.chosen;
        }
    }
    let chosen = best_on(&objective, &(0..n).collect::<Vec<_>>());

    println!(
        "{n} questions, {} candidates, {}-fold cross-validation (choice by nDCG@10 on the other folds){}",
        grid.len(),
        cv.len(),
        if dense { "" } else { "; lexical paths only, λ not tuned" }
    );
    println!(
        "{:<10} {:>8} {:>8} {:>9}   95% CI (paired bootstrap)",
        "metric", "before", "after", "gain"
    );
    let mut ndcg_ci = None;
    let metric_fns: [(&str, MetricFn); 3] = [
        ("nDCG@10", |m| m.ndcg10),
        ("Recall@10", |m| m.recall10),
        ("MRR@10", |m| m.mrr10),
    ];
    for (name, f) in metric_fns {
        let before: Vec<f64> = metrics[0].iter().map(f).collect();
        let after: Vec<f64> = (0..n).map(|q| f(&metrics[held_out[q]][q])).collect();
        let b: Bootstrap = paired_bootstrap(&before, &after, 2000, args.seed);
        println!(
            "{name:<10} {:>8.4} {:>8.4} {:>+9.4}   [{:+.4}, {:+.4}]",
            before.iter().sum::<f64>() / n as f64,
            after.iter().sum::<f64>() / n as f64,
            b.mean,
            b.lo,
            b.hi
        );
        if name == "nDCG@10" {
            ndcg_ci = Some(b);
        }
    }
    let ci = ndcg_ci.expect("nDCG@10 is reported");
    let folds: Vec<String> = cv.iter().map(|f| f.chosen.to_string()).collect();
    println!("fold choices (candidate numbers): {}", folds.join(", "));
    println!("current: {}", describe(&grid[0]));
    println!("chosen:  {}", describe(&grid[chosen]));
    let refuse = if chosen == 0 {
        Some("the current settings are already the best candidate".to_owned())
    } else if ci.mean < args.min_gain {
        Some(format!(
            "the cross-validated nDCG@10 gain {:+.4} is below --min-gain {}",
            ci.mean, args.min_gain
        ))
    } else if !ci.excludes_zero_above() {
        Some(format!(
            "the 95% interval of the gain [{:+.4}, {:+.4}] does not exclude 0",
            ci.lo, ci.hi
        ))
    } else if args.dry_run {
        Some("--dry-run".to_owned())
    } else {
        None
    };
    match refuse {
        Some(why) => println!("not saved: {why}"),
        None => {
            let mut fusion = grid[chosen];
            fusion.top_k = current.fusion.top_k;
            let settings = KbSettings {
                retrieval: RetrievalParams {
                    fusion,
                    ..current.clone()
                },
                ..kb.settings.clone()
            };
            engine
                .store()
                .apply(&tenant, kb.id, vec![WriteOp::PutSettings(settings)])
                .await
                .map_err(core_err)?;
            println!("saved to the settings of knowledge base {}", args.kb);
        }
    }
    Ok(())
}
