//! Layered configuration: built-in defaults, then a TOML file, then
//! `RAGSCOPE_*` environment variables (`__` separates sections, e.g.
//! `RAGSCOPE_LOG__LEVEL=debug`), then command-line flags.

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use rag_core::RetrievalParams;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the embedded store keeps its data.
    pub data_dir: PathBuf,
    /// A PostgreSQL store instead of the embedded one:
    /// `postgres://ragscope_app:…@host:5432/db` (the application role that
    /// `ragscope migrate` prepares; its password is redacted when printed).
    pub store: Option<String>,
    /// The tenant the command line acts as.
    pub tenant: String,
    /// Logging.
    pub log: LogConfig,
    /// Limits on input.
    pub limits: LimitsConfig,
    /// Default retrieval parameters of new knowledge bases and of queries.
    pub retrieval: RetrievalParams,
    /// The HTTP server (arrives with the server issue).
    pub server: ServerConfig,
    /// Model providers (arrive with the dense and answer issues); secrets are redacted when printed.
    pub providers: ProvidersConfig,
    /// The embedder of the dense path.
    pub embedder: EmbedderConfig,
    /// Fetching URL sources.
    pub sources: SourcesConfig,
    /// The derived indexes kept next to the embedded store.
    pub index: IndexConfig,
    /// The bilingual dictionary of the translated path.
    pub dictionary: DictionaryConfig,
}

/// Where the default dictionary is (relative to the working directory, as
/// `embedder.model_path`): CC-CEDICT, from scripts/models/fetch-cedict.sh.
pub const DEFAULT_DICTIONARY_PATH: &str = "models/cedict_ts.u8";

/// The bilingual dictionary of the translated path (Chinese questions over
/// English text and the reverse, through words).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DictionaryConfig {
    /// "auto" (the file at `path` when it exists), "cedict" (the same, and
    /// a start-up error when it is missing) or "none" (the translated path
    /// returns nothing).
    pub kind: String,
    /// A file in CC-CEDICT's text format.
    pub path: PathBuf,
}

impl Default for DictionaryConfig {
    fn default() -> Self {
        DictionaryConfig {
            kind: "auto".into(),
            path: PathBuf::from(DEFAULT_DICTIONARY_PATH),
        }
    }
}

/// The derived indexes kept next to the embedded store (`<data_dir>/index`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexConfig {
    /// Passages per lexical segment of a full build, each written to its
    /// file and read back in place before the next is built; merges never
    /// gather more. Smaller holds less memory while building, larger
    /// answers a little faster.
    pub segment_passages: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            segment_passages: rag_lexical::SEGMENT_PASSAGES,
        }
    }
}

/// Fetching URL sources.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// Whole request per page, in milliseconds.
    pub timeout_ms: u64,
    /// Largest page, in bytes.
    pub max_page_bytes: u64,
    /// Most redirects followed per page.
    pub max_redirects: usize,
    /// Allow loopback, private and link-local addresses (an intranet wiki,
    /// a local test site). Off by default: a server that fetches URLs for its
    /// users must not become a way into the network it runs in.
    pub allow_private: bool,
    /// A proxy for fetching URL sources (`http://proxy:3128`). Without it,
    /// sources never go through a proxy, whatever `HTTP_PROXY` says.
    pub proxy: Option<String>,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            timeout_ms: 15_000,
            max_page_bytes: 10 * 1024 * 1024,
            max_redirects: 5,
            allow_private: false,
            proxy: None,
        }
    }
}

/// Where `embedder.second_model_dir` points by default (relative to the
/// working directory, as the e5 model's default path).
pub const DEFAULT_SECOND_MODEL_DIR: &str = "models/all-MiniLM-L6-v2";

