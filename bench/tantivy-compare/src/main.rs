//! tantivy-compare: ranks SciFact with tantivy's BM25, fed by ragscope's own
//! analyzer, so that the only differences from ragscope's in-memory BM25 are
//! the index and the scorer (tantivy: k1=1.2, b=0.75, one-byte field norms).
//!
//! Prints one JSON object: build time, per-query latency and retrieval quality
//! (nDCG@10, Recall@10, Recall@100, MRR@10) on the test and train qrels.
//!
//! Usage: tantivy-compare [--dataset DIR] [--rounds N] [--no-disk]

use rag_text::{Analyzer, Mode, TokenKind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tantivy::collector::TopDocs;
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{PreTokenizedString, Token as TvToken};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

/// Number of hits retrieved per query, as in ragscope's evaluation.
const TOP_K: usize = 100;

// ---------------------------------------------------------------- data loading

#[derive(Deserialize)]
struct CorpusLine {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct QueryLine {
    #[serde(rename = "_id")]
    id: String,
    text: String,
}

struct Doc {
    id: String,
    title: String,
    text: String,
}

fn read_lines(path: &Path) -> Vec<String> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    BufReader::new(f)
        .lines()
        .map(|l| l.expect("read error"))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn load_corpus(dir: &Path) -> Vec<Doc> {
    read_lines(&dir.join("corpus.jsonl"))
        .iter()
        .map(|l| {
            let c: CorpusLine = serde_json::from_str(l).expect("bad corpus line");
            Doc { id: c.id, title: c.title, text: c.text }
        })
        .collect()
}

fn load_queries(dir: &Path) -> HashMap<String, String> {
    read_lines(&dir.join("queries.jsonl"))
        .iter()
        .map(|l| {
            let q: QueryLine = serde_json::from_str(l).expect("bad query line");
            (q.id, q.text)
        })
        .collect()
}

/// Relevant documents per query (score > 0), from a BEIR qrels TSV with a header.
fn load_qrels(dir: &Path, split: &str) -> BTreeMap<String, HashSet<String>> {
    let mut out: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    for (i, line) in read_lines(&dir.join("qrels").join(format!("{split}.tsv"))).iter().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 {
            continue;
        }
        // Skip the header line ("query-id corpus-id score").
        if i == 0 && cols[2].trim().parse::<f64>().is_err() {
            continue;
        }
        let score: f64 = cols[2].trim().parse().unwrap_or(0.0);
        if score > 0.0 {
            out.entry(cols[0].trim().to_string()).or_default().insert(cols[1].trim().to_string());
        }
    }
    out
}

// ---------------------------------------------------------------- analysis

/// Analyses one document the way ragscope's flat BM25 field sees it:
/// title + " " + body in Index mode. Chinese character bigrams go to a separate
/// field in ragscope and are left out here (SciFact has none anyway).
fn analyse_doc(analyzer: &Analyzer, d: &Doc) -> Vec<TvToken> {
    let text = format!("{} {}", d.title, d.text);
    analyzer
        .analyze(&text, Mode::Index)
        .into_iter()
        .filter(|t| t.kind != TokenKind::HanBigram)
        .enumerate()
        .map(|(i, t)| TvToken {
            offset_from: t.start,
            offset_to: t.end,
            // Positions are not indexed; a running count keeps them well formed.
            position: i,
            text: t.text,
            position_length: 1,
        })
        .collect()
}

/// Analyses the whole corpus on `threads` threads, as ragscope's index build does.
fn analyse_corpus(analyzer: &Analyzer, docs: &[Doc], threads: usize) -> Vec<Vec<TvToken>> {
    let threads = threads.max(1);
    if threads == 1 {
        return docs.iter().map(|d| analyse_doc(analyzer, d)).collect();
    }
    let chunk = docs.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = docs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|d| analyse_doc(analyzer, d)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("analysis thread panicked")).collect()
    })
}

// ---------------------------------------------------------------- index

struct Fields {
    body: Field,
    ord: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    // One flat text field: term frequencies and field norms, no positions, not stored.
    let indexing = TextFieldIndexing::default()
        .set_index_option(IndexRecordOption::WithFreqs)
        .set_fieldnorms(true);
    let body = b.add_text_field("body", TextOptions::default().set_indexing_options(indexing));
    // The document's ordinal in corpus.jsonl, as a fast field, to map hits back to ids.
    let ord = b.add_u64_field("ord", NumericOptions::default().set_fast());
    (b.build(), Fields { body, ord })
}

