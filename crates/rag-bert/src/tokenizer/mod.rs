//! The tokenizer of a Hugging Face `tokenizer.json`: BERT normaliser, BERT
//! pre-tokeniser and WordPiece, with added (special) tokens and the
//! post-processor's `[CLS] … [SEP]` template.
//!
//! Only the components listed here are implemented; a file that names any
//! other component is refused with
//! [`BertError::Unsupported`](crate::BertError::Unsupported) instead of being
//! tokenised differently from the reference library.
//!
//! Character classes follow the Hugging Face `tokenizers` library: control
//! characters are the Unicode "Other" categories (except tab, newline and
//! carriage return, which are whitespace), punctuation is ASCII punctuation
//! plus the Unicode "P" categories, accents are the non-spacing marks left by
//! canonical decomposition, and the "Chinese characters" put between spaces
//! are the CJK Unified Ideograph blocks and their extensions and
//! compatibility blocks.
//!
//! The modules follow the pipeline: `json` reads the file, `added` splits
//! out added tokens, `normalize` and `pre_tokenize` prepare the words,
//! `wordpiece` and `unigram` (with `base64` for its character map) turn them
//! into ids, and [`BertTokenizer::encode`] applies the post-processor's
//! template.

mod added;
mod base64;
mod json;
mod normalize;
mod pre_tokenize;
mod unigram;
mod wordpiece;

use added::{AddedToken, Piece};
use normalize::NormStep;
use pre_tokenize::PreStep;
use unigram::Unigram;
use wordpiece::WordPiece;

/// Token ids of one text, ready for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    /// Token ids including the template's special tokens.
    pub ids: Vec<u32>,
    /// Token type (segment) ids, one per id.
    pub type_ids: Vec<u32>,
    /// How many tokens the text would have had without truncation (special
    /// tokens included). Equal to `ids.len()` when nothing was cut.
    pub untruncated_len: usize,
}

impl Encoding {
    /// Whether content tokens were cut to fit the maximum sequence length.
    pub fn truncated(&self) -> bool {
        self.untruncated_len > self.ids.len()
    }
}

/// One element of the post-processor's single-sequence template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TemplatePiece {
    /// Special token ids with their type id.
    Special(Vec<u32>, u32),
    /// The text's own tokens, with their type id.
    Sequence(u32),
}

/// The tokenizer model.
#[derive(Debug, Clone)]
enum Model {
    WordPiece(WordPiece),
    Unigram(Unigram),
}

/// A tokenizer read from a Hugging Face `tokenizer.json`: WordPiece (BERT)
/// or Unigram (SentencePiece, XLM-RoBERTa).
#[derive(Debug, Clone)]
pub struct BertTokenizer {
    model: Model,
    id_to_token: Vec<Option<String>>,
    normalizer: Vec<NormStep>,
    pre_tokenizer: Vec<PreStep>,
    /// Added tokens, longest content first so the longest match wins.
    added: Vec<AddedToken>,
    template: Vec<TemplatePiece>,
    special_count: usize,
}

impl BertTokenizer {
    /// Number of ids in the vocabulary (the largest id plus one).
    pub fn vocab_size(&self) -> usize {
        self.id_to_token.len()
    }

    /// Number of special tokens the template adds around a text.
    pub fn special_token_count(&self) -> usize {
        self.special_count
    }