/// Which embedder the dense path uses.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderConfig {
    /// "auto" (e5 when its model file exists, else none), "e5" (in-process
    /// multilingual-e5-small), "bert" (a Hugging Face model directory, in
    /// process), "openai" (any OpenAI-compatible endpoint) or "none".
    pub kind: String,
    /// The e5 model file (fetched by scripts/models/fetch-e5.sh). Left at
    /// its default, the file is also looked for in the user's data
    /// directory and beside the binary (`model_path.rs`).
    pub model_path: PathBuf,
    /// The e5 matrix kernel: "auto" (the fastest this CPU runs: AMX-INT8,
    /// then AVX-512 VNNI, then AVX2, then portable), or one of "amx",
    /// "avx512", "avx2", "portable" to force a tier. A tier the CPU lacks
    /// is a start-up error, not a silent fallback.
    #[serde(with = "kernel_setting")]
    pub kernel: rag_models::E5Kernel,
    /// A Hugging Face BERT-family model directory, for kind = "bert"
    /// (config.json, model.safetensors, tokenizer.json; e.g. all-MiniLM-L6-v2
    /// from scripts/models/fetch-minilm.sh).
    pub model_dir: Option<PathBuf>,
    /// The precision of the bert model's linear layers: "f32" (the
    /// default, the file's numerics), "bf16" (weights and activations in
    /// bfloat16, sums in f32: half the weight memory, several times faster
    /// queries, cosine 0.99994 to f32) or "int8" (int8 weights per
    /// channel, a third of the memory, cosine 0.9992). Runs on the kernels
    /// `kernel` allows.
    #[serde(with = "precision_setting")]
    pub bert_precision: rag_models::BertPrecision,
    /// Where embeddings are cached by model and text hash, shared by every data directory.
    pub cache_dir: Option<PathBuf>,
    /// Whether document passages of several sentences are also embedded
    /// sentence by sentence, so the dense path scores its best candidates
    /// by their best sentence too (docs/quality.md: SciFact dense nDCG@10
    /// +0.04 on the development set). Costs about twice the embedding time
    /// and a few hundred bytes per sentence in the store; FAQ entries are
    /// not affected.
    pub sentence_vectors: bool,
    /// A second, English-only embedder beside the first, whose vectors of
    /// English passages rescore the candidates of English questions
    /// (docs/quality.md): "auto" (the BERT-family model in
    /// `second_model_dir` when that directory exists and a first embedder
    /// runs), "bert" (the same, and a start-up error when it cannot load),
    /// or "none".
    pub second: String,
    /// The second embedder's Hugging Face model directory
    /// (all-MiniLM-L6-v2 from scripts/models/fetch-minilm.sh by default),
    /// run in bf16 on the kernels `kernel` allows.
    pub second_model_dir: PathBuf,
    /// The OpenAI-compatible endpoint, for kind = "openai".
    pub openai: OpenAiConfig,
}

/// `embedder.kernel` is spelled as [`rag_models::E5Kernel`]'s names.
mod kernel_setting {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(k: &rag_models::E5Kernel, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(k.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<rag_models::E5Kernel, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `embedder.bert_precision` is spelled "f32", "int8" or "bf16".
mod precision_setting {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        p: &rag_models::BertPrecision,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<rag_models::BertPrecision, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URL with the version prefix, e.g. https://api.openai.com/v1.
    pub base_url: String,
    /// API key (redacted when printed).
    pub api_key: Option<String>,
    /// Model for documents (and queries unless query_model is set).
    pub model: String,
    /// Model for queries.
    pub query_model: Option<String>,
    /// Texts per request.
    pub batch_size: usize,
    /// Timeout per request in milliseconds.
    pub timeout_ms: u64,
    /// Retries for connection errors, 429 and 5xx.
    pub max_retries: u32,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig {
            kind: "auto".into(),
            model_path: PathBuf::from(crate::model_path::DEFAULT_MODEL_PATH),
            kernel: rag_models::E5Kernel::Auto,
            model_dir: None,
            bert_precision: rag_models::BertPrecision::F32,
            cache_dir: None,
            sentence_vectors: true,
            second: "auto".into(),
            second_model_dir: PathBuf::from(DEFAULT_SECOND_MODEL_DIR),
            openai: OpenAiConfig::default(),
        }
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "text-embedding-3-small".into(),
            query_model: None,
            batch_size: 64,
            timeout_ms: 30_000,
            max_retries: 3,
        }
    }
}

/// Logging.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter, e.g. "info" or "rag_engine=debug".
    pub level: String,
    /// "text" or "json".
    pub format: String,
}

/// Input limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Longest accepted query, in bytes.
    pub max_query_bytes: usize,
    /// Largest accepted input file, in bytes.
    pub max_file_bytes: usize,
    /// Wall time of one file's extraction (in a worker process), in ms.
    pub extract_wall_ms: u64,
    /// CPU time of one file's extraction, in ms (counted in whole seconds).
    pub extract_cpu_ms: u64,
    /// Memory (address space) of one file's extraction worker, in MiB.
    pub extract_memory_mb: u64,
}

