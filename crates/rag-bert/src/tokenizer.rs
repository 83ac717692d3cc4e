//! The tokenizer of a Hugging Face `tokenizer.json`: BERT normaliser, BERT
//! pre-tokeniser and WordPiece, with added (special) tokens and the
//! post-processor's `[CLS] … [SEP]` template.
//!
//! Only the components listed here are implemented; a file that names any
//! other component is refused with [`BertError::Unsupported`] instead of being
//! tokenised differently from the reference library.
//!
//! Character classes follow the Hugging Face `tokenizers` library: control
//! characters are the Unicode "Other" categories (except tab, newline and
//! carriage return, which are whitespace), punctuation is ASCII punctuation
//! plus the Unicode "P" categories, accents are the non-spacing marks left by
//! canonical decomposition, and the "Chinese characters" put between spaces
//! are the CJK Unified Ideograph blocks and their extensions and
//! compatibility blocks.

use rustc_hash::FxHashMap;
use serde_json::Value;
use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use crate::error::BertError;
use crate::unigram::{Metaspace, Precompiled, Prepend, Unigram};

const FILE: &str = "tokenizer.json";

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

/// The BERT normaliser's settings (`"type": "BertNormalizer"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Normalizer {
    clean_text: bool,
    handle_chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

/// One token of the `added_tokens` list.
#[derive(Debug, Clone)]
struct AddedToken {
    id: u32,
    content: String,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
    /// Matched in the normalised text rather than the raw text.
    normalized: bool,
}

/// One element of the post-processor's single-sequence template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TemplatePiece {
    /// Special token ids with their type id.
    Special(Vec<u32>, u32),
    /// The text's own tokens, with their type id.
    Sequence(u32),
}

/// A piece of text after added tokens were split out.
enum Piece {
    Text(String),
    Token(u32),
}

/// The tokenizer model.
#[derive(Debug, Clone)]
enum Model {
    WordPiece(WordPiece),
    Unigram(Unigram),
}

#[derive(Debug, Clone)]
struct WordPiece {
    vocab: FxHashMap<String, u32>,
    unk_id: u32,
    prefix: String,
    max_input_chars_per_word: usize,
}

/// One normaliser of the (possibly sequential) normaliser.
#[derive(Debug, Clone)]
enum NormStep {
    Bert(Normalizer),
    Precompiled(Precompiled),
    Strip { left: bool, right: bool },
    Replace { pattern: Pattern, content: String },
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Lowercase,
}

/// The patterns of `Replace` normalisers this crate implements.
#[derive(Debug, Clone)]
enum Pattern {
    Literal(String),
    /// The regular expression ` {2,}`: a run of two or more spaces.
    SpaceRun,
}

/// One pre-tokeniser of the (possibly sequential) pre-tokeniser.
#[derive(Debug, Clone)]
enum PreStep {
    Bert,
    WhitespaceSplit,
    Metaspace(Metaspace),
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

fn field<'a>(v: &'a Value, key: &str, ctx: &str) -> Result<&'a Value, BertError> {
    v.get(key)
        .ok_or_else(|| BertError::json(FILE, format!("{ctx}: missing field `{key}`")))
}

fn bool_field(v: &Value, key: &str, default: bool, ctx: &str) -> Result<bool, BertError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(BertError::json(
            FILE,
            format!("{ctx}: `{key}` must be a boolean, found {other}"),
        )),
    }
}

fn u32_of(v: &Value, ctx: &str) -> Result<u32, BertError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| BertError::json(FILE, format!("{ctx}: expected a token id, found {v}")))
}

fn type_name(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("<no type>")
}

impl BertTokenizer {
    /// Parses a `tokenizer.json`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, BertError> {
        let root: Value = serde_json::from_slice(bytes)
            .map_err(|e| BertError::json(FILE, format!("not valid JSON: {e}")))?;

