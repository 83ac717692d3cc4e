//! `ragscope eval`: retrieval quality on BEIR-format files.

use crate::cli::{eval_params, EvalArgs};
use crate::corpus_kind::{self, CorpusKind};
use crate::{core_err, App, UserFacing};
use rag_core::metrics::{score, Metrics};
use rag_core::{
    now, Chunk, ChunkId, DocId, Document, FaqEntry, FaqId, FaqStatus, KbSettings, KnowledgeBase,
    PassageId, PathKind, PipelineEvent, QueryRequest, TenantId, WriteOp,
};
use rag_engine::{Components, Engine, EngineConfig, QueryOptions};
use rag_store::{EmbeddedStore, OpenMode};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

#[derive(Deserialize)]
pub struct CorpusDoc {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub text: String,
}

#[derive(Deserialize)]
struct QueryLine {
    #[serde(rename = "_id")]
    id: String,
    text: String,
}

/// query id → (doc id → relevance).
pub type Qrels = BTreeMap<String, HashMap<String, f64>>;

fn open_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| UserFacing(format!("{}: {e}", path.display())).into())
}

pub fn read_corpus(path: &Path) -> anyhow::Result<Vec<CorpusDoc>> {
    let text = open_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| UserFacing(format!("{}:{}: {e}", path.display(), i + 1)).into())
        })
        .collect()
}

pub fn read_queries(path: &Path) -> anyhow::Result<HashMap<String, String>> {
    let text = open_text(path)?;
    let mut out = HashMap::new();
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let q: QueryLine = serde_json::from_str(l)
            .map_err(|e| UserFacing(format!("{}:{}: {e}", path.display(), i + 1)))?;
        out.insert(q.id, q.text);
    }
    Ok(out)
}

pub fn read_qrels(path: &Path) -> anyhow::Result<Qrels> {
    let text = open_text(path)?;
    let mut out: Qrels = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        if cols.len() < 3 || (i == 0 && cols[2].parse::<f64>().is_err()) {
            continue;
        }
        let score: f64 = cols[2]
            .parse()
            .map_err(|_| UserFacing(format!("{}:{}: bad score", path.display(), i + 1)))?;
        if score > 0.0 {
            out.entry(cols[0].to_owned())
                .or_default()
                .insert(cols[1].to_owned(), score);
        }
    }
    Ok(out)
}

/// Loads a corpus into a knowledge base: one document with one chunk per corpus entry.
pub async fn load_corpus(
    engine: &Engine,
    tenant: &TenantId,
    kb: &KnowledgeBase,
    corpus: Vec<CorpusDoc>,
) -> anyhow::Result<()> {
    load_corpus_as(engine, tenant, kb, corpus, CorpusKind::Doc).await
}

/// Loads a corpus as `kind`: documents (one chunk each, source = the row's
/// `_id`) or approved FAQ entries (question = the row's text, source link =
/// the row's `_id`, so rankings map back to corpus ids).
pub async fn load_corpus_as(
    engine: &Engine,
    tenant: &TenantId,
    kb: &KnowledgeBase,
    corpus: Vec<CorpusDoc>,
    kind: CorpusKind,
) -> anyhow::Result<()> {
    let ts = now();
    let mut ops = Vec::new();
    for d in corpus {
        if kind == CorpusKind::Faq {
            let question = if d.title.trim().is_empty() {
                d.text
            } else {
                format!("{} {}", d.title, d.text)
            };
            ops.push(WriteOp::PutFaq(FaqEntry {
                id: FaqId::generate(),
                kb: kb.id,
                question,
                answer: String::new(),
                status: FaqStatus::Approved,
                edited: false,
                source_url: Some(d.id),
                tags: vec![],
                created_at: ts,
                updated_at: ts,
                valid_from: None,
                valid_until: None,
                source_doc: None,
            }));
            if ops.len() == 2000 {
                engine
                    .store()
                    .apply(tenant, kb.id, std::mem::take(&mut ops))
                    .await
                    .map_err(core_err)?;
            }
            continue;
        }
        let doc = DocId::generate();
        let chunk = Chunk {
            id: ChunkId::generate(),
            doc,
            ordinal: 0,
            heading_path: vec![],
            text: d.text.clone(),
            start: 0,
            end: d.text.len(),
        };
        ops.push(WriteOp::PutDocument {
            document: Document {
                id: doc,
                kb: kb.id,
                title: d.title,
                source: d.id,
                content_hash: String::new(),
                tags: vec![],
                created_at: ts,
                updated_at: ts,
                text: d.text,
                owner: None,
            },
            chunks: vec![chunk],
        });
        if ops.len() == 2000 {
            engine
                .store()
                .apply(tenant, kb.id, std::mem::take(&mut ops))
                .await
                .map_err(core_err)?;
        }
    }
    if !ops.is_empty() {
        engine
            .store()
            .apply(tenant, kb.id, ops)
            .await
            .map_err(core_err)?;
    }
    Ok(())
}