/// The HTTP server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    pub addr: String,
    /// Whether query texts appear in request logs.
    pub log_queries: bool,
    /// Largest JSON body, in bytes.
    pub max_json_bytes: usize,
    /// Largest upload, in bytes.
    pub max_upload_bytes: usize,
    /// Most files in one upload.
    pub max_files_per_upload: usize,
    /// Largest top-k or per-path k a request may ask for.
    pub max_top_k: usize,
    /// Queries one key may run at once.
    pub max_concurrent_queries_per_key: usize,
    /// Ingests (uploads, URL-source syncs) one key may run at once.
    pub max_concurrent_ingests_per_key: usize,
    /// How long a query waits for the first build of a knowledge base's
    /// indexes in this server (no index file to read) before it is answered
    /// `index_building` (503, retry shortly) while the build goes on, in ms.
    pub first_build_wait_ms: u64,
    /// Web origins whose pages may call the API from the browser (the chat
    /// widget on a customer's site), e.g. ["https://shop.example"].
    pub cors_origins: Vec<String>,
}

/// Model providers.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ProvidersConfig {
    /// OpenRouter API key (also read from OPENROUTER_API_KEY).
    pub openrouter_api_key: Option<String>,
    /// Base URL of an OpenAI-compatible LLM endpoint.
    pub llm_base_url: Option<String>,
    /// API key of that endpoint.
    pub llm_api_key: Option<String>,
    /// Base URL of an OpenAI-compatible embeddings endpoint.
    pub embeddings_base_url: Option<String>,
    /// API key of that endpoint.
    pub embeddings_api_key: Option<String>,
    /// The LLM model name (default: OpenRouter's default model in rag-models).
    pub llm_model: Option<String>,
    /// Base URL of a Jina/Cohere-compatible `/rerank` endpoint (with the version prefix).
    pub rerank_base_url: Option<String>,
    /// API key of that endpoint.
    pub rerank_api_key: Option<String>,
    /// The reranker model.
    pub rerank_model: Option<String>,
    /// Rerank LLM-listwise with the configured LLM when no rerank endpoint is set.
    pub rerank_with_llm: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./data"),
            store: None,
            tenant: "default".into(),
            log: LogConfig::default(),
            limits: LimitsConfig::default(),
            retrieval: RetrievalParams::default(),
            server: ServerConfig::default(),
            providers: ProvidersConfig::default(),
            embedder: EmbedderConfig::default(),
            sources: SourcesConfig::default(),
            index: IndexConfig::default(),
            dictionary: DictionaryConfig::default(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "warn".into(),
            format: "text".into(),
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_query_bytes: 4096,
            max_file_bytes: 64 * 1024 * 1024,
            extract_wall_ms: 30_000,
            extract_cpu_ms: 20_000,
            extract_memory_mb: 512,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let l = rag_server::Limits::default();
        ServerConfig {
            addr: "127.0.0.1:3210".into(),
            log_queries: false,
            max_json_bytes: l.max_json_bytes,
            max_upload_bytes: l.max_upload_bytes,
            max_files_per_upload: l.max_files_per_upload,
            max_top_k: l.max_top_k,
            max_concurrent_queries_per_key: l.max_concurrent_queries_per_key,
            max_concurrent_ingests_per_key: l.max_concurrent_ingests_per_key,
            first_build_wait_ms: 1000,
            cors_origins: Vec::new(),
        }
    }
}

/// Flags that override the configuration (only those given).
#[derive(Debug, Default, Serialize)]
pub struct FlagOverrides {
    /// --data-dir
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// --store
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// --tenant
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// --log-level / --log-format
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogOverrides>,
    /// --embedder
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedder: Option<EmbedderOverrides>,
}

/// Embedder flags.
#[derive(Debug, Default, Serialize)]
pub struct EmbedderOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// Logging flags.
#[derive(Debug, Default, Serialize)]
pub struct LogOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

