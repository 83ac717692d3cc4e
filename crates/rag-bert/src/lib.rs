//! Sentence embeddings from standard Hugging Face BERT-family model
//! directories, in pure and safe Rust.
//!
//! A model directory as the Hugging Face hub and sentence-transformers save
//! it holds `config.json`, `model.safetensors` and `tokenizer.json`, and
//! usually the sentence-transformers files `modules.json`,
//! `1_Pooling/config.json` and `sentence_bert_config.json`. This crate reads
//! them and computes the same vectors as sentence-transformers:
//!
//! * **Tokenizer**: WordPiece with the BERT normaliser (text cleaning, CJK
//!   ideographs split into single characters, accent stripping and
//!   lowercasing as the file says), the BERT pre-tokeniser, `##`
//!   continuations; or Unigram (SentencePiece, as XLM-RoBERTa based models
//!   such as paraphrase-multilingual-MiniLM-L12-v2 use) with the precompiled
//!   character map, `Strip`/`Replace`/NFKC-style normalisers, `Metaspace`
//!   and Viterbi segmentation; added special tokens and the post-processor's
//!   template (`[CLS] … [SEP]`, `<s> … </s>`). Other components (BPE,
//!   byte-level, other normalisers or regular expressions) are refused with
//!   [`BertError::Unsupported`], never approximated.
//! * **Encoder**: the post-layer-norm BERT encoder (also RoBERTa/XLM-R
//!   position numbering) in f32; weights may be stored as f32, f16 or bf16,
//!   with or without a `bert.` prefix; GELU (erf or tanh) or ReLU.
//! * **Pooling**: from `modules.json` and the pooling module's config (mean,
//!   CLS or max; L2 normalisation when a Normalize module follows). Without
//!   `modules.json`: mean pooling and L2 normalisation. Modules this crate does
//!   not run (a Dense projection, for instance) are refused.
//! * **Input case**: texts are lowercased first when
//!   `sentence_bert_config.json` says `do_lower_case`, as sentence-transformers
//!   does.
//! * **Length**: `max_seq_length` from `sentence_bert_config.json` (else
//!   `model_max_length` from `tokenizer_config.json`), capped by the position
//!   table. Longer inputs are truncated, and every [`Embedding`] records how
//!   many tokens the text had, so truncation is never silent.
//!
//! [`BertModel::load`] reads a directory; [`BertModel::from_files`] parses
//! the same files from memory and does no I/O. Run
//! `scripts/models/fetch-minilm.sh` for sentence-transformers'
//! all-MiniLM-L6-v2.
//!
//! # Fidelity
//!
//! On all-MiniLM-L6-v2 (`tests/reference.rs`, 64 English, Chinese and other
//! texts, two of them truncated, plus 30 tokenizer-only edge cases) the token
//! ids equal sentence-transformers' for every text and the vectors agree to a
//! cosine of 1.0000000 (seven decimals). The Unigram tokenizer equals the
//! Hugging Face `tokenizers` library on the fixture of `tests/unigram.rs`,
//! and a tiny randomly initialised XLM-RoBERTa model saved by
//! sentence-transformers gives the same vectors (`tests/xlmr.rs`).
//!
//! # Precision
//!
//! [`BertModel::with_precision`] repacks the linear layers, once, into
//! bf16 or int8 on `rag-gemm`'s kernels ([`Precision`], [`Tiers`]):
//! all-MiniLM-L6-v2 keeps a minimum cosine of 0.99994 (bf16) or 0.99916
//! (int8) to sentence-transformers' vectors (`tests/precision.rs`), with
//! half or a third of the weight memory and short queries 3-4x faster on
//! AVX-512 (docs/speed.md).
//!
//! # Example
//!
//! ```no_run
//! let model = rag_bert::BertModel::load("models/all-MiniLM-L6-v2")?;
//! let query = model.embed("How do I reset my password?");
//! let docs = model.embed_batch(&["Open settings and choose 'Forgot password'.", "Pandas eat bamboo."]);
//! for doc in &docs {
//!     println!("score {:.3} (truncated: {})", rag_bert::dot(&query.vector, &doc.vector), doc.truncated());
//! }
//! # Ok::<(), rag_bert::BertError>(())
//! ```
//!
//! # Threads and performance
//!
//! [`BertModel::embed`] and [`BertModel::embed_batch`] run on the calling
//! thread. A batch runs as few forward passes as possible (up to
//! [`MAX_BATCH_TOKENS`] tokens each) without padding: the sequences' tokens
//! share every matrix product and attention is computed per sequence.
//! [`BertModel::embed_batch_parallel`] spreads a batch over scoped threads.
//! The model is `Send + Sync`. Build with optimisations: unoptimised, the
//! non-matrix parts (layer norms, softmax, GELU) dominate.
//!
//! Large products go through `matrixmultiply`, which picks AVX2/FMA kernels
//! at run time. Products of at most 16 rows (short queries) skip its packing
//! and dot each weight row with each input row, in code compiled for both the
//! x86-64 baseline and AVX2 with FMA (`multiversion`): all-MiniLM-L6-v2 on
//! this machine, median short query 8.6 ms against 10.5 ms for the baseline
//! build alone (`cargo run --release -p rag-bert --example bench`).

