//! `ragscope bench-store`: the same BEIR corpus and queries through the
//! embedded store and, when one is configured (`--store`), the PostgreSQL
//! store: ingest throughput, vector writes, the first query after the
//! writes, and query latency of the lexical and the hybrid pipeline.

use crate::bench::summary;
use crate::cli::{eval_params, BenchStoreArgs};
use crate::eval::{load_corpus, read_corpus, read_qrels, read_queries};
use crate::{core_err, App, UserFacing};
use rag_core::{KbSettings, PathKind, QueryRequest, Store};
use rag_engine::{Components, Engine, EngineConfig, QueryOptions};
use rag_store::{EmbeddedStore, OpenMode};
use std::sync::Arc;
use std::time::Instant;

/// Runs the query set `rounds + 1` times (the first round warms up) and
/// returns the latencies of the measured rounds, in milliseconds.
pub(crate) async fn latencies(
    engine: &Engine,
    app: &App,
    kb: &str,
    texts: &[String],
    params: &rag_core::RetrievalParams,
    rounds: usize,
) -> Vec<f64> {
    let mut samples = Vec::new();
    for round in 0..=rounds {
        for q in texts {
            let request = QueryRequest {
                kb: kb.to_owned(),
                query: q.clone(),
                params: Some(params.clone()),
                overrides: Default::default(),
                filters: Default::default(),
                generate: false,
                conversation_id: None,
            };
            let t = Instant::now();
            let _ = engine
                .run(
                    &app.tenant,
                    request,
                    QueryOptions {
                        views: false,
                        log: false,
                        viewer: rag_core::Viewer::Everything,
                    },
                    &mut |_| {},
                )
                .await;
            if round > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    samples
}

async fn one_store(
    app: &App,
    args: &BenchStoreArgs,
    name: &str,
    store: Arc<dyn Store>,
    texts: &[String],
) -> anyhow::Result<serde_json::Value> {
    let (embedder, cache) = app.embedder()?;
    let hybrid = embedder.is_some();
    let engine = Engine::new(
        Components {
            store,
            reranker: Arc::new(rag_core::IdentityReranker),
            embedder,
            second_embedder: None,
            dictionary: None,
            cache,
            generator: None,
            fetcher: None,
            extractor: None,
            webhook: None,
        },
        EngineConfig {
            max_query_bytes: 1 << 20,
            graph_in_background: false,
            ..EngineConfig::default()
        },
    );
    let ds = &args.dataset;
    let corpus = read_corpus(&ds.join("corpus.jsonl"))?;
    let docs = corpus.len();
    let bytes: usize = corpus
        .iter()
        .map(|d| d.title.len() + 1 + d.text.len())
        .sum();
    // A fresh knowledge base each run, removed afterwards.
    let kb_name = format!("bench-store-{}", std::process::id());
    if let Some(old) = engine
        .store()
        .kb_by_name(&app.tenant, &kb_name)
        .await
        .map_err(core_err)?
    {
        engine
            .store()
            .delete_kb(&app.tenant, old.id)
            .await
            .map_err(core_err)?;
    }
    let kb = engine
        .store()
        .create_kb(&app.tenant, &kb_name, KbSettings::default())
        .await
        .map_err(core_err)?;
    let started = Instant::now();
    load_corpus(&engine, &app.tenant, &kb, corpus).await?;
    let ingest = started.elapsed().as_secs_f64();
    let mut out = serde_json::json!({
        "store": name,
        "ingest_seconds": (ingest * 1000.0).round() / 1000.0,
        "ingest_docs_per_s": (docs as f64 / ingest).round(),
        "ingest_mb_per_s": ((bytes as f64 / 1e6 / ingest) * 1000.0).round() / 1000.0,
    });
    if hybrid {
        // Vectors come from the shared cache when it has them: this measures the store's writes.
        let started = Instant::now();
        let report = engine
            .reembed(&app.tenant, &kb_name, |_, _| {})
            .await
            .map_err(core_err)?;
        out["vector_write_seconds"] =
            serde_json::json!((started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0);
        out["vectors"] = serde_json::json!(report.needed);
        out["vectors_computed"] = serde_json::json!(report.computed);
    }
    let started = Instant::now();
    engine.index(&app.tenant, &kb).await.map_err(core_err)?;
    out["first_query_index_ms"] =
        serde_json::json!((started.elapsed().as_secs_f64() * 1e6).round() / 1000.0);

    let mut lexical = eval_params(app.config.retrieval.clone());
    lexical.paths.retain(|p| *p != PathKind::Dense);
    out["lexical_query"] =
        summary(latencies(&engine, app, &kb_name, texts, &lexical, args.rounds).await);
    if hybrid {
        let mut params = eval_params(app.config.retrieval.clone());
        if !params.paths.contains(&PathKind::Dense) {
            params.paths.push(PathKind::Dense);
        }
        out["hybrid_query"] =
            summary(latencies(&engine, app, &kb_name, texts, &params, args.rounds).await);
    }
    engine
        .store()
        .delete_kb(&app.tenant, kb.id)
        .await
        .map_err(core_err)?;
    Ok(out)
}

pub async fn run(app: &App, args: BenchStoreArgs) -> anyhow::Result<()> {
    let ds = &args.dataset;
    let queries = read_queries(&ds.join("queries.jsonl"))?;
    let qrels = read_qrels(&ds.join("qrels").join(format!("{}.tsv", args.split)))?;
    let mut ids: Vec<&String> = qrels.keys().collect();
    ids.sort();
    let texts: Vec<String> = ids
        .into_iter()
        .filter_map(|q| queries.get(q).cloned())
        .collect();
    if texts.is_empty() {
        return Err(UserFacing("no queries to run".into()).into());
    }
    let temp = tempfile::tempdir()?;
    let embedded = Arc::new(
        EmbeddedStore::open(temp.path(), OpenMode::ReadWrite)
            .map_err(|e| UserFacing(e.to_string()))?,
    );
    let mut results = vec![one_store(app, &args, "embedded", embedded, &texts).await?];
    if app.config.store.is_some() {
        let (pg, _) = app.stores(OpenMode::ReadWrite)?;
        results.push(one_store(app, &args, "postgres", pg, &texts).await?);
    }
    let out = serde_json::json!({
        "dataset": ds.file_name().and_then(|s| s.to_str()).unwrap_or(""),
        "queries": texts.len(),
        "rounds": args.rounds,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "stores": results,
    });
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}