impl Config {
    /// Loads the layers. `file` is the explicit config path, if any; otherwise
    /// `./ragscope.toml` is read when it exists.
    pub fn load(file: Option<&Path>, flags: FlagOverrides) -> anyhow::Result<Config> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(path) => {
                if !path.exists() {
                    anyhow::bail!("config file {} does not exist", path.display());
                }
                fig = fig.merge(Toml::file(path));
            }
            None if Path::new("ragscope.toml").exists() => {
                fig = fig.merge(Toml::file("ragscope.toml"))
            }
            None => {}
        }
        // Environment: RAGSCOPE_SECTION__KEY. Variables that are not settings are ignored.
        let env_provider = Env::prefixed("RAGSCOPE_")
            .ignore(&["config", "failpoints", "eval_dir", "pyenv"])
            .split("__")
            .lowercase(true);
        if let Ok(key) = std::env::var("OPENROUTER_API_KEY") {
            if !key.trim().is_empty() {
                fig = fig.merge(Serialized::default("providers.openrouter_api_key", key));
            }
        }
        fig = fig.merge(env_provider);
        fig = fig.merge(Serialized::defaults(flags));
        let config: Config = fig
            .extract()
            .map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.retrieval
            .validate()
            .map_err(|e| anyhow::anyhow!("configuration: retrieval: {e}"))?;
        if !matches!(self.log.format.as_str(), "text" | "json") {
            anyhow::bail!("configuration: log.format must be \"text\" or \"json\"");
        }
        if self.limits.max_query_bytes == 0
            || self.limits.max_file_bytes == 0
            || self.limits.extract_wall_ms == 0
            || self.limits.extract_cpu_ms == 0
            || self.limits.extract_memory_mb < 64
        {
            anyhow::bail!("configuration: limits must be positive (extract_memory_mb at least 64)");
        }
        if !matches!(
            self.embedder.kind.as_str(),
            "auto" | "e5" | "bert" | "openai" | "none"
        ) {
            anyhow::bail!("configuration: embedder.kind must be \"auto\", \"e5\", \"bert\", \"openai\" or \"none\"");
        }
        if self.index.segment_passages == 0 {
            anyhow::bail!("configuration: index.segment_passages must be positive");
        }
        if self.tenant.trim().is_empty() {
            anyhow::bail!("configuration: tenant must not be empty");
        }
        Ok(())
    }

    /// The configuration as TOML with every secret redacted.
    pub fn redacted_toml(&self) -> anyhow::Result<String> {
        let mut value = toml::Value::try_from(self)?;
        redact(&mut value, "");
        Ok(toml::to_string_pretty(&value)?)
    }
}

fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["key", "secret", "token", "password"]
        .iter()
        .any(|s| k.ends_with(s))
}

/// `scheme://user:password@host/…` with the password replaced.
/// A URL as printed: credentials and secret parameters removed.
pub(crate) fn redact_url_password(url: &str) -> String {
    rag_core::redact::redact_url(url)
}

fn redact(v: &mut toml::Value, key: &str) {
    match v {
        toml::Value::Table(t) => {
            for (k, child) in t.iter_mut() {
                redact(child, k);
            }
        }
        toml::Value::Array(a) => a.iter_mut().for_each(|c| redact(c, key)),
        toml::Value::String(s) if is_secret_key(key) => {
            *s = format!("<redacted, {} characters>", s.chars().count());
        }
        toml::Value::String(s) if key == "store" || key.ends_with("url") => {
            *s = redact_url_password(s)
        }
        _ => {}
    }
}

impl Config {
    /// The embedding cache directory: configured, else $XDG_CACHE_HOME/ragscope, else ~/.cache/ragscope.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.embedder.cache_dir.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|d| d.join("ragscope"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_lose_their_password_when_printed() {
        assert_eq!(
            redact_url_password("postgres://app:s3cr@t@db:5432/r"),
            "postgres://***@db:5432/r"
        );
        assert_eq!(
            redact_url_password("http://llm:8000/v1?api_key=k"),
            "http://llm:8000/v1?api_key=***"
        );
        assert_eq!(redact_url_password("not a url"), "not a url");
    }

    #[test]
    fn secrets_are_redacted() {
        let mut c = Config::default();
        c.providers.openrouter_api_key = Some("sk-or-very-secret".into());
        let out = c.redacted_toml().unwrap();
        assert!(!out.contains("very-secret"), "{out}");
        assert!(out.contains("redacted"));
    }
}
