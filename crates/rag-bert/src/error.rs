//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading a model directory or parsing
/// its files. Inference itself cannot fail once a model is loaded.
#[derive(Debug, thiserror::Error)]
pub enum BertError {
    /// A file of the model directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A required file is missing from the model directory.
    #[error("{path} is missing: a Hugging Face BERT model directory needs config.json, model.safetensors and tokenizer.json")]
    MissingFile {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// A JSON file is not valid JSON or lacks a required field.
    #[error("{file}: {message}")]
    Json {
        /// Which file (config.json, tokenizer.json, …).
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The model uses something this crate does not implement. Refused rather
    /// than run with wrong output.
    #[error("unsupported {what}: {detail}")]
    Unsupported {
        /// The feature (tokenizer model, normalizer, activation, …).
        what: &'static str,
        /// The value found and what is supported.
        detail: String,
    },
    /// The weights file is malformed, lacks a tensor or has one of the wrong
    /// shape or type.
    #[error("model.safetensors: {0}")]
    Weights(String),
    /// The files disagree with each other or hold impossible values.
    #[error("inconsistent model: {0}")]
    Inconsistent(String),
}

impl BertError {
    pub(crate) fn json(file: &'static str, message: impl Into<String>) -> Self {
        BertError::Json {
            file,
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(what: &'static str, detail: impl Into<String>) -> Self {
        BertError::Unsupported {
            what,
            detail: detail.into(),
        }
    }
}
