//! Reading `tokenizer.json`: the model, the normaliser and pre-tokeniser
//! steps, the added tokens and the post-processor's template, each checked
//! against what this crate implements.

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::normalize::{NormStep, Normalizer, Pattern};
use super::pre_tokenize::PreStep;
use super::unigram::{Metaspace, Precompiled, Prepend, Unigram};
use super::{AddedToken, BertTokenizer, Model, TemplatePiece, WordPiece};
use crate::error::BertError;

pub(super) const FILE: &str = "tokenizer.json";

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
