//! The fuzz targets: one module per parser of outside input.
//!
//! A target takes the fuzzer's bytes, feeds them to the code under test the
//! way ragscope does (the right file name for [`rag_ingest::extract`], the
//! body types of the HTTP API, ...), checks the invariants that hold for
//! every input, and returns a signature of what the code did (error kind,
//! shape of the result). The driver keeps inputs with new signatures as
//! parents of later mutations, a cheap stand-in for coverage feedback.
//!
//! An invariant that does not hold panics with a message starting with
//! `invariant:`, so it is reported like any other panic.

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::mutate::Grammar;

pub mod check;
pub mod chunk;
pub mod config;
pub mod docx;
pub mod encoding;
pub mod faq;
pub mod html;
pub mod http_body;
pub mod markdown;
pub mod pdf;
pub mod query;
pub mod selftest;

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Name on the command line and of the corpus directory.
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// Runs one input; panics on a bug; returns a behaviour signature.
    pub run: fn(&[u8]) -> u64,
    /// Shape of the inputs, for the mutator.
    pub grammar: Grammar,
    /// Largest input tried, in bytes.
    pub max_len: usize,
    /// Stack of the thread that runs it: what the code gets in production
    /// (8 MiB: the main thread of rag-sandbox's extract worker; 2 MiB: a
    /// tokio worker or blocking thread of the server), so a stack overflow
    /// found here is one production would have.
    pub stack_bytes: usize,
    /// Whether production runs this code only inside rag-sandbox's worker
    /// process, where a crash or hang fails one file (`parse_crash`,
    /// `parse_limit`) instead of the server. Panics are bugs either way.
    pub contained: bool,
}

const MIB: usize = 1 << 20;

/// Every target, in the order the bounded run takes them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "pdf",
        about: "rag_ingest::extract on PDFs (raw, and with the xref table rebuilt so mutated objects are parsed)",
        run: pdf::run,
        grammar: pdf::GRAMMAR,
        max_len: 64 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "docx",
        about: "rag_ingest::extract on DOCX (raw zips, and mutated XML parts packed into a fresh archive)",
        run: docx::run,
        grammar: docx::GRAMMAR,
        max_len: 64 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "html",
        about: "rag_ingest::extract on HTML pages",
        run: html::run_extract,
        grammar: html::GRAMMAR,
        max_len: 256 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "html_links",
        about: "rag_ingest::html_links, run for the URL-source crawler (in the extraction worker)",
        run: html::run_links,
        grammar: html::GRAMMAR,
        max_len: 256 << 10,
        stack_bytes: 2 * MIB,
        contained: false,
    },
    Target {
        name: "markdown",
        about: "rag_ingest::extract on Markdown",
        run: markdown::run,
        grammar: markdown::GRAMMAR,
        max_len: 256 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "faq_csv",
        about: "rag_ingest::extract on CSV FAQ tables, and faq::parse_time on their cells",
        run: faq::run_csv,
        grammar: faq::CSV_GRAMMAR,
        max_len: 64 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "faq_jsonl",
        about: "rag_ingest::extract on JSONL FAQ tables",
        run: faq::run_jsonl,
        grammar: faq::JSONL_GRAMMAR,
        max_len: 64 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "encoding",
        about: "rag_ingest::decode_text, detect_format and extract of plain text (UTF-8/16, GB18030, legacy)",
        run: encoding::run,
        grammar: encoding::GRAMMAR,
        max_len: 64 << 10,
        stack_bytes: 8 * MIB,
        contained: true,
    },
    Target {
        name: "chunk",
        about: "rag_ingest::chunk on extracted text and Markdown, with varied budgets and token counters",
        run: chunk::run,
        grammar: chunk::GRAMMAR,
        max_len: 256 << 10,
        stack_bytes: 2 * MIB,
        contained: false,
    },
    Target {
        name: "query",
        about: "rag_text::Analyzer on queries (query and index modes, key terms, normalisation, pinyin, user words)",
        run: query::run,
        grammar: query::GRAMMAR,
        max_len: 16 << 10,
        stack_bytes: 2 * MIB,
        contained: false,
    },
    Target {
        name: "config",
        about: "TOML: toml::Table round trip, RetrievalParams, KbSettings and RetrievalOverrides from TOML, validated",
        run: config::run,
        grammar: config::GRAMMAR,
        max_len: 16 << 10,
        stack_bytes: 2 * MIB,
        contained: false,
    },
    Target {
        name: "http_body",
        about: "serde_json bodies of the API: QueryRequest, RetrievalParams, RetrievalOverrides, Filters, KbSettings, synonyms, user words; validated, then fused",
        run: http_body::run,
        grammar: http_body::GRAMMAR,
        max_len: 16 << 10,
        stack_bytes: 2 * MIB,
        contained: false,
    },
];

/// The target that tests the harness ([`selftest`]); not fuzzed.
pub const SELFTEST: Target = Target {
    name: "selftest",
    about: "misbehaves on purpose, to test the harness",
    run: selftest::run,
    grammar: selftest::GRAMMAR,
    max_len: 64,
    stack_bytes: 2 * MIB,
    contained: false,
};

/// A target by name (the self-test included).
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS
        .iter()
        .chain(std::iter::once(&SELFTEST))
        .find(|t| t.name == name)
}

/// Builds a behaviour signature.
#[derive(Debug, Default)]
pub struct Sig(DefaultHasher);

impl Sig {
    /// An empty signature.
    pub fn new() -> Self {
        Sig::default()
    }

    /// Adds anything hashable.
    pub fn add(&mut self, v: impl Hash) -> &mut Self {
        v.hash(&mut self.0);
        self
    }

    /// Adds a number by its order of magnitude (so sizes do not make every
    /// input new).
    pub fn magnitude(&mut self, n: usize) -> &mut Self {
        self.add(usize::BITS - n.leading_zeros())
    }

    /// Adds an error message without its digits and after its first 48
    /// characters (offsets and lengths would make every input new).
    pub fn message(&mut self, m: &str) -> &mut Self {
        let m: String = m.chars().filter(|c| !c.is_ascii_digit()).take(48).collect();
        self.add(m)
    }

    /// The signature.
    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}