    /// The token string of an id, if the vocabulary has it.
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.id_to_token.get(id as usize)?.as_deref()
    }

    /// The id of the unknown token (`[UNK]`, `<unk>`).
    pub fn unk_id(&self) -> u32 {
        match &self.model {
            Model::WordPiece(wp) => wp.unk_id,
            Model::Unigram(u) => u.unk_id(),
        }
    }

    /// The text's content token ids, without special tokens and without
    /// truncation.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut at_start = true;
        for piece in self.split_added(text, false) {
            match piece {
                Piece::Token(id) => ids.push(id),
                Piece::Text(raw) => {
                    let normalized = self.normalize(&raw);
                    for piece in self.split_added(&normalized, true) {
                        match piece {
                            Piece::Token(id) => ids.push(id),
                            Piece::Text(t) => {
                                for word in self.pre_tokenize(&t, at_start) {
                                    match &self.model {
                                        Model::WordPiece(wp) => wp.encode(&word, &mut ids),
                                        Model::Unigram(u) => u.encode(&word, &mut ids),
                                    }
                                }
                            }
                        }
                        at_start = false;
                    }
                }
            }
            at_start = false;
        }
        ids
    }

    /// Encodes one text with the template's special tokens, keeping at most
    /// `max_len` ids in total: content tokens beyond the limit are cut from
    /// the end, and the cut is recorded in [`Encoding::untruncated_len`].
    ///
    /// `max_len` must exceed [`Self::special_token_count`].
    pub fn encode(&self, text: &str, max_len: usize) -> Encoding {
        let content = self.tokenize(text);
        let untruncated_len = content.len() + self.special_count;
        let keep = content
            .len()
            .min(max_len.saturating_sub(self.special_count));
        let mut ids = Vec::with_capacity(keep + self.special_count);
        let mut type_ids = Vec::with_capacity(keep + self.special_count);
        for piece in &self.template {
            match piece {
                TemplatePiece::Special(special, type_id) => {
                    ids.extend_from_slice(special);
                    type_ids.extend(std::iter::repeat_n(*type_id, special.len()));
                }
                TemplatePiece::Sequence(type_id) => {
                    ids.extend_from_slice(&content[..keep]);
                    type_ids.extend(std::iter::repeat_n(*type_id, keep));
                }
            }
        }
        Encoding {
            ids,
            type_ids,
            untruncated_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BertError;
    use serde_json::Value;

    /// A small but complete tokenizer.json in the layout of
    /// bert-base-uncased / all-MiniLM-L6-v2.
    fn tiny(lowercase: bool, strip_accents: &str) -> BertTokenizer {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!", "un", "##aff",
            "##able", "cafe", "café", "中", "国", ",", "Hello", "run", "##ning", "σας", "ς",
        ];
        let vocab: serde_json::Map<String, Value> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| ((*t).to_owned(), Value::from(i)))
            .collect();
        let json = serde_json::json!({
            "version": "1.0",
            "added_tokens": [
                {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 4, "content": "[MASK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
            ],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                           "strip_accents": serde_json::from_str::<Value>(strip_accents).unwrap(), "lowercase": lowercase},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}
        });
        BertTokenizer::from_json(json.to_string().as_bytes()).unwrap()
    }

    fn tokens(t: &BertTokenizer, text: &str) -> Vec<String> {
        t.tokenize(text)
            .into_iter()
            .map(|id| t.id_to_token(id).unwrap().to_owned())
            .collect()
    }

    #[test]
    fn wordpiece_normaliser_and_punctuation() {
        let t = tiny(true, "null");
        assert_eq!(tokens(&t, "Hello, WORLD!"), ["hello", ",", "world", "!"]);
        assert_eq!(tokens(&t, "unaffable"), ["un", "##aff", "##able"]);
        // A word that cannot be covered entirely is one [UNK], not a partial
        // match.
        assert_eq!(tokens(&t, "unaffablex running"), ["[UNK]", "run", "##ning"]);
        // Accents are stripped when lowercasing and strip_accents is null.
        assert_eq!(tokens(&t, "Café"), ["cafe"]);
        // Control characters vanish; tabs and newlines are whitespace.
        assert_eq!(
            tokens(&t, "hello\u{0}\u{200B}\tworld\n"),
            ["hello", "world"]
        );
        // Chinese characters become single-character words, even when glued
        // to Latin text.
        assert_eq!(tokens(&t, "hello中国world"), ["hello", "中", "国", "world"]);
        // Characters outside the vocabulary become [UNK]; Japanese kana is
        // not in the CJK ideograph blocks, so the kana run stays one word.
        assert_eq!(tokens(&t, "中文 ひらがな"), ["中", "[UNK]", "[UNK]"]);
        // Per-character lowercasing: a final capital sigma becomes σ, not ς.
        assert_eq!(tokens(&t, "ΣΑΣ"), ["[UNK]"]);
        assert_eq!(tokens(&t, "Σας"), ["σας"]);
    }

    #[test]
    fn settings_are_honoured() {
        let cased = tiny(false, "null");
        assert_eq!(tokens(&cased, "Hello café"), ["Hello", "café"]);
        let strip_cased = tiny(false, "true");
        assert_eq!(tokens(&strip_cased, "café"), ["cafe"]);
        let keep_accents = tiny(true, "false");
        assert_eq!(tokens(&keep_accents, "CAFÉ"), ["café"]);
    }

    #[test]
    fn special_tokens_and_truncation() {
        let t = tiny(true, "null");
        // Special tokens written in the text are recognised before
        // normalisation, as the reference library does.
        assert_eq!(
            tokens(&t, "hello [MASK]world"),
            ["hello", "[MASK]", "world"]
        );
        // Lowercase is not the special token: it is ordinary text, split at
        // the brackets (which this tiny vocabulary lacks).
        assert_eq!(
            tokens(&t, "hello [mask]"),
            ["hello", "[UNK]", "[UNK]", "[UNK]"]
        );

        let e = t.encode("hello world", 16);
        assert_eq!(e.ids, [2, 5, 6, 3]);
        assert_eq!(e.type_ids, [0, 0, 0, 0]);
        assert!(!e.truncated());

        let e = t.encode("hello world hello world", 4);
        assert_eq!(e.ids, [2, 5, 6, 3]);
        assert_eq!(e.untruncated_len, 6);
        assert!(e.truncated());

        let e = t.encode("", 4);
        assert_eq!(e.ids, [2, 3]);
    }

    #[test]
    fn unsupported_components_are_refused() {
        let byte_fallback = serde_json::json!({
            "normalizer": null, "pre_tokenizer": {"type": "Metaspace"},
            "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]], "byte_fallback": true}
        });
        let err = BertTokenizer::from_json(byte_fallback.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("byte_fallback"), "{err}");

        let bpe = serde_json::json!({"model": {"type": "BPE", "vocab": {}, "merges": []}});
        let err = BertTokenizer::from_json(bpe.to_string().as_bytes()).unwrap_err();
        assert!(matches!(err, BertError::Unsupported { .. }), "{err}");

        let wordpiece =
            serde_json::json!({"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}});
        for (normalizer, pre, word) in [
            (
                serde_json::json!({"type": "StripAccents"}),
                serde_json::json!({"type": "BertPreTokenizer"}),
                "StripAccents",
            ),
            (
                serde_json::json!({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}),
                serde_json::json!({"type": "BertPreTokenizer"}),
                "Regex",
            ),
            (
                serde_json::json!(null),
                serde_json::json!({"type": "ByteLevel"}),
                "ByteLevel",
            ),
            (
                serde_json::json!(null),
                serde_json::json!(null),
                "pre-tokenizer",
            ),
        ] {
            let json = serde_json::json!({"normalizer": normalizer, "pre_tokenizer": pre, "model": wordpiece});
            let err = BertTokenizer::from_json(json.to_string().as_bytes()).unwrap_err();
            assert!(err.to_string().contains(word), "{err}");
        }

        let no_unk = serde_json::json!({
            "normalizer": null, "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"a": 0}}
        });
        assert!(BertTokenizer::from_json(no_unk.to_string().as_bytes()).is_err());
        assert!(BertTokenizer::from_json(b"{not json").is_err());
    }
}
