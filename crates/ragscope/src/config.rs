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
}

/// The HTTP server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    pub addr: String,
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./data"),
            tenant: "default".into(),
            log: LogConfig::default(),
            limits: LimitsConfig::default(),
            retrieval: RetrievalParams::default(),
            server: ServerConfig::default(),
            providers: ProvidersConfig::default(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "warn".into(), format: "text".into() }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig { max_query_bytes: 4096, max_file_bytes: 64 * 1024 * 1024 }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { addr: "127.0.0.1:3210".into() }
    }
}

/// Flags that override the configuration (only those given).
#[derive(Debug, Default, Serialize)]
pub struct FlagOverrides {
    /// --data-dir
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// --tenant
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// --log-level / --log-format
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogOverrides>,
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
            None if Path::new("ragscope.toml").exists() => fig = fig.merge(Toml::file("ragscope.toml")),
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
        let config: Config = fig.extract().map_err(|e| anyhow::anyhow!("configuration: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.retrieval.validate().map_err(|e| anyhow::anyhow!("configuration: retrieval: {e}"))?;
        if !matches!(self.log.format.as_str(), "text" | "json") {
            anyhow::bail!("configuration: log.format must be \"text\" or \"json\"");
        }
        if self.limits.max_query_bytes == 0 || self.limits.max_file_bytes == 0 {
            anyhow::bail!("configuration: limits must be positive");
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
    ["key", "secret", "token", "password"].iter().any(|s| k.ends_with(s))
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
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let mut c = Config::default();
        c.providers.openrouter_api_key = Some("sk-or-very-secret".into());
        let out = c.redacted_toml().unwrap();
        assert!(!out.contains("very-secret"), "{out}");
        assert!(out.contains("redacted"));
    }
}