pub async fn run(app: &App, args: EvalArgs) -> anyhow::Result<()> {
    let mode_paths: Vec<PathKind> = match args.mode.as_str() {
        "lexical" => PathKind::LEXICAL.to_vec(),
        "dense" => vec![PathKind::Dense],
        "hybrid" => PathKind::ALL.to_vec(),
        other => {
            return Err(UserFacing(format!(
                "--mode {other}: mode must be lexical, dense or hybrid"
            ))
            .into())
        }
    };
    let needs_dense = mode_paths.contains(&PathKind::Dense);
    let (embedder, cache) = app.embedder()?;
    if needs_dense && embedder.is_none() {
        return Err(UserFacing(format!(
            "--mode {}: dense retrieval needs an embedder; configure one ([embedder] kind = \"e5\" or \"openai\", or --embedder e5)",
            args.mode
        ))
        .into());
    }
    let corpus = read_corpus(&args.corpus)?;
    let queries = read_queries(&args.queries)?;
    let qrels = read_qrels(&args.qrels)?;
    if qrels.is_empty() {
        return Err(UserFacing(format!(
            "{} has no relevance judgements",
            args.qrels.display()
        ))
        .into());
    }
    let mut base = app.config.retrieval.clone();
    base.paths = mode_paths.clone();
    let params = eval_params(args.retrieval.apply(base)?);

    // A throwaway store unless --data-dir was given.
    let temp;
    let dir = if app.data_dir_given {
        app.config.data_dir.clone()
    } else {
        temp = tempfile::tempdir()?;
        temp.path().to_owned()
    };
    // Through the configured PostgreSQL store when there is one (its
    // knowledge base is kept for the next run), else a local one.
    let store: Arc<dyn rag_core::Store> = if app.config.store.is_some() {
        app.stores(OpenMode::ReadWrite)?.0
    } else {
        Arc::new(
            EmbeddedStore::open(&dir, OpenMode::ReadWrite)
                .map_err(|e| UserFacing(e.to_string()))?,
        )
    };
    let engine = Engine::new(
        Components {
            store,
            reranker: Arc::new(rag_core::IdentityReranker),
            second_embedder: app.second_embedder(&embedder)?,
            dictionary: app.dictionary()?,
            embedder,
            cache,
            generator: None,
            fetcher: None,
            extractor: None,
            webhook: None,
        },
        EngineConfig {
            max_query_bytes: 1 << 20,
            // With --data-dir the index is kept for the next process.
            index_dir: (app.config.store.is_none() && app.data_dir_given)
                .then(|| dir.join("index")),
            // Every query of a run answered by the same index.
            graph_in_background: false,
            sentence_vectors: app.config.embedder.sentence_vectors,
            ..EngineConfig::default()
        },
    );
    let kb_name = format!(
        "eval-{}",
        args.corpus
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("corpus")
    );
    let tenant = app.tenant.clone();
    let n_docs = corpus.len();
    let (kind, kind_reason) = match args.kind.as_str() {
        "faq" => (CorpusKind::Faq, "--kind faq".to_owned()),
        "doc" => (CorpusKind::Doc, "--kind doc".to_owned()),
        _ => corpus_kind::detect(&corpus),
    };
    eprintln!("corpus kind: {kind:?} ({kind_reason})");
    let wanted = match kind {
        CorpusKind::Faq => (0, n_docs),
        CorpusKind::Doc => (n_docs, 0),
    };
    let existing = engine
        .store()
        .kb_by_name(&tenant, &kb_name)
        .await
        .map_err(core_err)?;
    let counts = match &existing {
        Some(kb) => Some(
            engine
                .store()
                .kb_counts(&tenant, kb.id)
                .await
                .map_err(core_err)?,
        ),
        None => None,
    };
    let kb = match existing {
        Some(kb) if counts.is_some_and(|c| (c.documents, c.faqs) == wanted) => kb,
        existing => {
            if let Some(kb) = existing {
                engine
                    .store()
                    .delete_kb(&tenant, kb.id)
                    .await
                    .map_err(core_err)?;
            }
            let kb = engine
                .store()
                .create_kb(&tenant, &kb_name, KbSettings::default())
                .await
                .map_err(core_err)?;
            load_corpus_as(&engine, &tenant, &kb, corpus, kind).await?;
            kb
        }
    };
    if needs_dense {
        let started = std::time::Instant::now();
        let mut last = 0;
        let report = engine
            .reembed(&tenant, &kb_name, |done, total| {
                if done == total || done >= last + 256 {
                    last = done;
                    eprintln!(
                        "embedding passages: {done}/{total} ({:.0} s)",
                        started.elapsed().as_secs_f64()
                    );
                }
            })
            .await
            .map_err(core_err)?;
        eprintln!(
            "embedded {} passages ({} from the cache, {} computed){}",
            report.needed,
            report.cached,
            report.computed,
            match report.sentences_added {
                0 => String::new(),
                n => format!("; sentence vectors for {n} passages stored before"),
            }
        );
        if report.second_added > 0 {
            eprintln!(
                "second embedder's vectors for {} passages stored before",
                report.second_added
            );
        }
    }
    let index = engine.index(&tenant, &kb).await.map_err(core_err)?;
    if needs_dense {
        match &index.dense {
            Some(Ok(d)) if d.missing == 0 => {}
            Some(Ok(d)) => anyhow::bail!(
                "{} of {} passages have no vector; refusing to report dense figures",
                d.missing,
                d.total
            ),
            Some(Err(e)) => anyhow::bail!("the vectors could not be loaded: {e}"),
            // The store searches the vectors itself: every passage must have one.
            None if index.space.is_some() && engine.store().store_recall().is_some() => {
                let searchable = index.text_passages();
                if index.vectors < searchable {
                    anyhow::bail!("{} of {searchable} passages have no vector; refusing to report dense figures", searchable - index.vectors);
                }
            }
            None => anyhow::bail!("the corpus has no vectors; refusing to report dense figures"),
        }
    }

    let mut dump = match &args.dump_lists {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| UserFacing(format!("{}: {e}", path.display())))?,
        )),
        None => None,
    };
    let mut run_out = match &args.run_out {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| UserFacing(format!("{}: {e}", path.display())))?,
        )),
        None => None,
    };
    let mut sum = Metrics::default();
    let mut evaluated = 0usize;
    let mut missing = 0usize;
    for (qid, rel) in &qrels {
        let Some(text) = queries.get(qid) else {
            missing += 1;
            continue;
        };
        let request = QueryRequest {
            kb: kb_name.clone(),
            query: text.clone(),
            params: Some(params.clone()),
            overrides: Default::default(),
            filters: Default::default(),
            generate: false,
            conversation_id: None,
        };
        // (suggested λ, its reason, λ applied) as the events reported them,
        // and the factor the rule put on the second embedder's weight.
        let mut lambdas: (Option<f64>, Option<String>, Option<f64>) = (None, None, None);
        let mut second_factor = None;
        // Each path's time, as its `recall` event reported it.
        let mut path_ms = serde_json::Map::new();
        let mut watch = |e: PipelineEvent| match e {
            PipelineEvent::QueryAnalyzed {
                suggested_lexical_interpolation,
                suggestion_reason,
                ..
            } => {
                lambdas.0 = Some(suggested_lexical_interpolation);
                lambdas.1 = Some(suggestion_reason);
            }
            PipelineEvent::Fused {
                lexical_interpolation,
                second_weight_factor,
                ..
            } => {
                lambdas.2 = lexical_interpolation;
                second_factor = second_weight_factor;
            }
            PipelineEvent::Recall {
                list, elapsed_ms, ..
            } => {
                path_ms.insert(list.path.to_string(), elapsed_ms.into());
            }
            _ => {}
        };
        let result = engine
            .run(
                &tenant,
                request,
                QueryOptions {
                    views: false,
                    log: false,
                    viewer: rag_core::Viewer::Everything,
                },
                &mut watch,
            )
            .await;
        // The sources of the passages reported (read from the store when it
        // holds the text).
        let wanted: Vec<PassageId> = match &result {
            Ok(run) => {
                let listed = run.lists.iter().flat_map(|l| l.hits.iter().map(|h| h.id));
                run.fused
                    .hits
                    .iter()
                    .map(|h| h.id)
                    .chain(listed.filter(|_| dump.is_some()))
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        let passages = engine
            .passages_by_id((&tenant, kb.id), &index, wanted)
            .await
            .map_err(core_err)?;
        let source_of = |id: PassageId| passages.get(&id).and_then(|p| p.source.clone());
        if let (Some(out), Ok(run)) = (dump.as_mut(), &result) {
            let lists: serde_json::Map<String, serde_json::Value> = run
                .lists
                .iter()
                .map(|l| {
                    let hits: Vec<serde_json::Value> = l
                        .hits
                        .iter()
                        .map(|h| serde_json::json!([source_of(h.id), h.score]))
                        .collect();
                    (l.path.to_string(), serde_json::Value::Array(hits))
                })
                .collect();
            let notes: serde_json::Map<String, serde_json::Value> = run
                .lists
                .iter()
                .filter(|l| !l.notes.is_empty())
                .map(|l| (l.path.to_string(), serde_json::json!(l.notes)))
                .collect();
            // What each hit matched, per path, for offline analysis.
            let matched: serde_json::Map<String, serde_json::Value> = run
                .lists
                .iter()
                .map(|l| {
                    let per_hit: Vec<&Vec<String>> = l.hits.iter().map(|h| &h.matched).collect();
                    (l.path.to_string(), serde_json::json!(per_hit))
                })
                .collect();
            let terms: Vec<[String; 2]> = run
                .analyzed
                .tokens
                .iter()
                .map(|t| [t.text.clone(), format!("{:?}", t.kind)])
                .collect();
            let line = serde_json::json!({
                "qid": qid,
                "language": run.analyzed.language,
                "tokens": run.analyzed.tokens.len(),
                "terms": terms,
                "matched": matched,
                "notes": notes,
                "suggested_lambda": lambdas.0,
                "suggestion_reason": lambdas.1,
                "applied_lambda": lambdas.2,
                "second_weight_factor": second_factor,
                "path_ms": path_ms,
                "lists": lists,
                "fused": run.fused.hits.iter().map(|h| source_of(h.id)).collect::<Vec<_>>(),
            });
            writeln!(out, "{line}")?;
        }
        let ranked: Vec<(String, f64)> = match result {
            Ok(out) if needs_dense && !out.lists.iter().any(|l| l.path == PathKind::Dense) => {
                anyhow::bail!("the dense path did not run for query {qid}; refusing to report {} figures as if it had", args.mode)
            }
            Ok(out) => out
                .fused
                .hits
                .iter()
                .filter_map(|h| match h.id {
                    PassageId::Chunk(_) | PassageId::Faq(_) => {
                        source_of(h.id).map(|s| (s, h.score))
                    }
                    PassageId::Fact(_) => None,
                })
                .collect(),
            // A query that cannot run (e.g. nothing but punctuation) retrieves nothing.
            Err(e) if e.is_user_error() => Vec::new(),
            Err(e) => return Err(core_err(e)),
        };
        if let Some(out) = run_out.as_mut() {
            // trec_eval orders by score, not by rank: tied scores are written
            // strictly decreasing so that it reads our order.
            let mut last = f64::INFINITY;
            for (rank, (doc, score)) in ranked.iter().enumerate() {
                let score = if *score < last - 1e-9 {
                    *score
                } else {
                    last - 1e-9
                };
                last = score;
                writeln!(out, "{qid} Q0 {doc} {} {score:.9} ragscope", rank + 1)?;
            }
        }
        let ranked: Vec<String> = ranked.into_iter().map(|(d, _)| d).collect();
        let m = score(&ranked, rel);
        sum.ndcg10 += m.ndcg10;
        sum.recall10 += m.recall10;
        sum.recall100 += m.recall100;
        sum.mrr10 += m.mrr10;
        evaluated += 1;
    }
    if let Some(mut out) = dump {
        out.flush()?;
    }
    if let Some(mut out) = run_out {
        out.flush()?;
    }
    if evaluated == 0 {
        return Err(
            UserFacing("none of the judged queries appears in the queries file".into()).into(),
        );
    }
    let n = evaluated as f64;
    let round = |x: f64| (x / n * 100000.0).round() / 100000.0;
    let out = serde_json::json!({
        "mode": args.mode,
        "queries": evaluated,
        "queries_missing": missing,
        "docs": n_docs,
        "kind": kind,
        "kind_reason": kind_reason,
        "ndcg@10": round(sum.ndcg10),
        "recall@10": round(sum.recall10),
        "recall@100": round(sum.recall100),
        "mrr@10": round(sum.mrr10),
        "paths": params.paths,
        "params": params,
    });
    if args.json {
        println!("{out}");
    } else {
        println!(
            "{} queries ({} mode): nDCG@10 {:.4}  Recall@10 {:.4}  Recall@100 {:.4}  MRR@10 {:.4}",
            evaluated,
            args.mode,
            sum.ndcg10 / n,
            sum.recall10 / n,
            sum.recall100 / n,
            sum.mrr10 / n
        );
    }
    // The index file written in the background belongs to the data directory.
    engine.flush_index_files().await;
    Ok(())
}
