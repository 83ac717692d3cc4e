//! The `ragscope` command.
//!
//! This crate is the only one that reads the environment and configuration
//! files, installs the tracing subscriber, and turns errors into exit codes:
//! 0 success, 1 failure, 2 the user's mistake (bad input, unknown knowledge
//! base, invalid flags).

mod bench;
mod bench_http;
mod bench_restart;
mod bench_scale;
mod bench_store;
mod cli;
mod config;
mod corpus_kind;
mod demo;
mod docs_cmd;
mod eval;
mod faq_cmd;
mod ingest_cmd;
mod intents_cmd;
mod mcp_cmd;
mod model_path;
mod models_cmd;
mod render;
mod retrieval_flags;
mod serve;
mod source_cmd;
mod tune;
mod tune_cv;
mod why_not_cmd;

use anyhow::Context;
use clap::Parser;
use cli::{Cli, Command, KbCommand};
use config::{Config, FlagOverrides, LogOverrides};
use rag_core::{CoreError, IdentityReranker, TenantId};
use rag_engine::{Components, Engine, EngineConfig};
use rag_store::{EmbeddedStore, OpenMode, StoreError};
use std::process::ExitCode;
use std::sync::Arc;

/// An error that is the user's fault: exit code 2.
#[derive(Debug)]
pub(crate) struct UserFacing(pub String);

impl std::fmt::Display for UserFacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserFacing {}

/// Converts engine errors, keeping user mistakes recognisable.
pub(crate) fn core_err(e: CoreError) -> anyhow::Error {
    if e.is_user_error() {
        UserFacing(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

fn init_tracing(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if config.log.format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

pub(crate) struct App {
    pub config: Config,
    pub tenant: TenantId,
    /// Whether the data directory was chosen explicitly (flag, environment or file).
    pub data_dir_given: bool,
}

impl App {
    pub(crate) fn engine(&self, mode: OpenMode) -> anyhow::Result<Engine> {
        let (store, _) = self.stores(mode)?;
        self.engine_with(store)
    }

    /// The configured store (PostgreSQL when `store` is set, else the
    /// embedded one in the data directory), as a store and as a key store.
    #[allow(clippy::type_complexity)]
    pub(crate) fn stores(
        &self,
        mode: OpenMode,
    ) -> anyhow::Result<(Arc<dyn rag_core::Store>, Arc<dyn rag_core::KeyStore>)> {
        if let Some(url) = &self.config.store {
            // Commands run on the multi-threaded runtime; connecting is async.
            let pg = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(rag_store_pg::PgStore::connect(url))
            })
            .map_err(|e| {
                UserFacing(format!(
                    "PostgreSQL store {}: {e}",
                    config::redact_url_password(url)
                ))
            })?;
            let pg = Arc::new(pg);
            return Ok((pg.clone(), pg));
        }
        let store = Arc::new(self.open_store(mode)?);
        Ok((store.clone(), store))
    }

    pub(crate) fn open_store(&self, mode: OpenMode) -> anyhow::Result<EmbeddedStore> {
        let analyzer = format!("{}:{}", rag_text::ANALYZER_NAME, rag_text::ANALYZER_VERSION);
        let store = match EmbeddedStore::open_with_analyzer(&self.config.data_dir, mode, &analyzer)
        {
            Ok(s) => s,
            Err(
                e @ (StoreError::Locked { .. }
                | StoreError::Missing(_)
                | StoreError::NewerFormat { .. }),
            ) => return Err(UserFacing(e.to_string()).into()),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("opening {}", self.config.data_dir.display()))
            }
        };
        Ok(store)
    }

    pub(crate) fn engine_with(&self, store: Arc<dyn rag_core::Store>) -> anyhow::Result<Engine> {
        self.engine_configured(store, None)
    }

    /// The engine of `serve`: a knowledge base's first index build is
    /// waited for at most `server.first_build_wait_ms`.
    pub(crate) fn server_engine(&self, store: Arc<dyn rag_core::Store>) -> anyhow::Result<Engine> {
        let wait = std::time::Duration::from_millis(self.config.server.first_build_wait_ms);
        self.engine_configured(store, Some(wait))
    }

    fn engine_configured(
        &self,
        store: Arc<dyn rag_core::Store>,
        first_build_wait: Option<std::time::Duration>,
    ) -> anyhow::Result<Engine> {
        let (embedder, cache) = self.embedder()?;
        Ok(Engine::new(
            Components {
                store,
                reranker: self.reranker()?,
                second_embedder: self.second_embedder(&embedder)?,
                dictionary: self.dictionary()?,
                embedder,
                cache,
                generator: self.generator()?,
                fetcher: Some(self.fetcher()?),
                extractor: Some(self.extractor()?),
                webhook: Some(Arc::new(rag_models::HttpWebhook::new())),
            },
            EngineConfig {
                max_query_bytes: self.config.limits.max_query_bytes,
                max_file_bytes: self.config.limits.max_file_bytes,
                // Lexical indexes are kept next to the embedded store.
                index_dir: self
                    .config
                    .store
                    .is_none()
                    .then(|| self.config.data_dir.join("index")),
                first_build_wait,
                // A server (the caller that bounds the first build) lives
                // on after writing its index files: it reads them in place.
                read_saved_in_place: first_build_wait.is_some(),
                sentence_vectors: self.config.embedder.sentence_vectors,
                segment_passages: self.config.index.segment_passages,
                ..EngineConfig::default()
            },
        ))
    }
}

