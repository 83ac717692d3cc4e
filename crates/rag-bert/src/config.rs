//! `config.json` and the sentence-transformers files around it
//! (`modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`,
//! `tokenizer_config.json`).

use serde::Deserialize;
use serde_json::Value;

use crate::error::BertError;

/// The activation of the feed-forward layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact, erf-based GELU.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
}

/// The architecture hyper-parameters of a BERT-family encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    /// `model_type` (`bert`, `roberta`, `xlm-roberta`, …).
    pub model_type: String,
    /// Vocabulary size (rows of the word-embedding table).
    pub vocab_size: usize,
    /// Width of the hidden states and of the output vectors.
    pub hidden_size: usize,
    /// Number of encoder layers.
    pub num_hidden_layers: usize,
    /// Number of attention heads.
    pub num_attention_heads: usize,
    /// Width of the feed-forward layers.
    pub intermediate_size: usize,
    /// Rows of the position-embedding table.
    pub max_position_embeddings: usize,
    /// Rows of the token-type embedding table.
    pub type_vocab_size: usize,
    /// Epsilon of every layer norm.
    pub layer_norm_eps: f32,
    /// Feed-forward activation.
    pub hidden_act: Activation,
    /// The first position id: 0 for BERT, `pad_token_id + 1` for the RoBERTa
    /// family, whose position ids skip the padding index.
    pub position_offset: usize,
}

#[derive(Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
    pad_token_id: Option<usize>,
    position_embedding_type: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".to_owned()
}

impl BertConfig {
    /// Parses a Hugging Face `config.json`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, BertError> {
        let raw: RawConfig = serde_json::from_slice(bytes)
            .map_err(|e| BertError::json("config.json", e.to_string()))?;
        let model_type = raw.model_type.unwrap_or_else(|| "bert".to_owned());
        let position_offset = match model_type.as_str() {
            "bert" => 0,
            "roberta" | "xlm-roberta" | "camembert" => raw.pad_token_id.unwrap_or(1) + 1,
            other => {
                return Err(BertError::unsupported(
                    "model_type",
                    format!("`{other}`; implemented: bert, roberta, xlm-roberta, camembert"),
                ))
            }
        };
        if let Some(kind) = raw.position_embedding_type.as_deref() {
            if kind != "absolute" {
                return Err(BertError::unsupported(
                    "position_embedding_type",
                    format!("`{kind}`; only absolute position embeddings are implemented"),
                ));
            }
        }
        let hidden_act = match raw.hidden_act.as_str() {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(BertError::unsupported(
                    "hidden_act",
                    format!(
                    "`{other}`; implemented: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu"
                ),
                ))
            }
        };
        let config = BertConfig {
            model_type,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_hidden_layers: raw.num_hidden_layers,
            num_attention_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            max_position_embeddings: raw.max_position_embeddings,
            type_vocab_size: raw.type_vocab_size,
            layer_norm_eps: raw.layer_norm_eps as f32,
            hidden_act,
            position_offset,
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), BertError> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(BertError::json(
                    "config.json",
                    format!("{name} must be positive"),
                ));
            }
        }
        // `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
        #[allow(clippy::manual_is_multiple_of)]
        let uneven = self.hidden_size % self.num_attention_heads != 0;
        if uneven {
            return Err(BertError::Inconsistent(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            )));
        }
        if self.max_position_embeddings <= self.position_offset {
            return Err(BertError::Inconsistent(format!(
                "max_position_embeddings {} leaves no positions after the offset {}",
                self.max_position_embeddings, self.position_offset
            )));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps >= 0.0) {
            return Err(BertError::json(
                "config.json",
                "layer_norm_eps must be a non-negative number",
            ));
        }
        Ok(())
    }

    /// The longest sequence (special tokens included) the position table can
    /// encode.
    pub fn max_positions(&self) -> usize {
        self.max_position_embeddings - self.position_offset
    }
}

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean of all token vectors (special tokens included).
    Mean,
    /// The first token's (`[CLS]`) vector.
    Cls,
    /// Element-wise maximum over the tokens.
    Max,
}

/// The sentence-transformers pipeline after the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentenceConfig {
    /// Pooling mode.
    pub pooling: Pooling,
    /// Whether the pooled vector is L2-normalised.
    pub normalize: bool,
}

impl Default for SentenceConfig {
    /// Mean pooling and L2 normalisation: what a directory without
    /// sentence-transformers files gets.
    fn default() -> Self {
        SentenceConfig {
            pooling: Pooling::Mean,
            normalize: true,
        }
    }
}

/// The class of a sentence-transformers module: the last component of its
/// dotted type (`sentence_transformers.models.Pooling` before version 6,
/// `sentence_transformers.sentence_transformer.modules.pooling.Pooling`
/// after), if the type is a sentence-transformers one.
fn module_class(kind: &str) -> Option<&str> {
    if !kind.starts_with("sentence_transformers.") {
        return None;
    }
    kind.rsplit('.').next()
}