        let model_json = field(&root, "model", "top level")?;
        let mut id_to_token: Vec<Option<String>> = Vec::new();
        let mut name_id = |token: &str, id: u32| {
            let slot = id as usize;
            if slot >= id_to_token.len() {
                id_to_token.resize(slot + 1, None);
            }
            id_to_token[slot].get_or_insert_with(|| token.to_owned());
        };
        let model = match type_name(model_json) {
            "WordPiece" => {
                let wp = parse_word_piece(model_json)?;
                for (token, &id) in &wp.vocab {
                    name_id(token, id);
                }
                Model::WordPiece(wp)
            }
            "Unigram" => {
                let vocab = parse_unigram_vocab(model_json)?;
                for (id, (piece, _)) in vocab.iter().enumerate() {
                    name_id(piece, id as u32);
                }
                if model_json.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
                    return Err(BertError::unsupported(
                        "Unigram option",
                        "byte_fallback = true",
                    ));
                }
                let unk_id =
                    match model_json.get("unk_id") {
                        Some(v) if !v.is_null() => u32_of(v, "model.unk_id")?,
                        _ => return Err(BertError::unsupported(
                            "Unigram model",
                            "without unk_id (text with unknown characters could not be encoded)",
                        )),
                    };
                Model::Unigram(Unigram::new(vocab, unk_id)?)
            }
            other => {
                return Err(BertError::unsupported(
                    "tokenizer model",
                    format!("`{other}`; implemented: WordPiece, Unigram"),
                ))
            }
        };

        let normalizer = match root.get("normalizer") {
            None | Some(Value::Null) => Vec::new(),
            Some(n) if type_name(n) == "Sequence" => field(n, "normalizers", "normalizer")?
                .as_array()
                .ok_or_else(|| BertError::json(FILE, "normalizer.normalizers must be a list"))?
                .iter()
                .map(parse_norm_step)
                .collect::<Result<Vec<_>, _>>()?,
            Some(n) => vec![parse_norm_step(n)?],
        };
        let pre_tokenizer = match root.get("pre_tokenizer") {
            None | Some(Value::Null) => {
                return Err(BertError::unsupported(
                    "pre-tokenizer",
                    "none; implemented: BertPreTokenizer, WhitespaceSplit, Metaspace",
                ))
            }
            Some(p) if type_name(p) == "Sequence" => field(p, "pretokenizers", "pre_tokenizer")?
                .as_array()
                .ok_or_else(|| BertError::json(FILE, "pre_tokenizer.pretokenizers must be a list"))?
                .iter()
                .map(parse_pre_step)
                .collect::<Result<Vec<_>, _>>()?,
            Some(p) => vec![parse_pre_step(p)?],
        };

        let mut added = Vec::new();
        if let Some(list) = root.get("added_tokens").and_then(Value::as_array) {
            for t in list {
                let ctx = "added_tokens";
                let content = field(t, "content", ctx)?
                    .as_str()
                    .ok_or_else(|| BertError::json(FILE, "added token content must be a string"))?
                    .to_owned();
                if content.is_empty() {
                    continue;
                }
                added.push(AddedToken {
                    id: u32_of(field(t, "id", ctx)?, ctx)?,
                    content,
                    single_word: bool_field(t, "single_word", false, ctx)?,
                    lstrip: bool_field(t, "lstrip", false, ctx)?,
                    rstrip: bool_field(t, "rstrip", false, ctx)?,
                    normalized: bool_field(t, "normalized", false, ctx)?,
                });
            }
        }
        added.sort_by_key(|t| std::cmp::Reverse(t.content.len()));

        let template = parse_post_processor(root.get("post_processor"))?;
        let special_count = template
            .iter()
            .map(|p| match p {
                TemplatePiece::Special(ids, _) => ids.len(),
                TemplatePiece::Sequence(_) => 0,
            })
            .sum();
        let mut tokenizer = BertTokenizer {
            model,
            id_to_token,
            normalizer,
            pre_tokenizer,
            added,
            template,
            special_count,
        };
        for t in &tokenizer.added {
            let slot = t.id as usize;
            if slot >= tokenizer.id_to_token.len() {
                tokenizer.id_to_token.resize(slot + 1, None);
            }
            tokenizer.id_to_token[slot].get_or_insert_with(|| t.content.clone());
        }
        Ok(tokenizer)
    }

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

    fn normalize(&self, text: &str) -> String {
        let mut s = text.to_owned();
        for step in &self.normalizer {
            s = match step {
                NormStep::Bert(n) => n.apply(&s),
                NormStep::Precompiled(p) => p.apply(&s),
                NormStep::Strip { left, right } => {
                    let mut t = s.as_str();
                    if *left {
                        t = t.trim_start();
                    }
                    if *right {
                        t = t.trim_end();
                    }
                    t.to_owned()
                }
                NormStep::Replace {
                    pattern: Pattern::Literal(from),
                    content,
                } => s.replace(from.as_str(), content),
                NormStep::Replace {
                    pattern: Pattern::SpaceRun,
                    content,
                } => replace_space_runs(&s, content),
                NormStep::Nfc => s.nfc().collect(),
                NormStep::Nfd => s.nfd().collect(),
                NormStep::Nfkc => s.nfkc().collect(),
                NormStep::Nfkd => s.nfkd().collect(),
                NormStep::Lowercase => s.chars().flat_map(char::to_lowercase).collect(),
            };
        }
        s
    }

    /// Runs the pre-tokenisers in order. `at_start` says whether `text`
    /// begins the input (for Metaspace's `first` scheme).
    fn pre_tokenize(&self, text: &str, at_start: bool) -> Vec<String> {
        // Words with their byte offset in `text`'s normalised form (only
        // whether it is zero matters).
        // Like the reference library, empty pieces are dropped before and
        // after every step (so text that normalises to nothing gives no
        // tokens, not a lone word mark).
        let mut words: Vec<(usize, String)> = vec![(0, text.to_owned())];
        words.retain(|(_, w)| !w.is_empty());
        for step in &self.pre_tokenizer {
            let mut next = Vec::with_capacity(words.len());
            for (offset, word) in &words {
                match step {
                    PreStep::Bert => {
                        for part in bert_pre_tokenize(word) {
                            next.push((offset + sub_offset(word, part), part.to_owned()));
                        }
                    }
                    PreStep::WhitespaceSplit => {
                        for part in word.split(char::is_whitespace).filter(|w| !w.is_empty()) {
                            next.push((offset + sub_offset(word, part), part.to_owned()));
                        }
                    }
                    PreStep::Metaspace(m) => {
                        for (i, part) in m
                            .split(word, at_start && *offset == 0)
                            .into_iter()
                            .enumerate()
                        {
                            next.push((if i == 0 { *offset } else { offset + 1 }, part));
                        }
                    }
                }
            }
            next.retain(|(_, w)| !w.is_empty());
            words = next;
        }
        words.into_iter().map(|(_, w)| w).collect()
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

    /// Splits `text` around occurrences of added tokens (those matched in
    /// normalised text when `normalized`, else those matched in raw text).
    fn split_added(&self, text: &str, normalized: bool) -> Vec<Piece> {
        let tokens: Vec<&AddedToken> = self
            .added
            .iter()
            .filter(|t| t.normalized == normalized)
            .collect();
        if tokens.is_empty() {
            return vec![Piece::Text(text.to_owned())];
        }
        let mut pieces = Vec::new();
        // Start of the text not yet emitted.
        let mut emitted = 0;
        let mut pos = 0;
        while pos < text.len() {
            let rest = &text[pos..];
            let found = tokens.iter().find(|t| {
                rest.starts_with(t.content.as_str())
                    && (!t.single_word || is_word_boundary(text, pos, pos + t.content.len()))
            });
            let Some(token) = found else {
                pos += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let mut start = pos;
            let mut end = pos + token.content.len();
            if token.lstrip {
                let before = text[emitted..start].trim_end();
                start = emitted + before.len();
            }
            if token.rstrip {
                let after = &text[end..];
                end += after.len() - after.trim_start().len();
            }
            if start > emitted {
                pieces.push(Piece::Text(text[emitted..start].to_owned()));
            }
            pieces.push(Piece::Token(token.id));
            emitted = end;
            pos = end;
        }
        if emitted < text.len() {
            pieces.push(Piece::Text(text[emitted..].to_owned()));
        }
        pieces
    }
}

impl WordPiece {
    /// Greedy longest-match-first WordPiece of one pre-tokenised word; a word
    /// that cannot be covered by vocabulary pieces becomes one unknown token.
    fn encode(&self, word: &str, out: &mut Vec<u32>) {
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        let chars = bounds.len() - 1;
        if chars > self.max_input_chars_per_word {
            out.push(self.unk_id);
            return;
        }
        let mark = out.len();
        let mut candidate = String::with_capacity(word.len() + self.prefix.len());
        let mut start = 0;
        while start < chars {
            let mut end = chars;
            let mut matched = None;
            while end > start {
                candidate.clear();
                if start > 0 {
                    candidate.push_str(&self.prefix);
                }
                candidate.push_str(&word[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(candidate.as_str()) {
                    matched = Some(id);
                    break;
                }
                end -= 1;
            }
            match matched {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk_id);
                    return;
                }
            }
        }
    }
}

/// Whether the match `text[start..end]` is not glued to word characters.
fn is_word_boundary(text: &str, start: usize, end: usize) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let before = text[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !is_word(c));
    let after = text[end..].chars().next().is_none_or(|c| !is_word(c));
    before && after
}