impl App {
    /// The configured LLM: an OpenAI-compatible endpoint, or OpenRouter when
    /// its key is set; `None` answers extractively.
    pub(crate) fn generator(&self) -> anyhow::Result<Option<Arc<dyn rag_core::Generator>>> {
        let p = &self.config.providers;
        let mut config = match (&p.llm_base_url, &p.openrouter_api_key) {
            (Some(url), _) => rag_models::ChatConfig {
                base_url: url.clone(),
                api_key: p.llm_api_key.clone(),
                ..rag_models::ChatConfig::default()
            },
            (None, Some(key)) => rag_models::ChatConfig::openrouter(key.clone()),
            (None, None) => return Ok(None),
        };
        if let Some(m) = &p.llm_model {
            config.model = m.clone();
        }
        let chat = rag_models::OpenAiChat::new(config).map_err(|e| UserFacing(e.to_string()))?;
        Ok(Some(Arc::new(chat)))
    }

    /// Extraction of uploaded and fetched files in worker processes of this
    /// binary, within the configured limits.
    pub(crate) fn extractor(&self) -> anyhow::Result<Arc<dyn rag_engine::Extractor>> {
        let l = &self.config.limits;
        let program = std::env::current_exe().context("locating the ragscope binary")?;
        let mut x = rag_sandbox::SandboxExtractor::new(
            program,
            rag_sandbox::SandboxLimits {
                wall_ms: l.extract_wall_ms,
                cpu_ms: l.extract_cpu_ms,
                memory_mb: l.extract_memory_mb,
            },
        );
        if let Ok(spec) = std::env::var("RAGSCOPE_FAILPOINTS") {
            x = x.with_env("RAGSCOPE_FAILPOINTS", spec);
        }
        Ok(Arc::new(x))
    }

    /// The fetcher of URL sources, within the configured limits.
    pub(crate) fn fetcher(&self) -> anyhow::Result<Arc<dyn rag_core::Fetcher>> {
        let s = &self.config.sources;
        let f = rag_models::HttpFetcher::new(rag_models::FetchConfig {
            timeout_ms: s.timeout_ms,
            max_bytes: s.max_page_bytes,
            max_redirects: s.max_redirects,
            allow_private: s.allow_private,
            proxy: s.proxy.clone(),
        })
        .map_err(|e| UserFacing(e.to_string()))?;
        Ok(Arc::new(f))
    }