mod config;
mod error;
mod linear;
mod model;
mod precision;
mod tokenizer;
mod weights;

use std::path::{Path, PathBuf};

pub use config::{Activation, BertConfig, Pooling, SentenceConfig};
pub use error::BertError;
pub use precision::{Bf16Tier, Int8Tier, ParsePrecisionError, Precision, Tiers};
pub use tokenizer::{BertTokenizer, Encoding};

/// Most tokens one forward pass of [`BertModel::embed_batch`] stacks; longer
/// batches run in several passes. Bounds the activations' memory (the widest
/// is `tokens × intermediate_size` floats, plus `n × n` attention scores per
/// sequence).
pub const MAX_BATCH_TOKENS: usize = 4096;

/// One text's vector and what was run to get it.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// The sentence vector (unit length when the model normalises).
    pub vector: Vec<f32>,
    /// Tokens run through the encoder, special tokens included.
    pub tokens: usize,
    /// Tokens the text had before truncation, special tokens included.
    pub untruncated_tokens: usize,
}

impl Embedding {
    /// Whether the text was cut to the model's maximum sequence length (only
    /// its first [`Embedding::tokens`] tokens count in the vector).
    pub fn truncated(&self) -> bool {
        self.untruncated_tokens > self.tokens
    }
}

/// The files of a model directory, in memory. Only `config`, `weights` and
/// `tokenizer` are required.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelFiles<'a> {
    /// `config.json`.
    pub config: &'a [u8],
    /// `model.safetensors`.
    pub weights: &'a [u8],
    /// `tokenizer.json`.
    pub tokenizer: &'a [u8],
    /// `tokenizer_config.json`, for `model_max_length`.
    pub tokenizer_config: Option<&'a [u8]>,
    /// `modules.json` (sentence-transformers pipeline).
    pub modules: Option<&'a [u8]>,
    /// The pooling module's `config.json` (usually `1_Pooling/config.json`).
    pub pooling: Option<&'a [u8]>,
    /// `sentence_bert_config.json`, for `max_seq_length`.
    pub sentence_bert_config: Option<&'a [u8]>,
}

/// A loaded sentence-embedding model.
pub struct BertModel {
    tokenizer: BertTokenizer,
    encoder: model::Encoder,
    sentence: SentenceConfig,
    max_seq_len: usize,
    /// `do_lower_case` of `sentence_bert_config.json`.
    lowercase_input: bool,
}