fn parse_post_processor(value: Option<&Value>) -> Result<Vec<TemplatePiece>, BertError> {
    let Some(pp) = value.filter(|v| !v.is_null()) else {
        return Ok(vec![TemplatePiece::Sequence(0)]);
    };
    let pair_of = |key: &str| -> Result<u32, BertError> {
        let entry = field(pp, key, "post_processor")?;
        entry
            .get(1)
            .ok_or_else(|| {
                BertError::json(FILE, format!("post_processor.{key} must be [token, id]"))
            })
            .and_then(|id| u32_of(id, "post_processor"))
    };
    match type_name(pp) {
        "BertProcessing" | "RobertaProcessing" => Ok(vec![
            TemplatePiece::Special(vec![pair_of("cls")?], 0),
            TemplatePiece::Sequence(0),
            TemplatePiece::Special(vec![pair_of("sep")?], 0),
        ]),
        "TemplateProcessing" => {
            let specials = field(pp, "special_tokens", "post_processor")?;
            let single = field(pp, "single", "post_processor")?
                .as_array()
                .ok_or_else(|| BertError::json(FILE, "post_processor.single must be a list"))?;
            let mut template = Vec::with_capacity(single.len());
            let mut sequences = 0;
            for item in single {
                let type_id = |inner: &Value| -> Result<u32, BertError> {
                    inner
                        .get("type_id")
                        .map_or(Ok(0), |v| u32_of(v, "post_processor.single"))
                };
                if let Some(special) = item.get("SpecialToken") {
                    let name = field(special, "id", "post_processor.single")?
                        .as_str()
                        .ok_or_else(|| {
                            BertError::json(FILE, "special token id must be a string")
                        })?;
                    let ids = specials
                        .get(name)
                        .and_then(|s| s.get("ids"))
                        .and_then(Value::as_array)
                        .ok_or_else(|| {
                            BertError::json(
                                FILE,
                                format!("post_processor.special_tokens has no ids for `{name}`"),
                            )
                        })?
                        .iter()
                        .map(|v| u32_of(v, "post_processor.special_tokens"))
                        .collect::<Result<Vec<u32>, BertError>>()?;
                    template.push(TemplatePiece::Special(ids, type_id(special)?));
                } else if let Some(seq) = item.get("Sequence") {
                    sequences += 1;
                    template.push(TemplatePiece::Sequence(type_id(seq)?));
                } else {
                    return Err(BertError::json(
                        FILE,
                        format!("post_processor.single: unknown element {item}"),
                    ));
                }
            }
            if sequences != 1 {
                return Err(BertError::Inconsistent(format!(
                    "the post-processor's single template has {sequences} sequences, expected 1"
                )));
            }
            Ok(template)
        }
        other => Err(BertError::unsupported(
            "post-processor",
            format!(
                "`{other}`; implemented: TemplateProcessing, BertProcessing, RobertaProcessing"
            ),
        )),
    }
}

fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

fn is_bert_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

fn is_bert_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

impl Normalizer {
    fn apply(&self, text: &str) -> String {
        let mut s: String = if self.clean_text {
            text.chars()
                .filter(|&c| c != '\0' && c != '\u{FFFD}' && !is_control(c))
                .map(|c| if is_bert_whitespace(c) { ' ' } else { c })
                .collect()
        } else {
            text.to_owned()
        };
        if self.handle_chinese_chars && s.chars().any(is_chinese_char) {
            let mut spaced = String::with_capacity(s.len() + s.len() / 2);
            for c in s.chars() {
                if is_chinese_char(c) {
                    spaced.push(' ');
                    spaced.push(c);
                    spaced.push(' ');
                } else {
                    spaced.push(c);
                }
            }
            s = spaced;
        }
        if self.strip_accents {
            s = s.nfd().filter(|c| !c.is_mark_nonspacing()).collect();
        }
        if self.lowercase {
            // Character by character, like the reference library: no
            // context-dependent rules such as the final sigma.
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        s
    }
}

/// The BERT pre-tokeniser: split on whitespace (dropped), then make every
/// punctuation character a word of its own.
fn bert_pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .flat_map(split_punctuation)
}

fn split_punctuation(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in word.char_indices() {
        if is_bert_punctuation(c) {
            if i > start {
                parts.push(&word[start..i]);
            }
            parts.push(&word[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

/// Byte offset of `part`, a sub-slice of `whole`, within it.
fn sub_offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

fn replace_space_runs(s: &str, content: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = 0;
    for c in s.chars() {
        if c == ' ' {
            run += 1;
            continue;
        }
        match run {
            0 => {}
            1 => out.push(' '),
            _ => out.push_str(content),
        }
        run = 0;
        out.push(c);
    }
    match run {
        0 => {}
        1 => out.push(' '),
        _ => out.push_str(content),
    }
    out
}

fn parse_word_piece(model: &Value) -> Result<WordPiece, BertError> {
    let vocab_json = field(model, "vocab", "model")?
        .as_object()
        .ok_or_else(|| BertError::json(FILE, "model.vocab must be an object"))?;
    let mut vocab = FxHashMap::default();
    vocab.reserve(vocab_json.len());
    for (token, id) in vocab_json {
        vocab.insert(token.clone(), u32_of(id, "model.vocab")?);
    }
    let unk_token = field(model, "unk_token", "model")?
        .as_str()
        .ok_or_else(|| BertError::json(FILE, "model.unk_token must be a string"))?;
    let unk_id = *vocab.get(unk_token).ok_or_else(|| {
        BertError::Inconsistent(format!(
            "the unknown token `{unk_token}` is not in the WordPiece vocabulary"
        ))
    })?;
    let prefix = match model.get("continuing_subword_prefix") {
        None | Some(Value::Null) => "##".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(BertError::json(
                FILE,
                format!("model.continuing_subword_prefix must be a string, found {other}"),
            ))
        }
    };
    let max_input_chars_per_word = match model.get("max_input_chars_per_word") {
        None | Some(Value::Null) => 100,
        Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| {
            BertError::json(FILE, "model.max_input_chars_per_word must be a number")
        })?,
    };
    Ok(WordPiece {
        vocab,
        unk_id,
        prefix,
        max_input_chars_per_word,
    })
}

fn parse_unigram_vocab(model: &Value) -> Result<Vec<(String, f64)>, BertError> {
    field(model, "vocab", "model")?
        .as_array()
        .ok_or_else(|| BertError::json(FILE, "model.vocab of a Unigram model must be a list"))?
        .iter()
        .map(|entry| {
            let piece = entry.get(0).and_then(Value::as_str);
            let score = entry.get(1).and_then(Value::as_f64);
            match (piece, score) {
                (Some(p), Some(s)) => Ok((p.to_owned(), s)),
                _ => Err(BertError::json(
                    FILE,
                    format!("model.vocab: expected [piece, score], found {entry}"),
                )),
            }
        })
        .collect()
}

fn parse_norm_step(n: &Value) -> Result<NormStep, BertError> {
    let ctx = "normalizer";
    Ok(match type_name(n) {
        "BertNormalizer" => {
            let lowercase = bool_field(n, "lowercase", true, ctx)?;
            NormStep::Bert(Normalizer {
                clean_text: bool_field(n, "clean_text", true, ctx)?,
                handle_chinese_chars: bool_field(n, "handle_chinese_chars", true, ctx)?,
                // `null` means: strip accents exactly when lowercasing.
                strip_accents: bool_field(n, "strip_accents", lowercase, ctx)?,
                lowercase,
            })
        }
        "Precompiled" => match field(n, "precompiled_charsmap", ctx)? {
            // No map: the normaliser changes nothing.
            Value::Null => NormStep::Precompiled(Precompiled::from_base64("")?),
            Value::String(text) => NormStep::Precompiled(Precompiled::from_base64(text)?),
            _ => return Err(BertError::json(FILE, "precompiled_charsmap must be a string")),
        },
        "Strip" => NormStep::Strip {
            left: bool_field(n, "strip_left", false, ctx)?,
            right: bool_field(n, "strip_right", false, ctx)?,
        },
        "Replace" => {
            let content = field(n, "content", ctx)?
                .as_str()
                .ok_or_else(|| BertError::json(FILE, "Replace content must be a string"))?
                .to_owned();
            let pattern = field(n, "pattern", ctx)?;
            let pattern = if let Some(literal) = pattern.get("String").and_then(Value::as_str) {
                if literal.is_empty() {
                    return Err(BertError::json(FILE, "Replace pattern is empty"));
                }
                Pattern::Literal(literal.to_owned())
            } else if pattern.get("Regex").and_then(Value::as_str) == Some(" {2,}") {
                Pattern::SpaceRun
            } else {
                return Err(BertError::unsupported(
                    "Replace normalizer pattern",
                    format!("{pattern}; implemented: literal strings and the regex ` {{2,}}`"),
                ));
            };
            NormStep::Replace { pattern, content }
        }
        "NFC" => NormStep::Nfc,
        "NFD" => NormStep::Nfd,
        "NFKC" => NormStep::Nfkc,
        "NFKD" => NormStep::Nfkd,
        "Lowercase" => NormStep::Lowercase,
        other => {
            return Err(BertError::unsupported(
                "normalizer",
                format!(
                    "`{other}`; implemented: BertNormalizer, Precompiled, Strip, Replace, NFC, NFD, NFKC, NFKD, \
                     Lowercase and sequences of them"
                ),
            ))
        }
    })
}

fn parse_pre_step(p: &Value) -> Result<PreStep, BertError> {
    Ok(match type_name(p) {
        "BertPreTokenizer" => PreStep::Bert,
        "WhitespaceSplit" => PreStep::WhitespaceSplit,
        "Metaspace" => {
            let replacement = match p.get("replacement").and_then(Value::as_str) {
                None => '\u{2581}',
                Some(r) => {
                    let mut chars = r.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => c,
                        _ => return Err(BertError::json(FILE, "Metaspace replacement must be one character")),
                    }
                }
            };
            let prepend = match p.get("prepend_scheme").and_then(Value::as_str) {
                Some("always") => Prepend::Always,
                Some("first") => Prepend::First,
                Some("never") => Prepend::Never,
                Some(other) => {
                    return Err(BertError::unsupported("Metaspace prepend_scheme", format!("`{other}`")))
                }
                // Files written before `prepend_scheme` existed.
                None => {
                    if bool_field(p, "add_prefix_space", true, "pre_tokenizer")? {
                        Prepend::Always
                    } else {
                        Prepend::Never
                    }
                }
            };
            PreStep::Metaspace(Metaspace {
                replacement,
                prepend,
                split: bool_field(p, "split", true, "pre_tokenizer")?,
            })
        }
        other => {
            return Err(BertError::unsupported(
                "pre-tokenizer",
                format!("`{other}`; implemented: BertPreTokenizer, WhitespaceSplit, Metaspace and sequences of them"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
