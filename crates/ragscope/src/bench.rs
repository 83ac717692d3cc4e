//! `ragscope bench`: indexing throughput and query latency on a BEIR dataset.

use crate::cli::{eval_params, BenchArgs};
use crate::eval::{load_corpus, read_corpus, read_qrels, read_queries};
use crate::{core_err, App, UserFacing};
use rag_core::{now, ChunkId, KbSettings, KbSnapshot, Passage, PassageId};
use rag_engine::{Components, Engine, EngineConfig};
use rag_lexical::{Filter, LexicalIndex};
use rag_store::{EmbeddedStore, OpenMode};
use rag_text::Analyzer;
use std::sync::Arc;
use std::time::Instant;

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub(crate) fn summary(mut samples: Vec<f64>) -> serde_json::Value {
    samples.sort_by(f64::total_cmp);
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    serde_json::json!({
        "p50_ms": (percentile(&samples, 50.0) * 1000.0).round() / 1000.0,
        "p99_ms": (percentile(&samples, 99.0) * 1000.0).round() / 1000.0,
        "mean_ms": (mean * 1000.0).round() / 1000.0,
        "samples": samples.len(),
    })
}

pub async fn run(app: &App, args: BenchArgs) -> anyhow::Result<()> {
    let ds = &args.dataset;
    let corpus = read_corpus(&ds.join("corpus.jsonl"))?;
    let queries = read_queries(&ds.join("queries.jsonl"))?;
    let qrels = read_qrels(&ds.join("qrels").join(format!("{}.tsv", args.split)))?;
    let texts: Vec<String> = qrels
        .keys()
        .filter_map(|q| queries.get(q).cloned())
        .collect();
    if texts.is_empty() || args.rounds == 0 {
        return Err(UserFacing("no queries to run".into()).into());
    }
    let corpus_bytes: usize = corpus
        .iter()
        .map(|d| d.title.len() + 1 + d.text.len())
        .sum();

    // Indexing: analysis and inverted-index construction from an in-memory snapshot.
    let analyzer = Analyzer::new();
    let _ = analyzer.analyze("预热 warm-up", rag_text::Mode::Index);
    let ts = now();
    let passages: Vec<Passage> = corpus
        .iter()
        .map(|d| Passage {
            id: PassageId::Chunk(ChunkId::generate()),
            title: d.title.clone(),
            body: d.text.clone(),
            tags: vec![],
            aliases: vec![],
            doc: None,
            source: Some(d.id.clone()),
            span: None,
            created_at: ts,
            valid_from: None,
            valid_until: None,
            searchable: true,
            owner: None,
        })
        .collect();
    let snapshot = KbSnapshot {
        seq: 1,
        passages,
        ..Default::default()
    };
    let started = Instant::now();
    let index =
        tokio::task::spawn_blocking(move || LexicalIndex::build(&analyzer, &snapshot)).await?;
    let index_secs = started.elapsed().as_secs_f64();

    let params = eval_params(app.config.retrieval.clone());
    // BM25 alone: analysis + top-100, the same work bm25s does per query.
    let ix = Arc::new(index);
    let (ix2, texts2, bm25p) = (ix.clone(), texts.clone(), params.bm25);
    let rounds = args.rounds;
    let bm25_samples = tokio::task::spawn_blocking(move || {
        let filter = Filter::everything();
        let mut samples = Vec::new();
        for round in 0..=rounds {
            for q in &texts2 {
                let t = Instant::now();
                let aq = ix2.analyze_query(q);
                let list = ix2.bm25(&aq, 100, &bm25p, &filter);
                std::hint::black_box(list);
                if round > 0 {
                    samples.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
        }
        samples
    })
    .await?;

    // The whole lexical pipeline through the engine (all five paths, fusion, events off).
    let temp = tempfile::tempdir()?;
    let store = EmbeddedStore::open(temp.path(), OpenMode::ReadWrite)
        .map_err(|e| UserFacing(e.to_string()))?;
    let engine = Engine::new(
        Components::lexical(Arc::new(store)),
        EngineConfig {
            max_query_bytes: 1 << 20,
            ..EngineConfig::default()
        },
    );
    let kb = engine
        .store()
        .create_kb(&app.tenant, "bench", KbSettings::default())
        .await
        .map_err(core_err)?;
    load_corpus(
        &engine,
        &app.tenant,
        &kb,
        read_corpus(&ds.join("corpus.jsonl"))?,
    )
    .await?;
    engine.index(&app.tenant, &kb).await.map_err(core_err)?;
    let pipeline_samples =
        crate::bench_store::latencies(&engine, app, "bench", &texts, &params, rounds).await;

    let out = serde_json::json!({
        "engine": "ragscope",
        "version": env!("CARGO_PKG_VERSION"),
        "dataset": ds.file_name().and_then(|s| s.to_str()).unwrap_or(""),
        "split": args.split,
        "docs": corpus.len(),
        "corpus_mb": (corpus_bytes as f64 / 1e6 * 1000.0).round() / 1000.0,
        "queries": texts.len(),
        "rounds": rounds,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "index_seconds": (index_secs * 1000.0).round() / 1000.0,
        "index_docs_per_s": (corpus.len() as f64 / index_secs).round(),
        "index_mb_per_s": ((corpus_bytes as f64 / 1e6 / index_secs) * 1000.0).round() / 1000.0,
        "bm25_query": summary(bm25_samples),
        "lexical_pipeline_query": summary(pipeline_samples),
    });
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}