impl SentenceConfig {
    /// Reads the sentence-transformers pipeline from `modules.json` and the
    /// pooling module's `config.json`. With no `modules.json` the default
    /// (mean pooling, normalised) applies. A module other than Transformer,
    /// Pooling and Normalize (a Dense projection, for instance) is refused:
    /// skipping it would give vectors unlike the model's.
    ///
    /// `pooling_config` reads the pooling module's config, given the module's
    /// path from `modules.json`.
    pub fn from_modules(
        modules_json: Option<&[u8]>,
        mut pooling_config: impl FnMut(&str) -> Result<Option<Vec<u8>>, BertError>,
    ) -> Result<Self, BertError> {
        let Some(bytes) = modules_json else {
            return Ok(SentenceConfig::default());
        };
        let modules: Value = serde_json::from_slice(bytes)
            .map_err(|e| BertError::json("modules.json", e.to_string()))?;
        let modules = modules
            .as_array()
            .ok_or_else(|| BertError::json("modules.json", "expected a list of modules"))?;
        let mut pooling = None;
        let mut normalize = false;
        for (index, module) in modules.iter().enumerate() {
            let kind = module.get("type").and_then(Value::as_str).unwrap_or("");
            let path = module.get("path").and_then(Value::as_str).unwrap_or("");
            match module_class(kind) {
                Some("Transformer") if index == 0 => {}
                Some("Pooling") if pooling.is_none() && !normalize => {
                    let bytes = pooling_config(path)?.ok_or_else(|| {
                        BertError::Inconsistent(format!(
                            "modules.json names a pooling module at `{path}` but {path}/config.json is missing"
                        ))
                    })?;
                    pooling = Some(parse_pooling(&bytes)?);
                }
                Some("Normalize") if pooling.is_some() && !normalize => normalize = true,
                _ => {
                    return Err(BertError::unsupported(
                        "sentence-transformers module",
                        format!(
                            "`{kind}` at position {index} of modules.json; implemented: \
                             Transformer, then Pooling, then optionally Normalize"
                        ),
                    ))
                }
            }
        }
        let pooling = pooling.ok_or_else(|| {
            BertError::unsupported(
                "sentence-transformers pipeline",
                "modules.json has no Pooling module",
            )
        })?;
        Ok(SentenceConfig { pooling, normalize })
    }
}

fn parse_pooling(bytes: &[u8]) -> Result<Pooling, BertError> {
    const FILE: &str = "pooling config.json";
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| BertError::json(FILE, e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| BertError::json(FILE, "expected an object"))?;
    let mut modes = Vec::new();
    for (key, value) in obj {
        if key.starts_with("pooling_mode") && value.as_bool() == Some(true) {
            modes.push(key.as_str());
        }
    }
    // Newer files may also name the mode as a string.
    if let Some(mode) = obj.get("pooling_mode").and_then(Value::as_str) {
        modes.push(match mode {
            "mean" => "pooling_mode_mean_tokens",
            "cls" => "pooling_mode_cls_token",
            "max" => "pooling_mode_max_tokens",
            other => other,
        });
        modes.dedup();
    }
    match modes.as_slice() {
        ["pooling_mode_mean_tokens"] => Ok(Pooling::Mean),
        ["pooling_mode_cls_token"] => Ok(Pooling::Cls),
        ["pooling_mode_max_tokens"] => Ok(Pooling::Max),
        [] => Err(BertError::json(FILE, "no pooling mode is enabled")),
        other => Err(BertError::unsupported(
            "pooling",
            format!("{other:?}; implemented: exactly one of mean, cls, max"),
        )),
    }
}

/// The maximum sequence length the model runs, special tokens included:
/// `max_seq_length` from `sentence_bert_config.json` when present, else the
/// tokenizer's `model_max_length` from `tokenizer_config.json`, in both cases
/// capped by what the position table can encode.
pub fn max_seq_len(
    config: &BertConfig,
    sentence_bert_config: Option<&[u8]>,
    tokenizer_config: Option<&[u8]>,
) -> Result<usize, BertError> {
    let limit = config.max_positions();
    if let Some(bytes) = sentence_bert_config {
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| BertError::json("sentence_bert_config.json", e.to_string()))?;
        if let Some(n) = v.get("max_seq_length").and_then(Value::as_u64) {
            return Ok((n as usize).min(limit));
        }
    }
    if let Some(bytes) = tokenizer_config {
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| BertError::json("tokenizer_config.json", e.to_string()))?;
        // Files without a real limit store a huge sentinel (1e30) as a float.
        if let Some(n) = v.get("model_max_length").and_then(Value::as_f64) {
            if n >= 1.0 && n < limit as f64 {
                return Ok(n as usize);
            }
        }
    }
    Ok(limit)
}