struct Built {
    reader: IndexReader,
    tantivy_seconds: f64,
    /// Of which: commit (segment serialisation) and opening the reader.
    commit_seconds: f64,
    segments: usize,
}

/// Adds every analysed document to `index`, commits and opens a reader.
/// Timed from the first document built to the reader being ready.
fn build(index: &Index, fields: &Fields, analysed: &[Vec<TvToken>], writer_threads: usize) -> Built {
    let started = Instant::now();
    let mut writer: IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(writer_threads, 64_000_000 * writer_threads).expect("writer");
    for (ord, tokens) in analysed.iter().enumerate() {
        let mut doc = TantivyDocument::new();
        // The original text is only needed for stored fields, which this index has none of.
        doc.add_pre_tokenized_text(fields.body, PreTokenizedString { text: String::new(), tokens: tokens.clone() });
        doc.add_u64(fields.ord, ord as u64);
        writer.add_document(doc).expect("add_document");
    }
    let commit_started = Instant::now();
    writer.commit().expect("commit");
    writer.wait_merging_threads().expect("merge threads");
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().expect("reader");
    let tantivy_seconds = started.elapsed().as_secs_f64();
    let commit_seconds = commit_started.elapsed().as_secs_f64();
    let segments = reader.searcher().segment_readers().len();
    Built { reader, tantivy_seconds, commit_seconds, segments }
}

// ---------------------------------------------------------------- search

/// OR over the query's analysed tokens, duplicates kept (each clause adds its score).
fn make_query(analyzer: &Analyzer, field: Field, text: &str) -> BooleanQuery {
    let clauses: Vec<(Occur, Box<dyn Query>)> = analyzer
        .analyze(text, Mode::Query)
        .into_iter()
        .map(|t| {
            let term = Term::from_field_text(field, &t.text);
            (Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as Box<dyn Query>)
        })
        .collect();
    BooleanQuery::new(clauses)
}

fn search(searcher: &Searcher, query: &BooleanQuery) -> Vec<(f32, DocAddress)> {
    searcher.search(query, &TopDocs::with_limit(TOP_K).order_by_score()).expect("search")
}

// ---------------------------------------------------------------- metrics

/// Binary-relevance metrics of one ranked list.
#[derive(Default, Clone, Copy)]
struct Scores {
    ndcg10: f64,
    recall10: f64,
    recall100: f64,
    mrr10: f64,
}

fn score_list(ranked: &[&str], relevant: &HashSet<String>) -> Scores {
    if relevant.is_empty() {
        return Scores::default();
    }
    let is_rel = |id: &str| relevant.contains(id);
    // DCG@10 with the log2(rank + 1) discount, rank starting at 1.
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, id)| is_rel(id))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    // Ideal DCG: every relevant document at the top, capped at 10 of them.
    let idcg: f64 = (0..relevant.len().min(10)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    let hits_at = |k: usize| ranked.iter().take(k).filter(|id| is_rel(id)).count() as f64;
    let mrr10 = ranked.iter().take(10).position(|id| is_rel(id)).map_or(0.0, |p| 1.0 / (p + 1) as f64);
    Scores {
        ndcg10: dcg / idcg,
        recall10: hits_at(10) / relevant.len() as f64,
        recall100: hits_at(100) / relevant.len() as f64,
        mrr10,
    }
}

fn round(x: f64, places: i32) -> f64 {
    let m = 10f64.powi(places);
    (x * m).round() / m
}

