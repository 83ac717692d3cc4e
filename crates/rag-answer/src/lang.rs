//! The language an answer is written in, and the fixed sentences of each language.

use rag_core::Language;
use serde::{Deserialize, Serialize};

/// The language of an answer: the question's language, Chinese or English.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerLanguage {
    /// Simplified Chinese.
    Zh,
    /// English.
    En,
}

impl AnswerLanguage {
    /// The answer language for a question's detected language: mixed text
    /// with Chinese in it is answered in Chinese (identifiers and product
    /// names in Latin letters are common in Chinese questions); text with no
    /// letters at all is answered in English.
    pub fn from_detected(language: Language) -> Self {
        match language {
            Language::Zh | Language::Mixed => AnswerLanguage::Zh,
            Language::En | Language::Unknown => AnswerLanguage::En,
        }
    }

    /// The answer language of `text`.
    pub fn of(text: &str) -> Self {
        Self::from_detected(rag_text::detect_language(text))
    }

    /// The language of a source text for quoting: `None` when it is neither
    /// clearly Chinese nor clearly English.
    pub fn of_source(text: &str) -> Option<Self> {
        match rag_text::detect_language(text) {
            Language::Zh => Some(AnswerLanguage::Zh),
            Language::En => Some(AnswerLanguage::En),
            Language::Mixed | Language::Unknown => None,
        }
    }

    /// The fixed sentence an answer uses when the sources do not support an
    /// answer (the prompt tells the LLM to use exactly this sentence).
    pub fn not_covered_sentence(self) -> &'static str {
        match self {
            AnswerLanguage::Zh => "知识库中没有相关信息。",
            AnswerLanguage::En => "The knowledge base does not cover this.",
        }
    }

    /// The language's name as written in a prompt.
    pub fn prompt_name(self) -> &'static str {
        match self {
            AnswerLanguage::Zh => "Simplified Chinese (简体中文)",
            AnswerLanguage::En => "English",
        }
    }
}