/// Whether sentence-transformers lowercases texts before tokenizing them
/// (`do_lower_case` in `sentence_bert_config.json`, which older versions of
/// the library honour).
pub fn lowercase_input(sentence_bert_config: Option<&[u8]>) -> Result<bool, BertError> {
    let Some(bytes) = sentence_bert_config else {
        return Ok(false);
    };
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| BertError::json("sentence_bert_config.json", e.to_string()))?;
    Ok(v.get("do_lower_case")
        .and_then(Value::as_bool)
        .unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM: &str = r#"{
      "architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1,
      "hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536,
      "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
      "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
      "position_embedding_type": "absolute", "type_vocab_size": 2, "vocab_size": 30522
    }"#;

    #[test]
    fn parses_a_bert_config() {
        let c = BertConfig::from_json(MINILM.as_bytes()).unwrap();
        assert_eq!(c.hidden_size, 384);
        assert_eq!(c.num_hidden_layers, 6);
        assert_eq!(c.hidden_act, Activation::Gelu);
        assert_eq!(c.max_positions(), 512);
        assert_eq!(
            max_seq_len(&c, Some(br#"{"max_seq_length": 256}"#), None).unwrap(),
            256
        );
        assert_eq!(
            max_seq_len(&c, None, Some(br#"{"model_max_length": 1e30}"#)).unwrap(),
            512
        );
        assert_eq!(
            max_seq_len(&c, None, Some(br#"{"model_max_length": 128}"#)).unwrap(),
            128
        );
        assert_eq!(
            max_seq_len(&c, Some(br#"{"max_seq_length": 4096}"#), None).unwrap(),
            512
        );
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let swish = MINILM.replace("\"gelu\"", "\"swish\"");
        assert!(BertConfig::from_json(swish.as_bytes()).is_err());
        let relative = MINILM.replace("\"absolute\"", "\"relative_key\"");
        assert!(BertConfig::from_json(relative.as_bytes()).is_err());
        let distil = MINILM.replace("\"bert\"", "\"distilbert\"");
        assert!(BertConfig::from_json(distil.as_bytes()).is_err());
        let heads = MINILM.replace("\"num_attention_heads\": 12", "\"num_attention_heads\": 7");
        assert!(BertConfig::from_json(heads.as_bytes()).is_err());
        let roberta = MINILM
            .replace("\"bert\"", "\"xlm-roberta\"")
            .replace("\"pad_token_id\": 0", "\"pad_token_id\": 1");
        let c = BertConfig::from_json(roberta.as_bytes()).unwrap();
        assert_eq!(c.position_offset, 2);
        assert_eq!(c.max_positions(), 510);
    }

    #[test]
    fn reads_the_sentence_transformers_pipeline() {
        let modules = br#"[
          {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
          {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
          {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ]"#;
        let mean = br#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false,
            "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
            "pooling_mode_mean_sqrt_len_tokens": false}"#;
        let cls = br#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#;
        let both = br#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#;

        let got = SentenceConfig::from_modules(Some(modules), |path| {
            assert_eq!(path, "1_Pooling");
            Ok(Some(mean.to_vec()))
        })
        .unwrap();
        assert_eq!(
            got,
            SentenceConfig {
                pooling: Pooling::Mean,
                normalize: true
            }
        );

        let unnormalised = br#"[
          {"path": "", "type": "sentence_transformers.models.Transformer"},
          {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
        ]"#;
        let got =
            SentenceConfig::from_modules(Some(unnormalised), |_| Ok(Some(cls.to_vec()))).unwrap();
        assert_eq!(
            got,
            SentenceConfig {
                pooling: Pooling::Cls,
                normalize: false
            }
        );

        assert!(SentenceConfig::from_modules(Some(modules), |_| Ok(Some(both.to_vec()))).is_err());
        assert!(SentenceConfig::from_modules(Some(modules), |_| Ok(None)).is_err());

        let version6 = br#"[
          {"path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
          {"path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
          {"path": "2_Normalize", "type": "sentence_transformers.base.modules.normalize.Normalize"}
        ]"#;
        let cls6 = br#"{"embedding_dimension": 16, "pooling_mode": "cls", "include_prompt": true}"#;
        let got =
            SentenceConfig::from_modules(Some(version6), |_| Ok(Some(cls6.to_vec()))).unwrap();
        assert_eq!(
            got,
            SentenceConfig {
                pooling: Pooling::Cls,
                normalize: true
            }
        );
        let foreign = br#"[{"path": "", "type": "my_package.Transformer"}]"#;
        assert!(SentenceConfig::from_modules(Some(foreign), |_| Ok(None)).is_err());

        let dense = br#"[
          {"path": "", "type": "sentence_transformers.models.Transformer"},
          {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
          {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}
        ]"#;
        let err =
            SentenceConfig::from_modules(Some(dense), |_| Ok(Some(mean.to_vec()))).unwrap_err();
        assert!(err.to_string().contains("Dense"), "{err}");

        assert_eq!(
            SentenceConfig::from_modules(None, |_| unreachable!()).unwrap(),
            SentenceConfig::default()
        );
    }
}