/// Runs every query of a split once and averages its metrics over the queries.
fn evaluate(
    analyzer: &Analyzer,
    searcher: &Searcher,
    fields: &Fields,
    docs: &[Doc],
    queries: &HashMap<String, String>,
    qrels: &BTreeMap<String, HashSet<String>>,
) -> Value {
    // One ordinal column per segment, to turn a DocAddress into a corpus id.
    let columns: Vec<Column<u64>> =
        searcher.segment_readers().iter().map(|r| r.fast_fields().u64("ord").expect("ord column")).collect();
    let _ = fields.ord;
    let mut sum = Scores::default();
    let mut n = 0usize;
    for (qid, relevant) in qrels {
        let Some(text) = queries.get(qid) else { continue };
        let hits = search(searcher, &make_query(analyzer, fields.body, text));
        let ids: Vec<&str> = hits
            .iter()
            .map(|(_, addr)| {
                let ord = columns[addr.segment_ord as usize].first(addr.doc_id).expect("ord value");
                docs[ord as usize].id.as_str()
            })
            .collect();
        let s = score_list(&ids, relevant);
        sum.ndcg10 += s.ndcg10;
        sum.recall10 += s.recall10;
        sum.recall100 += s.recall100;
        sum.mrr10 += s.mrr10;
        n += 1;
    }
    let d = n.max(1) as f64;
    json!({
        "queries": n,
        "ndcg@10": round(sum.ndcg10 / d, 5),
        "recall@10": round(sum.recall10 / d, 5),
        "recall@100": round(sum.recall100 / d, 5),
        "mrr@10": round(sum.mrr10 / d, 5),
    })
}

// ---------------------------------------------------------------- latency

/// Nearest-rank percentile, computed as ragscope's bench computes it.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn summary(mut samples: Vec<f64>) -> Value {
    samples.sort_by(f64::total_cmp);
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    json!({
        "p50_ms": round(percentile(&samples, 50.0), 4),
        "p99_ms": round(percentile(&samples, 99.0), 4),
        "mean_ms": round(mean, 4),
        "samples": samples.len(),
    })
}

/// Per-query latency: one warm-up round, then `rounds` timed rounds, each query
/// on its own (query analysis + boolean query construction + top-100 search).
/// Also reports the analysis share alone.
fn latency(analyzer: &Analyzer, searcher: &Searcher, field: Field, texts: &[&str], rounds: usize) -> Value {
    let mut total = Vec::with_capacity(texts.len() * rounds);
    let mut analysis = Vec::with_capacity(texts.len() * rounds);
    for round in 0..=rounds {
        for q in texts {
            let t0 = Instant::now();
            let query = make_query(analyzer, field, q);
            let t1 = Instant::now();
            let hits = search(searcher, &query);
            std::hint::black_box(hits);
            let t2 = Instant::now();
            if round > 0 {
                total.push((t2 - t0).as_secs_f64() * 1000.0);
                analysis.push((t1 - t0).as_secs_f64() * 1000.0);
            }
        }
    }
    let mut out = summary(total);
    out["analysis_only"] = summary(analysis);
    out
}

// ---------------------------------------------------------------- main

struct Args {
    dataset: PathBuf,
    rounds: usize,
    disk: bool,
}

