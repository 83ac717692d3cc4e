//! The restarted process of `ragscope bench-scale --restarted-process`.
//!
//! The benchmark process holds everything it built, so its own memory says
//! little about a server's. When asked, it starts this binary again (the
//! hidden `bench-scale-restart` command, with the same global flags) over
//! the store and index files it leaves: the child opens them as a
//! restarted server does (index files read in place), loads the configured
//! embedder beside (the e5 model by default: a server holds it to embed
//! questions, while the benchmark's questions keep their synthetic vectors
//! so that they match the stored ones), answers one question, then the
//! benchmark's questions from several streams at once, and reports its
//! cold start, latency and memory as one JSON object on stdout.

use crate::bench::summary;
use crate::bench_scale::{bench_queries, options, request, rss_kb, SyntheticVectors};
use crate::cli::{eval_params, BenchScaleArgs};
use crate::{core_err, App, UserFacing};
use anyhow::Context;
use clap::Args;
use rag_core::PathKind;
use rag_engine::{Components, Engine, EngineConfig};
use rag_store::{EmbeddedStore, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct RestartArgs {
    /// The benchmark's data directory (store and `index/`).
    #[arg(long)]
    pub data: PathBuf,
    /// The evaluation directory the queries come from.
    #[arg(long)]
    pub eval_dir: PathBuf,
    /// The knowledge base has synthetic vectors: query with them, all paths.
    #[arg(long)]
    pub synthetic_vectors: bool,
    /// Concurrent query streams.
    #[arg(long, default_value_t = 8)]
    pub streams: usize,
}

/// Starts the restarted process over `data` and returns its report.
pub fn spawn(args: &BenchScaleArgs, data: &Path) -> anyhow::Result<serde_json::Value> {
    let program = std::env::current_exe().context("locating the ragscope binary")?;
    // The global flags of this run (those before the command), so that the
    // child has the same configuration.
    let all: Vec<String> = std::env::args().skip(1).collect();
    let globals = &all[..all.iter().position(|a| a == "bench-scale").unwrap_or(0)];
    let mut cmd = std::process::Command::new(program);
    cmd.args(globals)
        .arg("bench-scale-restart")
        .arg("--data")
        .arg(data)
        .arg("--eval-dir")
        .arg(&args.eval_dir)
        .arg("--streams")
        .arg(args.streams.max(1).to_string());
    if args.synthetic_vectors {
        cmd.arg("--synthetic-vectors");
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting the restarted process")?;
    if !out.status.success() {
        anyhow::bail!("the restarted process failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("reading the restarted process's report")
}

fn mib(kib: u64) -> u64 {
    kib / 1024
}

pub async fn run(app: &App, args: RestartArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let queries = bench_queries(&args.eval_dir)?;
    let first = queries
        .first()
        .cloned()
        .ok_or_else(|| UserFacing("no queries".into()))?;
    // The configured embedder, loaded and used once, as a server holds it.
    let (model, _) = app.embedder()?;
    let model_id = model.as_ref().map(|m| m.model_id().to_owned());
    if let Some(m) = &model {
        m.embed_query(&first).await.map_err(core_err)?;
    }
    let model_ms = started.elapsed().as_secs_f64() * 1000.0;
    let store = Arc::new(
        EmbeddedStore::open(&args.data, OpenMode::ReadOnly)
            .map_err(|e| UserFacing(e.to_string()))?,
    );
    let mut components = Components::lexical(store);
    if args.synthetic_vectors {
        components.embedder = Some(Arc::new(SyntheticVectors));
    }
    let engine = Engine::new(
        components,
        EngineConfig {
            index_dir: Some(args.data.join("index")),
            read_saved_in_place: true,
            sentence_vectors: app.config.embedder.sentence_vectors,
            segment_passages: app.config.index.segment_passages.max(1),
            ..EngineConfig::default()
        },
    );
    let lexical = eval_params(app.config.retrieval.clone());
    let params = if args.synthetic_vectors {
        rag_core::RetrievalParams {
            paths: PathKind::ALL.to_vec(),
            ..lexical
        }
    } else {
        lexical
    };
    let t = Instant::now();
    engine
        .run(
            &app.tenant,
            request("scale", &first, &params),
            options(),
            &mut |_| {},
        )
        .await
        .map_err(core_err)?;
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    let to_first_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (rss_after_first, _) = rss_kb();
    // Every stream asks every question once, each from its own place.
    let mut streams = Vec::new();
    for s in 0..args.streams.max(1) {
        let (engine, tenant, queries, params) = (
            engine.clone(),
            app.tenant.clone(),
            queries.clone(),
            params.clone(),
        );
        streams.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(queries.len());
            for i in 0..queries.len() {
                let q = &queries[(i + s * 25) % queries.len()];
                let t = Instant::now();
                let _ = engine
                    .run(
                        &tenant,
                        request("scale", q, &params),
                        options(),
                        &mut |_| {},
                    )
                    .await;
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            samples
        }));
    }
    let wall = Instant::now();
    let mut latencies = Vec::new();
    for s in streams {
        latencies.extend(s.await?);
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let kb = engine.kb(&app.tenant, "scale").await.map_err(core_err)?;
    let index = engine.index(&app.tenant, &kb).await.map_err(core_err)?;
    let dense = index.dense.as_ref().and_then(|d| d.as_ref().ok());
    let me = std::process::id();
    let (rss_end, rss_peak) = rss_kb();
    let kib = |field: &str| crate::bench_http::rss_kib(me, field).unwrap_or(0);
    let report = serde_json::json!({
        "embedder_loaded": model_id,
        "embedder_load_ms": model_ms.round(),
        "cold_start_to_first_answer_ms": to_first_ms.round(),
        "first_query_ms": first_ms.round(),
        "lexical_read_in_place_mb": (index.lexical.shared_bytes() as f64 / 1e6).round(),
        "dense_parts_read_in_place": dense.map_or(0, |d| d.parts_in_place()),
        "dense_vectors": dense.map_or(0, |d| d.len()),
        "streams": args.streams.max(1),
        "queries": latencies.len(),
        "queries_per_second": (latencies.len() as f64 / wall_s * 10.0).round() / 10.0,
        "query_ms_under_streams": summary(latencies),
        "rss_after_first_answer_mb": mib(rss_after_first),
        "rss_end_mb": mib(rss_end),
        "rss_end_anon_mb": mib(kib("RssAnon:")),
        "rss_end_file_mb": mib(kib("RssFile:")),
        "rss_peak_mb": mib(rss_peak),
    });
    println!("{report}");
    Ok(())
}
