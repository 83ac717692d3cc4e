//! `ragscope bench-http`: a load check of the HTTP API. Loads a BEIR corpus into
//! a fresh data directory, starts `ragscope serve` on a loopback port as a
//! child process, drives N concurrent streaming queries for a fixed time, and
//! reports time to first event and to `done`, throughput, errors and the
//! server's resident memory (sampled from /proc).

use crate::bench::percentile;
use crate::cli::BenchHttpArgs;
use crate::eval::{load_corpus, read_corpus, read_qrels, read_queries};
use crate::{core_err, App, UserFacing};
use anyhow::Context;
use futures::StreamExt;
use rag_core::KbSettings;
use rag_store::OpenMode;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Samples {
    first_event: Vec<f64>,
    done: Vec<f64>,
    errors: Vec<String>,
}

/// A `/proc/<pid>/status` field in KiB (VmRSS:, VmHWM:), where Linux has it.
pub(crate) fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn ms_summary(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    serde_json::json!({
        "p50_ms": (percentile(&v, 50.0) * 100.0).round() / 100.0,
        "p99_ms": (percentile(&v, 99.0) * 100.0).round() / 100.0,
        "samples": v.len(),
    })
}

pub async fn run(app: &App, args: BenchHttpArgs) -> anyhow::Result<()> {
    let ds = &args.dataset;
    let corpus = read_corpus(&ds.join("corpus.jsonl"))?;
    let queries = read_queries(&ds.join("queries.jsonl"))?;
    let qrels = read_qrels(&ds.join("qrels").join(format!("{}.tsv", args.split)))?;
    let mut texts: Vec<String> = qrels
        .keys()
        .filter_map(|q| queries.get(q).cloned())
        .collect();
    texts.sort();
    if texts.is_empty() || args.concurrency == 0 || args.seconds == 0 {
        return Err(
            UserFacing("nothing to run: no queries, no concurrency or no time".into()).into(),
        );
    }

    // A fresh data directory with the corpus, written before the server opens it.
    let dir = tempfile::tempdir()?;
    let docs = corpus.len();
    {
        let mut sub = App {
            config: app.config.clone(),
            tenant: app.tenant.clone(),
            data_dir_given: true,
        };
        sub.config.data_dir = dir.path().to_owned();
        let engine = sub.engine(OpenMode::ReadWrite)?;
        let kb = engine
            .create_kb(
                &sub.tenant,
                "bench",
                KbSettings {
                    retrieval: app.config.retrieval.clone(),
                    ..Default::default()
                },
            )
            .await
            .map_err(core_err)?;
        load_corpus(&engine, &sub.tenant, &kb, corpus).await?;
        if engine.embedder().is_some() {
            eprintln!("embedding the corpus for the dense path (cached by content hash)…");
            engine
                .reembed(&sub.tenant, &kb.name, |_, _| {})
                .await
                .map_err(core_err)?;
        }
    }

    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .args(["serve", "--addr", "127.0.0.1:0", "--open"])
        .env("RAGSCOPE_DATA_DIR", dir.path())
        // One client drives every stream: let the per-key limit admit them all.
        .env(
            "RAGSCOPE_SERVER__MAX_CONCURRENT_QUERIES_PER_KEY",
            args.concurrency.max(1).to_string(),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .context("starting the server")?;
    let pid = child.id();
    let stdout = child.stdout.take().context("server stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let url = loop {
        let Some(line) = lines.next() else {
            let _ = child.kill();
            return Err(UserFacing("the server exited before listening".into()).into());
        };
        let line = line?;
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
    };
    // Keep draining the server's stdout so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let rss_after_start = rss_kib(pid, "VmRSS:");

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let endpoint = format!("{url}/api/v1/kbs/bench/query");
    let samples = Arc::new(Mutex::new(Samples::default()));
    let next = Arc::new(AtomicU64::new(0));
    let texts = Arc::new(texts);
    let rss_max = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();

    let sampler = {
        let rss_max = rss_max.clone();
        tokio::spawn(async move {
            while Instant::now() < deadline {
                if let Some(r) = rss_kib(pid, "VmRSS:") {
                    rss_max.fetch_max(r, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let workers: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (client, endpoint, samples, next, texts) = (
                client.clone(),
                endpoint.clone(),
                samples.clone(),
                next.clone(),
                texts.clone(),
            );
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let q = &texts[(next.fetch_add(1, Ordering::Relaxed) as usize) % texts.len()];
                    let t = Instant::now();
                    let res = client
                        .post(&endpoint)
                        .json(&serde_json::json!({ "query": q }))
                        .send()
                        .await;
                    let outcome: Result<(f64, f64), String> = async {
                        let res = res.map_err(|e| e.to_string())?;
                        if !res.status().is_success() {
                            return Err(format!("status {}", res.status()));
                        }
                        let mut stream = res.bytes_stream();
                        let mut first = None;
                        let mut body = String::new();
                        while let Some(chunk) = stream.next().await {
                            let chunk = chunk.map_err(|e| e.to_string())?;
                            first.get_or_insert_with(|| t.elapsed().as_secs_f64() * 1000.0);
                            body.push_str(&String::from_utf8_lossy(&chunk));
                        }
                        if body.contains("event: error") {
                            return Err("error event".into());
                        }
                        if !body.contains("event: done") {
                            return Err("stream ended without done".into());
                        }
                        Ok((
                            first.unwrap_or_default(),
                            t.elapsed().as_secs_f64() * 1000.0,
                        ))
                    }
                    .await;
                    let mut s = samples.lock().unwrap_or_else(|p| p.into_inner());
                    match outcome {
                        Ok((f, d)) => {
                            s.first_event.push(f);
                            s.done.push(d);
                        }
                        Err(e) => s.errors.push(e),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = sampler.await;
    let hwm = rss_kib(pid, "VmHWM:");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();

    let s = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    let completed = s.done.len();
    let mut first_errors: Vec<String> = s.errors.clone();
    first_errors.truncate(5);
    let report = serde_json::json!({
        "dataset": ds.file_name().map(|n| n.to_string_lossy().to_string()),
        "documents": docs,
        "concurrency": args.concurrency,
        "seconds": (elapsed * 10.0).round() / 10.0,
        "completed": completed,
        "errors": s.errors.len(),
        "first_errors": first_errors,
        "throughput_qps": ((completed as f64 / elapsed) * 10.0).round() / 10.0,
        "time_to_first_event": ms_summary(s.first_event),
        "time_to_done": ms_summary(s.done),
        "server_rss_mib_after_start": rss_after_start.map(|k| (k as f64 / 1024.0 * 10.0).round() / 10.0),
        "server_rss_mib_max_sampled": (rss_max.load(Ordering::Relaxed) as f64 / 1024.0 * 10.0).round() / 10.0,
        "server_peak_rss_mib": hwm.map(|k| (k as f64 / 1024.0 * 10.0).round() / 10.0),
        "embedder": app.config.embedder.kind,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} concurrent streaming queries for {:.0} s over {} documents: {} completed ({} qps), {} errors",
            args.concurrency, elapsed, docs, completed, report["throughput_qps"], report["errors"]
        );
        println!(
            "  first event p50 {} ms, p99 {} ms;  done p50 {} ms, p99 {} ms",
            report["time_to_first_event"]["p50_ms"],
            report["time_to_first_event"]["p99_ms"],
            report["time_to_done"]["p50_ms"],
            report["time_to_done"]["p99_ms"]
        );
        println!(
            "  server RSS: {} MiB after start, peak {} MiB",
            report["server_rss_mib_after_start"], report["server_peak_rss_mib"]
        );
    }
    if !s.errors.is_empty() {
        return Err(UserFacing(format!(
            "{} requests failed, e.g. {:?}",
            s.errors.len(),
            s.errors.first()
        ))
        .into());
    }
    Ok(())
}