    /// The configured reranker ([`IdentityReranker`] when none).
    pub(crate) fn reranker(&self) -> anyhow::Result<Arc<dyn rag_core::Reranker>> {
        let p = &self.config.providers;
        if let Some(url) = &p.rerank_base_url {
            let mut c = rag_models::HttpRerankerConfig {
                base_url: url.clone(),
                api_key: p.rerank_api_key.clone(),
                ..Default::default()
            };
            if let Some(m) = &p.rerank_model {
                c.model = m.clone();
            }
            return Ok(Arc::new(
                rag_models::HttpReranker::new(c).map_err(|e| UserFacing(e.to_string()))?,
            ));
        }
        if p.rerank_with_llm {
            if let Some(g) = self.generator()? {
                return Ok(Arc::new(rag_models::LlmListwiseReranker::new(g)));
            }
        }
        Ok(Arc::new(IdentityReranker))
    }

    /// The configured embedder and the shared embedding cache.
    #[allow(clippy::type_complexity)]
    pub(crate) fn embedder(
        &self,
    ) -> anyhow::Result<(
        Option<Arc<dyn rag_core::Embedder>>,
        Option<Arc<dyn rag_core::EmbeddingCache>>,
    )> {
        let cfg = &self.config.embedder;
        let (model_path, found) = model_path::SearchPlaces::of_process(&cfg.model_path).resolve();
        let kind = match cfg.kind.as_str() {
            "auto" if found => "e5",
            "auto" => {
                tracing::info!(path = %model_path.display(), "no e5 model file; the dense path is off (run scripts/models/fetch-e5.sh)");
                "none"
            }
            other => other,
        };
        let embedder: Option<Arc<dyn rag_core::Embedder>> = match kind {
            "none" => None,
            "openai" => {
                let o = &cfg.openai;
                let e = rag_models::OpenAiEmbedder::new(rag_models::OpenAiEmbedderConfig {
                    base_url: o.base_url.clone(),
                    api_key: o.api_key.clone(),
                    model: o.model.clone(),
                    query_model: o.query_model.clone(),
                    batch_size: o.batch_size,
                    timeout_ms: o.timeout_ms,
                    max_retries: o.max_retries,
                    ..rag_models::OpenAiEmbedderConfig::default()
                })
                .map_err(|e| UserFacing(e.to_string()))?;
                Some(Arc::new(e))
            }
            "bert" => {
                let dir = cfg.model_dir.clone().ok_or_else(|| {
                    UserFacing("embedder kind \"bert\" needs embedder.model_dir (RAGSCOPE_EMBEDDER__MODEL_DIR): a Hugging Face model directory".into())
                })?;
                let threads = std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1);
                let e =
                    rag_models::BertEmbedder::load(&dir, threads, cfg.bert_precision, cfg.kernel)
                        .map_err(|e| UserFacing(e.to_string()))?;
                tracing::info!(precision = %e.precision(), dir = %dir.display(), "bert embedder loaded");
                Some(Arc::new(e))
            }
            "e5" => {
                let threads = std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1);
                let e = rag_models::E5Embedder::load(&model_path, threads, cfg.kernel)
                    .map_err(|e| UserFacing(e.to_string()))?;
                tracing::info!(kernel = %e.kernel(), path = %model_path.display(), "e5 embedder loaded");
                Some(Arc::new(e))
            }
            other => {
                return Err(UserFacing(format!(
                    "embedder kind {other:?} is not available in this build"
                ))
                .into())
            }
        };
        let cache: Option<Arc<dyn rag_core::EmbeddingCache>> =
            match (&embedder, self.config.cache_dir()) {
                (Some(_), Some(dir)) => Some(Arc::new(
                    rag_store::SqliteEmbeddingCache::open(&dir).with_context(|| {
                        format!("opening the embedding cache in {}", dir.display())
                    })?,
                )),
                _ => None,
            };
        Ok((embedder, cache))
    }

    /// The translated path's dictionary (see `dictionary.kind`), read on a
    /// thread of its own from now on: `None` when turned off or, under
    /// "auto", when its file is missing.
    pub(crate) fn dictionary(&self) -> anyhow::Result<Option<Arc<rag_engine::Dictionary>>> {
        let cfg = &self.config.dictionary;
        match cfg.kind.as_str() {
            "none" => return Ok(None),
            "auto" if !cfg.path.is_file() => {
                tracing::info!(path = %cfg.path.display(), "no bilingual dictionary; the translated path returns nothing (run scripts/models/fetch-cedict.sh)");
                return Ok(None);
            }
            "cedict" if !cfg.path.is_file() => {
                return Err(UserFacing(format!(
                    "dictionary.path {}: no such file (run scripts/models/fetch-cedict.sh)",
                    cfg.path.display()
                ))
                .into())
            }
            "auto" | "cedict" => {}
            other => {
                return Err(UserFacing(format!(
                    "dictionary.kind {other:?}: it must be \"auto\", \"cedict\" or \"none\""
                ))
                .into())
            }
        }
        let d = rag_engine::Dictionary::at(&cfg.path);
        d.load_in_background();
        Ok(Some(d))
    }

    /// The second, English-only embedder, beside `first` (see
    /// `embedder.second`): `None` without a first embedder, when turned
    /// off, or, under "auto", when its model directory is missing.
    pub(crate) fn second_embedder(
        &self,
        first: &Option<Arc<dyn rag_core::Embedder>>,
    ) -> anyhow::Result<Option<Arc<dyn rag_core::Embedder>>> {
        let cfg = &self.config.embedder;
        let dir = &cfg.second_model_dir;
        let first_is_it = first
            .as_ref()
            .is_some_and(|f| f.model_id().starts_with("bert:"))
            && cfg.model_dir.as_deref() == Some(dir.as_path());
        match cfg.second.as_str() {
            "none" => return Ok(None),
            _ if first.is_none() => return Ok(None),
            // The first embedder already is that model: no second opinion.
            "auto" | "bert" if first_is_it => return Ok(None),
            "auto" if !dir.join("config.json").is_file() => {
                tracing::info!(dir = %dir.display(), "no second embedder model; English questions are scored by the first alone (run scripts/models/fetch-minilm.sh)");
                return Ok(None);
            }
            "auto" | "bert" => {}
            other => {
                return Err(UserFacing(format!(
                    "embedder.second {other:?}: it must be \"auto\", \"bert\" or \"none\""
                ))
                .into())
            }
        }
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let e = rag_models::BertEmbedder::load(
            dir,
            threads,
            rag_models::BertPrecision::Bf16,
            cfg.kernel,
        )
        .map_err(|e| UserFacing(format!("the second embedder: {e}")))?;
        tracing::info!(dir = %dir.display(), "second embedder loaded");
        Ok(Some(Arc::new(e)))
    }
}