fn parse_args() -> Args {
    let mut a = Args { dataset: PathBuf::from("/work/shared/eval/scifact"), rounds: 5, disk: true };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--dataset" => a.dataset = PathBuf::from(it.next().expect("--dataset needs a value")),
            "--rounds" => a.rounds = it.next().expect("--rounds needs a value").parse().expect("--rounds: a number"),
            "--no-disk" => a.disk = false,
            "-h" | "--help" => {
                eprintln!("usage: tantivy-compare [--dataset DIR] [--rounds N] [--no-disk]");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|rd| rd.filter_map(|e| e.ok()).filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// Build section of the report for one index variant.
fn build_report(docs: usize, corpus_bytes: usize, analysis_seconds: f64, b: &Built, writer_threads: usize) -> Value {
    let total = analysis_seconds + b.tantivy_seconds;
    json!({
        "writer_threads": writer_threads,
        "segments": b.segments,
        "analysis_seconds": round(analysis_seconds, 4),
        "tantivy_seconds": round(b.tantivy_seconds, 4),
        "commit_seconds": round(b.commit_seconds, 4),
        "index_seconds": round(total, 4),
        "index_docs_per_s": (docs as f64 / total).round(),
        "index_mb_per_s": round(corpus_bytes as f64 / 1e6 / total, 3),
        "tantivy_only_docs_per_s": (docs as f64 / b.tantivy_seconds).round(),
    })
}

fn main() {
    let args = parse_args();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let docs = load_corpus(&args.dataset);
    let queries = load_queries(&args.dataset);
    let test = load_qrels(&args.dataset, "test");
    let train = load_qrels(&args.dataset, "train");
    let corpus_bytes: usize = docs.iter().map(|d| d.title.len() + 1 + d.text.len()).sum();

    // Warm the analyzer (jieba's dictionary loads lazily), outside any timing.
    let analyzer = Analyzer::new();
    let _ = analyzer.analyze("预热 warm-up", Mode::Index);

    // Analysis, shared by every index variant below; parallel as in ragscope.
    let t = Instant::now();
    let analysed = analyse_corpus(&analyzer, &docs, threads.min(8));
    let analysis_seconds = t.elapsed().as_secs_f64();
    let tokens: usize = analysed.iter().map(Vec::len).sum();

    let (schema, fields) = schema();
    let test_texts: Vec<&str> = test.keys().filter_map(|q| queries.get(q).map(String::as_str)).collect();

    // Main variant: in RAM, one writer thread (one segment, documents in corpus order).
    let ram_index = Index::create_in_ram(schema.clone());
    let ram = build(&ram_index, &fields, &analysed, 1);
    let searcher = ram.reader.searcher();
    let quality_test = evaluate(&analyzer, &searcher, &fields, &docs, &queries, &test);
    let quality_train = evaluate(&analyzer, &searcher, &fields, &docs, &queries, &train);
    let ram_latency = latency(&analyzer, &searcher, fields.body, &test_texts, args.rounds);
    drop(searcher);

    // In RAM with one writer thread per core: faster build, one segment per thread.
    let ram2_index = Index::create_in_ram(schema.clone());
    let ram2 = build(&ram2_index, &fields, &analysed, threads);
    let searcher2 = ram2.reader.searcher();
    let ram2_ndcg = evaluate(&analyzer, &searcher2, &fields, &docs, &queries, &test)["ndcg@10"].clone();
    let ram2_latency = latency(&analyzer, &searcher2, fields.body, &test_texts, args.rounds);
    drop(searcher2);

    let mut variants = json!({
        "ram_1_writer_thread": {
            "build": build_report(docs.len(), corpus_bytes, analysis_seconds, &ram, 1),
            "query": ram_latency,
        },
        "ram_n_writer_threads": {
            "build": build_report(docs.len(), corpus_bytes, analysis_seconds, &ram2, threads),
            "query": ram2_latency,
            "test_ndcg@10": ram2_ndcg,
        },
    });

    // On disk (memory-mapped), one writer thread; the index lives under the temp dir.
    if args.disk {
        let dir = std::env::temp_dir().join(format!("tantivy-compare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let disk_index = Index::create_in_dir(&dir, schema.clone()).expect("index on disk");
        let disk = build(&disk_index, &fields, &analysed, 1);
        let searcher3 = disk.reader.searcher();
        let disk_ndcg = evaluate(&analyzer, &searcher3, &fields, &docs, &queries, &test)["ndcg@10"].clone();
        let disk_latency = latency(&analyzer, &searcher3, fields.body, &test_texts, args.rounds);
        drop(searcher3);
        variants["disk_1_writer_thread"] = json!({
            "build": build_report(docs.len(), corpus_bytes, analysis_seconds, &disk, 1),
            "query": disk_latency,
            "test_ndcg@10": disk_ndcg,
            "index_mb_on_disk": round(dir_size(&dir) as f64 / 1e6, 3),
        });
        drop(disk);
        drop(disk_index);
        let _ = std::fs::remove_dir_all(&dir);
    }

    let out = json!({
        "engine": "tantivy",
        "tantivy_version": "0.27",
        "analyzer": format!("{} v{}", rag_text::ANALYZER_NAME, rag_text::ANALYZER_VERSION),
        "dataset": args.dataset.file_name().and_then(|s| s.to_str()).unwrap_or(""),
        "docs": docs.len(),
        "corpus_mb": round(corpus_bytes as f64 / 1e6, 3),
        "index_tokens": tokens,
        "threads": threads,
        "bm25": {"k1": 1.2, "b": 0.75, "semantics": "OR, duplicates counted", "top_k": TOP_K},
        "latency_queries": test_texts.len(),
        "rounds": args.rounds,
        "quality": {"test": quality_test, "train": quality_train},
        "variants": variants,
    });
    println!("{out}");
}