impl std::fmt::Debug for BertModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertModel")
            .field("config", self.encoder.config())
            .field("sentence", &self.sentence)
            .field("max_seq_len", &self.max_seq_len)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, BertError> {
    std::fs::read(path).map_err(|source| BertError::Io {
        path: path.to_owned(),
        source,
    })
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, BertError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(BertError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

fn read_required(dir: &Path, name: &str) -> Result<Vec<u8>, BertError> {
    let path: PathBuf = dir.join(name);
    read_optional(&path)?.ok_or(BertError::MissingFile { path })
}

impl BertModel {
    /// Loads a model directory (see the crate documentation for the files).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, BertError> {
        let dir = dir.as_ref();
        let config = read_required(dir, "config.json")?;
        let tokenizer = read_required(dir, "tokenizer.json")?;
        let weights_path = dir.join("model.safetensors");
        if !weights_path.exists() {
            if dir.join("pytorch_model.bin").exists() {
                return Err(BertError::unsupported(
                    "weights file",
                    "pytorch_model.bin (pickle); convert the model to model.safetensors",
                ));
            }
            return Err(BertError::MissingFile { path: weights_path });
        }
        let weights = read(&weights_path)?;
        let tokenizer_config = read_optional(&dir.join("tokenizer_config.json"))?;
        let modules = read_optional(&dir.join("modules.json"))?;
        let sentence_bert_config = read_optional(&dir.join("sentence_bert_config.json"))?;
        let sentence = SentenceConfig::from_modules(modules.as_deref(), |path| {
            read_optional(&dir.join(path).join("config.json"))
        })?;
        let mut model = Self::build(
            ModelFiles {
                config: &config,
                weights: &weights,
                tokenizer: &tokenizer,
                tokenizer_config: tokenizer_config.as_deref(),
                modules: None,
                pooling: None,
                sentence_bert_config: sentence_bert_config.as_deref(),
            },
            sentence,
        )?;
        model.sentence = sentence;
        Ok(model)
    }

    /// Builds a model from the files' contents; no I/O.
    pub fn from_files(files: ModelFiles<'_>) -> Result<Self, BertError> {
        let sentence =
            SentenceConfig::from_modules(files.modules, |_| Ok(files.pooling.map(<[u8]>::to_vec)))?;
        Self::build(files, sentence)
    }

    fn build(files: ModelFiles<'_>, sentence: SentenceConfig) -> Result<Self, BertError> {
        let config = BertConfig::from_json(files.config)?;
        let tokenizer = BertTokenizer::from_json(files.tokenizer)?;
        if tokenizer.vocab_size() > config.vocab_size {
            return Err(BertError::Inconsistent(format!(
                "the tokenizer has ids up to {} but the model's vocabulary has {} rows",
                tokenizer.vocab_size() - 1,
                config.vocab_size
            )));
        }
        let probe = tokenizer.encode("", usize::MAX);
        if let Some(&ty) = probe
            .type_ids
            .iter()
            .find(|&&t| t as usize >= config.type_vocab_size)
        {
            return Err(BertError::Inconsistent(format!(
                "the tokenizer's template uses type id {ty} but type_vocab_size is {}",
                config.type_vocab_size
            )));
        }
        let max_seq_len =
            config::max_seq_len(&config, files.sentence_bert_config, files.tokenizer_config)?;
        if max_seq_len <= tokenizer.special_token_count() {
            return Err(BertError::Inconsistent(format!(
                "maximum sequence length {max_seq_len} leaves no room for text"
            )));
        }
        let lowercase_input = config::lowercase_input(files.sentence_bert_config)?;
        let encoder = model::Encoder::load(&config, files.weights)?;
        Ok(BertModel {
            tokenizer,
            encoder,
            sentence,
            max_seq_len,
            lowercase_input,
        })
    }

    /// Sets the maximum sequence length (special tokens included), at most
    /// what the position table can encode.
    pub fn with_max_seq_len(mut self, max_seq_len: usize) -> Result<Self, BertError> {
        let limit = self.encoder.config().max_positions();
        if max_seq_len > limit || max_seq_len <= self.tokenizer.special_token_count() {
            return Err(BertError::Inconsistent(format!(
                "maximum sequence length {max_seq_len} is outside {}..={limit}",
                self.tokenizer.special_token_count() + 1
            )));
        }
        self.max_seq_len = max_seq_len;
        Ok(self)
    }

    /// Runs the linear layers in `precision`, on the fastest kernels this
    /// CPU has ([`Tiers::best`]). See [`Self::with_precision_on`].
    pub fn with_precision(self, precision: Precision) -> Result<Self, BertError> {
        self.with_precision_on(precision, Tiers::best())
    }

    /// Runs the linear layers in `precision` on the given kernels: the f32
    /// weights are repacked (int8 per channel or bf16) and dropped. The
    /// precision is chosen once, from f32: asking a packed model for
    /// another precision, or for a tier this CPU lacks, is an error.
    pub fn with_precision_on(
        mut self,
        precision: Precision,
        tiers: Tiers,
    ) -> Result<Self, BertError> {
        if precision == self.encoder.precision() {
            return Ok(self);
        }
        if self.encoder.precision() != Precision::F32 {
            return Err(BertError::Inconsistent(format!(
                "the weights are already packed as {}; load the model again for {precision}",
                self.encoder.precision()
            )));
        }
        let tier_ok = match precision {
            Precision::F32 => true,
            Precision::Int8 => tiers.int8.is_supported(),
            Precision::Bf16 => tiers.bf16.is_supported(),
        };
        if !tier_ok {
            return Err(BertError::unsupported(
                "kernel",
                format!("{precision} on {tiers:?} is not supported by this CPU"),
            ));
        }
        self.encoder.pack(precision, tiers);
        Ok(self)
    }

    /// The precision of the linear layers.
    pub fn precision(&self) -> Precision {
        self.encoder.precision()
    }

    /// Heap bytes of the linear layers' weights (f32, or packed).
    pub fn linear_weight_bytes(&self) -> usize {
        self.encoder.linear_bytes()
    }

    /// Heap bytes of the word-embedding table (f32; bf16 once the linear
    /// layers are packed in bf16).
    pub fn word_table_bytes(&self) -> usize {
        self.encoder.word_table_bytes()
    }

    /// The encoder's configuration.
    pub fn config(&self) -> &BertConfig {
        self.encoder.config()
    }

    /// Pooling and normalisation.
    pub fn sentence_config(&self) -> SentenceConfig {
        self.sentence
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &BertTokenizer {
        &self.tokenizer
    }

    /// Vector length.
    pub fn dimensions(&self) -> usize {
        self.encoder.config().hidden_size
    }

    /// Maximum tokens per text, special tokens included.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Tokenizes a text as the model will see it (truncated to
    /// [`Self::max_seq_len`]).
    pub fn encode(&self, text: &str) -> Encoding {
        if self.lowercase_input {
            self.tokenizer
                .encode(&text.to_lowercase(), self.max_seq_len)
        } else {
            self.tokenizer.encode(text, self.max_seq_len)
        }
    }

    /// Embeds one text on the calling thread.
    pub fn embed(&self, text: &str) -> Embedding {
        self.embed_batch(&[text])
            .pop()
            .expect("one text in, one vector out")
    }

    /// Embeds texts on the calling thread, in as few forward passes as
    /// [`MAX_BATCH_TOKENS`] allows. The result is in input order.
    pub fn embed_batch(&self, texts: &[&str]) -> Vec<Embedding> {
        let encodings: Vec<Encoding> = texts.iter().map(|t| self.encode(t)).collect();
        let vectors = self.embed_encodings(&encodings);
        encodings
            .iter()
            .zip(vectors)
            .map(|(e, vector)| Embedding {
                vector,
                tokens: e.ids.len(),
                untruncated_tokens: e.untruncated_len,
            })
            .collect()
    }

    /// Embeds texts on up to `threads` scoped threads (contiguous shares of
    /// about equal token counts). The result is in input order.
    pub fn embed_batch_parallel(&self, texts: &[&str], threads: usize) -> Vec<Embedding> {
        let threads = threads.max(1).min(texts.len());
        if threads <= 1 {
            return self.embed_batch(texts);
        }
        // Split by characters as a cheap proxy for tokens.
        let total: usize = texts.iter().map(|t| t.len() + 8).sum();
        let per = total.div_ceil(threads);
        let mut shares: Vec<&[&str]> = Vec::with_capacity(threads);
        let mut start = 0;
        let mut acc = 0;
        for (i, t) in texts.iter().enumerate() {
            acc += t.len() + 8;
            if acc >= per && shares.len() + 1 < threads {
                shares.push(&texts[start..=i]);
                start = i + 1;
                acc = 0;
            }
        }
        if start < texts.len() {
            shares.push(&texts[start..]);
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| scope.spawn(move || self.embed_batch(share)))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("embedding thread panicked"))
                .collect()
        })
    }

    /// Embeds already tokenized sequences (for instance from
    /// [`Self::encode`]). Sequences longer than [`Self::max_seq_len`] keep
    /// their first `max_seq_len - 1` ids and their last id.
    ///
    /// # Panics
    ///
    /// If an encoding is empty, has as many type ids as ids, or holds an id
    /// outside the model's vocabulary.
    pub fn embed_encodings(&self, encodings: &[Encoding]) -> Vec<Vec<f32>> {
        let config = self.encoder.config();
        let clipped: Vec<(Vec<u32>, Vec<u32>)> = encodings
            .iter()
            .map(|e| {
                assert!(!e.ids.is_empty(), "empty encoding");
                assert_eq!(
                    e.ids.len(),
                    e.type_ids.len(),
                    "ids and type ids differ in length"
                );
                assert!(
                    e.ids.iter().all(|&id| (id as usize) < config.vocab_size),
                    "token id outside the vocabulary"
                );
                assert!(
                    e.type_ids
                        .iter()
                        .all(|&t| (t as usize) < config.type_vocab_size),
                    "type id outside the type vocabulary"
                );
                let n = e.ids.len();
                if n <= self.max_seq_len {
                    (e.ids.clone(), e.type_ids.clone())
                } else {
                    let keep = self.max_seq_len - 1;
                    let mut ids = e.ids[..keep].to_vec();
                    ids.push(e.ids[n - 1]);
                    let mut types = e.type_ids[..keep].to_vec();
                    types.push(e.type_ids[n - 1]);
                    (ids, types)
                }
            })
            .collect();
        let mut out = Vec::with_capacity(encodings.len());
        let mut batch: Vec<(&[u32], &[u32])> = Vec::new();
        let mut tokens = 0;
        for (ids, types) in &clipped {
            if tokens + ids.len() > MAX_BATCH_TOKENS && !batch.is_empty() {
                out.extend(self.encoder.embed(
                    &batch,
                    self.sentence.pooling,
                    self.sentence.normalize,
                ));
                batch.clear();
                tokens = 0;
            }
            batch.push((ids, types));
            tokens += ids.len();
        }
        if !batch.is_empty() {
            out.extend(
                self.encoder
                    .embed(&batch, self.sentence.pooling, self.sentence.normalize),
            );
        }
        out
    }
}

/// Dot product (the cosine similarity of two unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
