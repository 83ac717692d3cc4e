//! `ragscope bench-scale`: a knowledge base of N synthetic documents, and
//! what a user of that size sees: load time, the first index build, query
//! latency, and how long a write takes to become visible while query
//! streams run.
//!
//! The corpus is deterministic: documents of four to twelve sentences drawn
//! with a fixed seed from SciFact (English) and CMRC 2018 (Chinese) in the
//! evaluation directory, one Chinese document in four. Lexical paths only,
//! unless `--synthetic-vectors` gives every passage and query a synthetic
//! 384-dimensional vector (clustered around 200 centres, drawn from a hash
//! of the text; rag-ann's `ann_bench` measures recall on the same kind of
//! data): then the dense path runs too, the index files (lexical, and dense
//! with its graph) are written and read back by a second engine as a
//! restarted process would, and queries are timed per path mix.

use crate::bench::summary;
use crate::cli::{eval_params, BenchScaleArgs};
use crate::eval::{load_corpus, read_corpus, read_queries, CorpusDoc};
use crate::{core_err, App, UserFacing};
use rag_core::{CoreError, Embedder, KbSettings, PathKind, QueryRequest, Viewer};
use rag_engine::{Components, Engine, EngineConfig, NewFaq, QueryOptions};
use rag_store::{EmbeddedStore, OpenMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Dimensions of the synthetic vectors (those of the bundled e5 model).
const SYNTHETIC_DIMS: usize = 384;

/// A stand-in embedder for scale runs: the text's hash picks one of 200
/// centres and seeds the noise around it, so equal texts get equal vectors
/// and the collection is clustered as sentence embeddings are.
pub(crate) struct SyntheticVectors;

impl SyntheticVectors {
    fn vector(text: &str) -> Vec<f32> {
        let h = rag_ann::format::checksum(text.as_bytes());
        let centre = rag_ann::synthetic::SplitMix64::new(h % 200).gaussian_vec(SYNTHETIC_DIMS);
        let noise = rag_ann::synthetic::SplitMix64::new(h).gaussian_vec(SYNTHETIC_DIMS);
        centre.iter().zip(&noise).map(|(c, n)| c + n).collect()
    }
}

#[async_trait::async_trait]
impl Embedder for SyntheticVectors {
    fn model_id(&self) -> &str {
        "bench/synthetic-clustered-384"
    }
    fn dimensions(&self) -> usize {
        SYNTHETIC_DIMS
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(Self::vector(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

/// Milliseconds of each query of `queries` run once with `params`.
async fn timed(
    engine: &Engine,
    tenant: &rag_core::TenantId,
    queries: &[String],
    params: &rag_core::RetrievalParams,
) -> Vec<f64> {
    timed_per_path(engine, tenant, queries, params).await.0
}

/// As [`timed`], with each recall path's own milliseconds per query (from
/// its `recall` event), keyed by the path's name.
async fn timed_per_path(
    engine: &Engine,
    tenant: &rag_core::TenantId,
    queries: &[String],
    params: &rag_core::RetrievalParams,
) -> (Vec<f64>, std::collections::BTreeMap<String, Vec<f64>>) {
    let mut out = Vec::with_capacity(queries.len());
    let mut paths: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for q in queries {
        let t = Instant::now();
        let _ = engine
            .run(tenant, request("scale", q, params), options(), &mut |e| {
                if let rag_core::PipelineEvent::Recall {
                    list, elapsed_ms, ..
                } = e
                {
                    paths
                        .entry(list.path.as_str().to_owned())
                        .or_default()
                        .push(elapsed_ms);
                }
            })
            .await;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (out, paths)
}

fn dir_mb(dir: &std::path::Path) -> f64 {
    let bytes: u64 = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    (bytes as f64 / 1e5).round() / 10.0
}

/// A small deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

fn sentences(text: &str) -> Vec<String> {
    text.split_inclusive(['.', '。', '！', '？', '!', '?'])
        .map(str::trim)
        .filter(|s| s.chars().count() >= 8)
        .map(str::to_owned)
        .collect()
}

/// Bytes as megabytes, one decimal.
fn mb(bytes: usize) -> f64 {
    (bytes as f64 / 1e5).round() / 10.0
}

/// Kibibytes of this process's resident memory now and at the peak (0 where
/// Linux's `/proc` is missing).
pub(crate) fn rss_kb() -> (u64, u64) {
    let me = std::process::id();
    (
        crate::bench_http::rss_kib(me, "VmRSS:").unwrap_or(0),
        crate::bench_http::rss_kib(me, "VmHWM:").unwrap_or(0),
    )
}

pub(crate) fn request(kb: &str, query: &str, params: &rag_core::RetrievalParams) -> QueryRequest {
    QueryRequest {
        kb: kb.to_owned(),
        query: query.to_owned(),
        params: Some(params.clone()),
        overrides: Default::default(),
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    }
}

pub(crate) fn options() -> QueryOptions {
    QueryOptions {
        views: false,
        log: false,
        viewer: Viewer::Everything,
    }
}

/// The benchmark's queries: the first 150 SciFact and 50 CMRC 2018 queries
/// in text order.
pub(crate) fn bench_queries(eval: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let sorted = |path: std::path::PathBuf, n: usize| -> anyhow::Result<Vec<String>> {
        let mut q: Vec<String> = read_queries(&path)?.into_values().collect();
        q.sort();
        q.truncate(n);
        Ok(q)
    };
    let mut queries = sorted(eval.join("scifact/queries.jsonl"), 150)?;
    queries.extend(sorted(eval.join("cmrc2018/queries.jsonl"), 50)?);
    Ok(queries)
}

pub async fn run(app: &App, args: BenchScaleArgs) -> anyhow::Result<()> {
    let eval = &args.eval_dir;
    let en: Vec<String> = read_corpus(&eval.join("scifact/corpus.jsonl"))?
        .iter()
        .flat_map(|d| sentences(&d.text))
        .collect();
    let zh: Vec<String> = read_corpus(&eval.join("cmrc2018/corpus.jsonl"))?
        .iter()
        .flat_map(|d| sentences(&d.text))
        .collect();
    if en.is_empty() || zh.is_empty() {
        return Err(UserFacing("no sentences in the evaluation corpora".into()).into());
    }
    let queries = bench_queries(eval)?;

    let mut rng = Lcg(0x5eed);
    let mut corpus = Vec::with_capacity(args.docs);
    let mut bytes = 0usize;
    for i in 0..args.docs {
        let pool = if i % 4 == 3 { &zh } else { &en };
        let n = 4 + rng.next(9);
        let text: Vec<&str> = (0..n)
            .map(|_| pool[rng.next(pool.len())].as_str())
            .collect();
        let text = text.join(" ");
        bytes += text.len();
        corpus.push(CorpusDoc {
            id: format!("doc-{i}"),
            title: format!("Document {i}"),
            text,
        });
    }

    let temp = tempfile::tempdir()?;
    // The configured PostgreSQL store when one is given (`--store`), else an
    // embedded store in a temporary directory.
    let postgres = app.config.store.is_some();
    let store: Arc<dyn rag_core::Store> = if postgres {
        app.stores(OpenMode::ReadWrite)?.0
    } else {
        Arc::new(
            EmbeddedStore::open(temp.path(), OpenMode::ReadWrite)
                .map_err(|e| UserFacing(e.to_string()))?,
        )
    };
    let index_dir = temp.path().join("index");
    let index_files = (args.synthetic_vectors || args.index_files) && !postgres;
    let new_engine = || {
        let mut components = Components::lexical(store.clone());
        let mut config = EngineConfig {
            segment_passages: args
                .segment_passages
                .unwrap_or(app.config.index.segment_passages)
                .max(1),
            sentence_vectors: app.config.embedder.sentence_vectors,
            ..EngineConfig::default()
        };
        if args.synthetic_vectors {
            components.embedder = Some(Arc::new(SyntheticVectors));
        }
        if index_files {
            config.index_dir = Some(index_dir.clone());
            // As a server does: once written, the files are read in place.
            config.read_saved_in_place = true;
        }
        Engine::new(components, config)
    };
    let engine = new_engine();
    if postgres
        && engine
            .store()
            .kb_by_name(&app.tenant, "scale")
            .await
            .map_err(core_err)?
            .is_some()
    {
        // A database kept from an earlier run: start from nothing.
        engine
            .delete_kb(&app.tenant, "scale")
            .await
            .map_err(core_err)?;
    }
    let kb = engine
        .store()
        .create_kb(&app.tenant, "scale", KbSettings::default())
        .await
        .map_err(core_err)?;
    let started = Instant::now();
    load_corpus(&engine, &app.tenant, &kb, corpus).await?;
    let load_s = started.elapsed().as_secs_f64();
    let (_, rss_load_peak) = rss_kb();
    let mut embed_s = None;
    if args.synthetic_vectors {
        let started = Instant::now();
        engine
            .reembed(&app.tenant, "scale", |_, _| {})
            .await
            .map_err(core_err)?;
        embed_s = Some(started.elapsed().as_secs_f64());
        if let Some(dir) = &args.export {
            export(engine.store().as_ref(), &app.tenant, &kb, &queries, dir).await?;
        }
    }
    let started = Instant::now();
    let built = engine.index(&app.tenant, &kb).await.map_err(core_err)?;
    let build_s = started.elapsed().as_secs_f64();
    let (rss_built, rss_build_peak) = rss_kb();
    let dense_kind = built
        .dense
        .as_ref()
        .and_then(|d| d.as_ref().ok())
        .map(|d| d.kind().as_str());
    drop(built);
    let mut files = serde_json::Value::Null;
    if args.synthetic_vectors && postgres {
        // No index files: a restarted process builds what it keeps in
        // memory from the database.
        let second = new_engine();
        let started = Instant::now();
        second.index(&app.tenant, &kb).await.map_err(core_err)?;
        files = serde_json::json!({
            "built_by_a_new_process_seconds": (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
        });
    } else if index_files {
        // The graph is built in the background after the first build, and
        // the files written once it is in.
        let started = Instant::now();
        let (rss_before_flush, _) = rss_kb();
        engine.flush_index_files().await;
        let write_s = started.elapsed().as_secs_f64();
        let (rss_after_flush, _) = rss_kb();
        let graph_kind = engine
            .index(&app.tenant, &kb)
            .await
            .map_err(core_err)?
            .dense
            .as_ref()
            .and_then(|d| d.as_ref().ok())
            .map(|d| d.kind().as_str());
        // A restarted process: reads both files instead of building.
        let second = new_engine();
        let (rss_before_read, _) = rss_kb();
        let started = Instant::now();
        let read = second.index(&app.tenant, &kb).await.map_err(core_err)?;
        let read_s = started.elapsed().as_secs_f64();
        let (rss_after_read, _) = rss_kb();
        let read_dense = read.dense.as_ref().and_then(|d| d.as_ref().ok());
        let parts = read_dense.map_or(0, |d| d.part_count());
        files = serde_json::json!({
            "graph_build_and_write_seconds": (write_s * 100.0).round() / 100.0,
            "dense_index_after_graph_build": graph_kind,
            "size_mb": dir_mb(&index_dir),
            "read_by_a_new_process_seconds": (read_s * 100.0).round() / 100.0,
            "dense_parts_read": parts,
            "dense_parts_read_in_place": read_dense.map_or(0, |d| d.parts_in_place()),
            "dense_vector_heap_mb_read": read_dense.map_or(0.0, |d| mb(d.vector_heap_bytes())),
            // Both engines live in this process: what reading the files
            // added to it, and what the first engine gave back when it
            // switched to reading its vectors from the file it wrote.
            "rss_added_by_reading_mb": (rss_after_read as i64 - rss_before_read as i64) / 1024,
            "rss_change_across_graph_build_and_write_mb": (rss_after_flush as i64 - rss_before_flush as i64) / 1024,
        });
    }

    let lexical = eval_params(app.config.retrieval.clone());
    let with_paths = |paths: &[PathKind]| rag_core::RetrievalParams {
        paths: paths.to_vec(),
        ..lexical.clone()
    };
    let (dense, hybrid) = (with_paths(&[PathKind::Dense]), with_paths(&PathKind::ALL));
    // One warm-up round, then the timed one.
    timed(&engine, &app.tenant, &queries, &lexical).await;
    let (quiet, quiet_paths) = timed_per_path(&engine, &app.tenant, &queries, &lexical).await;
    let mut per_path = serde_json::Map::new();
    per_path.insert(
        "lexical_recall_path_ms".into(),
        quiet_paths
            .into_iter()
            .map(|(path, ms)| (path, summary(ms)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    );
    if args.synthetic_vectors {
        timed(&engine, &app.tenant, &queries, &dense).await;
        per_path.insert(
            "dense_pipeline_query_quiet".into(),
            summary(timed(&engine, &app.tenant, &queries, &dense).await),
        );
        per_path.insert(
            "hybrid_pipeline_query_quiet".into(),
            summary(timed(&engine, &app.tenant, &queries, &hybrid).await),
        );
        let (pipeline, direct) = dense_recall(&engine, &app.tenant, &kb, &queries, &dense).await?;
        // Through the pipeline the best candidates are rescored by their
        // sentence vectors when those are on: synthetic sentence vectors
        // are drawn apart from their passage's, so the figure is then no
        // ANN recall (the index's own is the next one).
        per_path.insert(
            "dense_recall_at_10_vs_exact".into(),
            serde_json::json!(pipeline),
        );
        per_path.insert(
            "sentence_vectors".into(),
            serde_json::json!(app.config.embedder.sentence_vectors),
        );
        per_path.insert(
            "dense_index_recall_at_10_vs_exact".into(),
            serde_json::json!(direct),
        );
    }
    // The write phase runs the knowledge base's full path mix.
    let params = if args.synthetic_vectors {
        hybrid.clone()
    } else {
        lexical.clone()
    };

    // Writes while query streams run: each write is an FAQ entry with a
    // word no other passage has; visible once a query for it finds it.
    let stop = Arc::new(AtomicBool::new(false));
    let mut streams = Vec::new();
    for s in 0..args.streams {
        let (engine, tenant, queries, params, stop) = (
            engine.clone(),
            app.tenant.clone(),
            queries.clone(),
            params.clone(),
            stop.clone(),
        );
        streams.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut i = s * 7;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let _ = engine
                    .run(
                        &tenant,
                        request("scale", &queries[i % queries.len()], &params),
                        options(),
                        &mut |_| {},
                    )
                    .await;
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
                i += 1;
            }
            samples
        }));
    }
    let mut visible = Vec::new();
    let interval = Duration::from_millis(1000 / args.writes_per_second.max(1));
    for w in 0..args.writes {
        let tick = Instant::now();
        let marker = format!("zqx{w}marker");
        let t = Instant::now();
        engine
            .create_faq(
                &app.tenant,
                "scale",
                NewFaq {
                    question: format!("What is {marker}?"),
                    answer: format!("{marker} is written by the scale benchmark."),
                    tags: vec![],
                    source_url: None,
                    status: None,
                    valid_from: None,
                    valid_until: None,
                },
            )
            .await
            .map_err(core_err)?;
        let out = engine
            .run(
                &app.tenant,
                request("scale", &marker, &params),
                options(),
                &mut |_| {},
            )
            .await
            .map_err(core_err)?;
        if out.reranked.is_empty() {
            anyhow::bail!("write {w} was not visible to the next query");
        }
        visible.push(t.elapsed().as_secs_f64() * 1000.0);
        if let Some(rest) = interval.checked_sub(tick.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut during = Vec::new();
    for s in streams {
        during.extend(s.await?);
    }
    let longest = during.iter().copied().fold(0.0, f64::max);
    let (rss_now, rss_peak) = rss_kb();
    let index = engine.index(&app.tenant, &kb).await.map_err(core_err)?;

    let dense_now = index
        .dense
        .as_ref()
        .and_then(|d| d.as_ref().ok())
        .map(|d| serde_json::json!({"vectors": d.len(), "parts": d.part_count(), "kind": d.kind().as_str(), "parts_in_place": d.parts_in_place(), "vector_heap_mb": mb(d.vector_heap_bytes())}));
    let mut out = serde_json::json!({
        "store": if postgres { "postgres" } else { "embedded" },
        "docs": args.docs,
        "synthetic_vectors": args.synthetic_vectors,
        "embed_seconds": embed_s.map(|s| (s * 100.0).round() / 100.0),
        "dense_index_after_build": dense_kind,
        "dense_index_end": dense_now,
        "index_files": files,
        "corpus_mb": (bytes as f64 / 1e6 * 10.0).round() / 10.0,
        "passages": index.lexical.len(),
        "segments": index.lexical.segment_count(),
        "load_seconds": (load_s * 100.0).round() / 100.0,
        "first_index_build_seconds": (build_s * 100.0).round() / 100.0,
        "rss_after_build_mb": rss_built / 1024,
        // The store load and the first build: what a process that builds
        // this knowledge base's indexes needs at most.
        "rss_peak_to_first_build_mb": rss_build_peak / 1024,
        "rss_peak_to_load_mb": rss_load_peak / 1024,
        "lexical_pipeline_query_quiet": summary(quiet),
        "writes": args.writes,
        "writes_per_second": args.writes_per_second,
        "query_streams": args.streams,
        "write_to_visible": summary(visible),
        "queries_during_writes": summary(during),
        "longest_query_during_writes_ms": (longest * 10.0).round() / 10.0,
        "rss_end_mb": rss_now / 1024,
        // Of it, heap and other anonymous memory, and pages of mapped index
        // files (two engines map the same files in this process: those
        // pages count once per engine).
        "rss_end_anon_mb": crate::bench_http::rss_kib(std::process::id(), "RssAnon:").unwrap_or(0) / 1024,
        "rss_end_file_mb": crate::bench_http::rss_kib(std::process::id(), "RssFile:").unwrap_or(0) / 1024,
        "rss_peak_mb": rss_peak / 1024,
        "lexical_index_read_in_place_mb": mb(index.lexical.shared_bytes()),
        "lexical_index_heap_mb": index
            .lexical
            .heap_parts()
            .into_iter()
            .map(|(part, bytes)| (part.to_owned(), serde_json::json!((bytes as f64 / 1e5).round() / 10.0)))
            .collect::<serde_json::Map<_, _>>(),
    });
    if let Some(o) = out.as_object_mut() {
        o.extend(per_path);
    }
    if args.restarted_process && index_files {
        let child = crate::bench_restart::spawn(&args, temp.path())?;
        if let Some(o) = out.as_object_mut() {
            o.insert("restarted_process".into(), child);
        }
    }
    if args.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

/// Writes the searchable passages that have a vector, the queries, and both
/// sets of vectors to `dir`, for peers to index the same data: JSON Lines
/// (`{"id", "text"}`, text = title and body as the lexical index reads
/// them) and raw little-endian `f32` rows in the same order.
async fn export(
    store: &dyn rag_core::Store,
    tenant: &rag_core::TenantId,
    kb: &rag_core::KnowledgeBase,
    queries: &[String],
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let snapshot = store.snapshot(tenant, kb.id).await.map_err(core_err)?;
    let vectors: std::collections::HashMap<_, _> =
        snapshot.vectors.iter().map(|v| (v.id, &v.vector)).collect();
    let mut texts = std::io::BufWriter::new(std::fs::File::create(dir.join("passages.jsonl"))?);
    let mut rows = std::io::BufWriter::new(std::fs::File::create(dir.join("passage_vectors.f32"))?);
    for p in &snapshot.passages {
        let Some(v) = vectors.get(&p.id) else {
            continue;
        };
        let text = format!("{}\n{}", p.title, p.body);
        writeln!(
            texts,
            "{}",
            serde_json::json!({"id": p.id.to_string(), "text": text})
        )?;
        for x in v.iter() {
            rows.write_all(&x.to_le_bytes())?;
        }
    }
    texts.flush()?;
    rows.flush()?;
    let mut qtexts = std::io::BufWriter::new(std::fs::File::create(dir.join("queries.jsonl"))?);
    let mut qrows = std::io::BufWriter::new(std::fs::File::create(dir.join("query_vectors.f32"))?);
    for q in queries {
        writeln!(qtexts, "{}", serde_json::json!({"text": q}))?;
        for x in SyntheticVectors::vector(q) {
            qrows.write_all(&x.to_le_bytes())?;
        }
    }
    qtexts.flush()?;
    qrows.flush()?;
    Ok(())
}

/// Recall@10 against an exact cosine scan of every stored vector, over
/// `queries`: of the engine's dense path (its graph, or whatever it
/// searched), and of its dense index searched directly for 10 (no pipeline,
/// no request filters, everything visible), to tell the two apart.
async fn dense_recall(
    engine: &Engine,
    tenant: &rag_core::TenantId,
    kb: &rag_core::KnowledgeBase,
    queries: &[String],
    params: &rag_core::RetrievalParams,
) -> anyhow::Result<(f64, f64)> {
    use rag_ann::kernel::{dot, normalised};
    let unit = |v: &[f32]| {
        normalised(v, SYNTHETIC_DIMS).map_err(|e| anyhow::anyhow!("synthetic vector: {e}"))
    };
    let snapshot = engine
        .store()
        .snapshot(tenant, kb.id)
        .await
        .map_err(core_err)?;
    let rows: Vec<(rag_core::PassageId, Vec<f32>)> = snapshot
        .vectors
        .into_iter()
        .map(|v| Ok((v.id, unit(&v.vector)?)))
        .collect::<anyhow::Result<_>>()?;
    let index = engine.index(tenant, kb).await.map_err(core_err)?;
    let everything =
        rag_lexical::Filter::new(&Default::default(), rag_core::now(), &Viewer::Everything);
    let (mut found, mut found_direct) = (0usize, 0usize);
    for q in queries {
        let qv = unit(&SyntheticVectors::vector(q))?;
        let mut scored: Vec<(f32, usize)> = rows
            .iter()
            .enumerate()
            .map(|(i, (_, v))| (dot(v, &qv), i))
            .collect();
        let k = 10.min(scored.len());
        if k == 0 {
            continue;
        }
        scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        let truth: std::collections::HashSet<_> =
            scored[..k].iter().map(|&(_, i)| rows[i].0).collect();
        let out = engine
            .run(tenant, request("scale", q, params), options(), &mut |_| {})
            .await
            .map_err(core_err)?;
        found += out
            .lists
            .iter()
            .filter(|l| l.path == PathKind::Dense)
            .flat_map(|l| l.hits.iter().take(k))
            .filter(|h| truth.contains(&h.id))
            .count();
        if let Some(Ok(dense)) = &index.dense {
            let direct = dense
                .search(&qv, k, &everything, &index.lexical)
                .map_err(|e| anyhow::anyhow!("dense search: {e}"))?;
            found_direct += direct.hits.iter().filter(|h| truth.contains(&h.id)).count();
        }
    }
    let share = |n: usize| {
        let r = n as f64 / (queries.len() * 10).max(1) as f64;
        (r * 10_000.0).round() / 10_000.0
    };
    Ok((share(found), share(found_direct)))
}