async fn dispatch(app: App, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Kb { command } => match command {
            KbCommand::Create { name } => {
                let engine = app.engine(OpenMode::ReadWrite)?;
                let settings = rag_core::KbSettings {
                    retrieval: app.config.retrieval.clone(),
                    ..Default::default()
                };
                let kb = engine
                    .create_kb(&app.tenant, &name, settings)
                    .await
                    .map_err(core_err)?;
                println!("created knowledge base {} ({})", kb.name, kb.id);
                Ok(())
            }
            KbCommand::List { json } => {
                let engine = app.engine(OpenMode::ReadOnly)?;
                let kbs = engine
                    .store()
                    .list_kbs(&app.tenant)
                    .await
                    .map_err(core_err)?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&kbs)?);
                } else if kbs.is_empty() {
                    println!("no knowledge bases; create one with: ragscope kb create NAME");
                } else {
                    for kb in kbs {
                        // Counted by the store's indexes, not by loading every row.
                        let counts = engine
                            .store()
                            .kb_counts(&app.tenant, kb.id)
                            .await
                            .map_err(core_err)?;
                        println!(
                            "{:<24} {:>5} documents {:>5} FAQ entries  {}",
                            kb.name, counts.documents, counts.faqs, kb.id
                        );
                    }
                }
                Ok(())
            }
            KbCommand::Delete { name } => {
                let engine = app.engine(OpenMode::ReadWrite)?;
                let kb = engine.kb(&app.tenant, &name).await.map_err(core_err)?;
                engine
                    .store()
                    .delete_kb(&app.tenant, kb.id)
                    .await
                    .map_err(core_err)?;
                println!("deleted knowledge base {name}");
                Ok(())
            }
        },
        Command::Ingest(args) => ingest_cmd::run(&app, args).await,
        Command::Docs(args) => docs_cmd::run(&app, args).await,
        Command::Source { command } => source_cmd::run(&app, command).await,
        Command::Synonyms(args) => cli::synonyms(&app, args).await,
        Command::Facts(args) => cli::facts(&app, args).await,
        Command::Dict(args) => cli::dict(&app, args).await,
        Command::Faq(args) => faq_cmd::run(&app, args).await,
        Command::Query(args) => cli::query(&app, args).await,
        Command::Ask(args) => cli::ask(&app, args).await,
        Command::Eval(args) => eval::run(&app, args).await,
        Command::Tune(args) => tune::run(&app, args).await,
        Command::Intents(args) => intents_cmd::run(&app, args).await,
        Command::Bench(args) => bench::run(&app, args).await,
        Command::BenchHttp(args) => bench_http::run(&app, args).await,
        Command::BenchStore(args) => bench_store::run(&app, args).await,
        Command::BenchScale(args) => bench_scale::run(&app, args).await,
        Command::BenchScaleRestart(args) => bench_restart::run(&app, args).await,
        Command::Demo(args) => demo::run(&app, args).await,
        Command::Reembed { kb } => {
            let engine = app.engine(OpenMode::ReadWrite)?;
            let started = std::time::Instant::now();
            let report = engine
                .reembed(&app.tenant, &kb, |done, total| {
                    if total > 0 {
                        eprint!("\rembedding {done}/{total}");
                    }
                })
                .await
                .map_err(core_err)?;
            eprintln!();
            println!(
                "{} passages needed a vector: {} from the cache, {} computed{} ({:.1} s)",
                report.needed,
                report.cached,
                report.computed,
                if report.switched_model {
                    "; vectors of the previous model were dropped"
                } else {
                    ""
                },
                started.elapsed().as_secs_f64()
            );
            if report.sentences_added > 0 {
                println!(
                    "{} passages with a current vector got sentence vectors",
                    report.sentences_added
                );
            }
            if report.second_added > 0 {
                println!(
                    "{} passages with a current vector got the second embedder's vectors",
                    report.second_added
                );
            }
            Ok(())
        }
        Command::Export(args) => {
            let engine = app.engine(OpenMode::ReadOnly)?;
            let mut sink: Box<dyn std::io::Write + Send> = match &args.out {
                Some(p) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("creating {}", p.display()))?,
                )),
                None => Box::new(std::io::BufWriter::new(std::io::stdout())),
            };
            let counts = engine
                .export_kb(&app.tenant, &args.kb, args.vectors, &mut |line| {
                    serde_json::to_writer(&mut sink, line).map_err(std::io::Error::other)?;
                    sink.write_all(b"\n")
                })
                .await
                .map_err(core_err)?;
            sink.flush()?;
            eprintln!("exported {}: {}", args.kb, serde_json::to_string(&counts)?);
            Ok(())
        }
        Command::Import(args) => {
            // Read a line at a time: an export of any size is imported in
            // the memory of one batch.
            use std::io::BufRead;
            let file = std::fs::File::open(&args.file)
                .with_context(|| format!("reading {}", args.file.display()))?;
            let shown = args.file.display().to_string();
            let mut lines = std::io::BufReader::new(file)
                .lines()
                .enumerate()
                .filter(|(_, l)| l.as_ref().map_or(true, |l| !l.trim().is_empty()))
                .map(|(i, line)| {
                    let bad = |reason: String| {
                        CoreError::from(rag_core::UserError::InvalidParam {
                            name: "import",
                            reason: format!("{shown} line {}: {reason}", i + 1),
                        })
                    };
                    let line = line.map_err(|e| bad(format!("unreadable: {e}")))?;
                    serde_json::from_str::<rag_engine::ExportLine>(&line)
                        .map_err(|e| bad(format!("not an export line: {e}")))
                });
            let engine = app.engine(OpenMode::ReadWrite)?;
            let (kb, counts) = engine
                .import_kb(&app.tenant, &mut lines, args.name.as_deref(), args.new_ids)
                .await
                .map_err(core_err)?;
            println!(
                "imported {} ({}): {}",
                kb.name,
                kb.id,
                serde_json::to_string(&counts)?
            );
            Ok(())
        }
        Command::Migrate(args) => {
            let config = rag_store_pg::parse_config(&args.admin_url)
                .map_err(|e| UserFacing(e.to_string()))?;
            let server = rag_store_pg::probe(&config)
                .await
                .map_err(|e| UserFacing(format!("connecting: {e}")))?;
            println!(
                "PostgreSQL {}, {}",
                server.version,
                if server.tls {
                    format!("over TLS (sslmode {})", config.tls_mode().as_str())
                } else {
                    "without TLS".to_owned()
                }
            );
            let report = rag_store_pg::migrate(&config)
                .await
                .map_err(|e| UserFacing(format!("migrating: {e}")))?;
            if report.applied.is_empty() {
                println!("the schema is current (version {})", report.from);
            } else {
                println!(
                    "migrated from version {} by applying {:?}",
                    report.from, report.applied
                );
            }
            if let Some(path) = args.app_password_file {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let password = text.lines().next().unwrap_or("").trim();
                if password.is_empty() {
                    return Err(UserFacing(format!("{} holds no password", path.display())).into());
                }
                rag_store_pg::set_app_password(&config, password)
                    .await
                    .map_err(|e| UserFacing(e.to_string()))?;
                println!(
                    "set the password of the application role {}",
                    rag_store_pg::APP_ROLE
                );
            }
            Ok(())
        }
        Command::CheckConfig => {
            print!("{}", app.config.redacted_toml()?);
            Ok(())
        }
        Command::Serve(args) => serve::run(app, args).await,
        Command::Mcp => mcp_cmd::run(app).await,
        Command::Models { command } => models_cmd::run(command).await,
    }
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var("RAGSCOPE_FAILPOINTS") {
        if let Err(e) = rag_core::failpoint::configure(&spec) {
            eprintln!("error: RAGSCOPE_FAILPOINTS: {e}");
            return ExitCode::from(2);
        }
    }
    // The extraction worker that the binary starts for each untrusted file:
    // before the command line, the configuration or any thread.
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new(rag_sandbox::WORKER_ARG))
    {
        return rag_sandbox::run_worker(std::io::stdin().lock(), std::io::stdout().lock());
    }
    let cli = Cli::parse();
    let flags = FlagOverrides {
        data_dir: cli.data_dir.clone(),
        store: cli.store.clone(),
        tenant: cli.tenant.clone(),
        log: (cli.log_level.is_some() || cli.log_format.is_some()).then(|| LogOverrides {
            level: cli.log_level.clone(),
            format: cli.log_format.clone(),
        }),
        embedder: cli
            .embedder
            .clone()
            .map(|kind| config::EmbedderOverrides { kind: Some(kind) }),
    };
    let data_dir_given = cli.data_dir.is_some();
    let config_path = cli
        .config
        .clone()
        .or_else(|| std::env::var_os("RAGSCOPE_CONFIG").map(Into::into));
    let config = match Config::load(config_path.as_deref(), flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    init_tracing(&config);
    let data_dir_given = data_dir_given || config.data_dir != Config::default().data_dir;
    let app = App {
        tenant: TenantId(config.tenant.clone()),
        config,
        data_dir_given,
    };
    // CPU work goes to blocking threads; a bounded pool keeps memory (stacks,
    // allocator arenas) flat under many concurrent queries.
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads((cpus * 4).max(8))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(app, cli.command));
    // Blocking work still running (a chunking or an index build of a
    // request that was stopped) is not waited for: the process exits.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<UserFacing>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
