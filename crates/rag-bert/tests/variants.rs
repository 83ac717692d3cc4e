//! The same model stored differently (f16 and bf16 weights, a `bert.`
//! prefix, no sentence-transformers files) and broken model directories.
//! Needs the model directory from `scripts/models/fetch-minilm.sh`.

mod common;

use std::collections::HashMap;

use common::{compare, fixture, model_file};
use rag_bert::{BertError, BertModel, ModelFiles, Pooling};
use safetensors::{Dtype, SafeTensors};

/// Re-encodes the model's weights: every f32 tensor converted by `convert`
/// (to `dtype`, two bytes per value), names prefixed with `prefix`, and
/// tensors for which `drop` says so left out, and shapes replaced where
/// `reshape` gives one with the same element count.
fn rewrite(
    dtype: Dtype,
    convert: fn(f32) -> [u8; 2],
    prefix: &str,
    drop: impl Fn(&str) -> bool,
    reshape: impl Fn(&str) -> Option<Vec<usize>>,
) -> Vec<u8> {
    let original = model_file("model.safetensors");
    let file = SafeTensors::deserialize(&original).unwrap();
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in file.tensors() {
        if drop(&name) {
            continue;
        }
        let (dt, data) = if view.dtype() == Dtype::F32 {
            let data: Vec<u8> = view
                .data()
                .chunks_exact(4)
                .flat_map(|b| convert(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect();
            (dtype, data)
        } else {
            (view.dtype(), view.data().to_vec())
        };
        let shape = reshape(&name).unwrap_or_else(|| view.shape().to_vec());
        owned.push((format!("{prefix}{name}"), dt, shape, data));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, dt, shape, data)| {
            // `reshape` keeps the element count, so the bytes still fit.
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*dt, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None::<HashMap<String, String>>).unwrap()
}

fn to_f16(x: f32) -> [u8; 2] {
    // Round to nearest even through the bit pattern; the model's weights
    // are all normal, finite values well inside the f16 range or tiny.
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = bits & 0x7f_ffff;
    let h = if exp <= 0 {
        // Subnormal or zero in f16.
        if exp < -10 {
            sign
        } else {
            let m = mant | 0x80_0000;
            let shift = (14 - exp) as u32;
            let mut v = m >> shift;
            let rem = m & ((1 << shift) - 1);
            let half = 1 << (shift - 1);
            if rem > half || (rem == half && v & 1 == 1) {
                v += 1;
            }
            sign | v as u16
        }
    } else {
        assert!(exp < 31, "value {x} overflows f16");
        let mut v = ((exp as u32) << 10) | (mant >> 13);
        let rem = mant & 0x1fff;
        if rem > 0x1000 || (rem == 0x1000 && v & 1 == 1) {
            v += 1;
        }
        sign | v as u16
    };
    h.to_le_bytes()
}

fn to_bf16(x: f32) -> [u8; 2] {
    let bits = x.to_bits();
    let rounded = bits + 0x7fff + ((bits >> 16) & 1);
    ((rounded >> 16) as u16).to_le_bytes()
}

fn files<'a>(config: &'a [u8], weights: &'a [u8], tokenizer: &'a [u8]) -> ModelFiles<'a> {
    ModelFiles {
        config,
        weights,
        tokenizer,
        ..ModelFiles::default()
    }
}

fn texts() -> Vec<&'static str> {
    fixture()
        .embeddings
        .iter()
        .map(|r| r.text.as_str())
        .collect()
}

#[test]
fn half_precision_weights_with_a_bert_prefix() {
    let config = model_file("config.json");
    let tokenizer = model_file("tokenizer.json");
    let sbert = model_file("sentence_bert_config.json");
    for (dtype, convert, floor) in [
        (Dtype::F16, to_f16 as fn(f32) -> [u8; 2], 0.999),
        (Dtype::BF16, to_bf16, 0.99),
    ] {
        let weights = rewrite(dtype, convert, "bert.", |_| false, |_| None);
        let model = BertModel::from_files(ModelFiles {
            sentence_bert_config: Some(&sbert),
            ..files(&config, &weights, &tokenizer)
        })
        .unwrap();
        let vectors: Vec<Vec<f32>> = model
            .embed_batch(&texts())
            .into_iter()
            .map(|e| e.vector)
            .collect();
        let (min, mean, _) = compare(&vectors);
        eprintln!("{dtype:?} weights: min cosine {min:.6}, mean {mean:.6}");
        assert!(min >= floor, "{dtype:?}: min cosine {min}");
    }
}

#[test]
fn defaults_without_sentence_transformers_files() {
    let config = model_file("config.json");
    let tokenizer = model_file("tokenizer.json");
    let weights = model_file("model.safetensors");
    let model = BertModel::from_files(files(&config, &weights, &tokenizer)).unwrap();
    // Mean pooling and normalisation, as the model's own files say, and the
    // position table's length as the limit.
    assert_eq!(model.sentence_config().pooling, Pooling::Mean);
    assert!(model.sentence_config().normalize);
    assert_eq!(model.max_seq_len(), 512);
    let short: Vec<&str> = texts().into_iter().filter(|t| t.len() < 400).collect();
    let got = model.embed_batch(&short);
    for (e, text) in got.iter().zip(&short) {
        let r = fixture()
            .embeddings
            .iter()
            .find(|r| r.text == *text)
            .unwrap();
        assert!(common::cosine(&e.vector, &r.vector) > 0.9999, "{text:?}");
    }

    // A shorter limit truncates, and says so.
    let model = model.with_max_seq_len(8).unwrap();
    let e = model.embed("one two three four five six seven eight nine ten");
    assert_eq!(e.tokens, 8);
    assert_eq!(e.untruncated_tokens, 12);
    assert!(e.truncated());
    assert!(model.with_max_seq_len(513).is_err());

    // CLS pooling without normalisation, as another model could declare.
    let modules = br#"[{"path": "", "type": "sentence_transformers.models.Transformer"},
                      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]"#;
    let pooling = br#"{"pooling_mode_cls_token": true}"#;
    let cls = BertModel::from_files(ModelFiles {
        modules: Some(modules),
        pooling: Some(pooling),
        ..files(&config, &weights, &tokenizer)
    })
    .unwrap();
    assert_eq!(cls.sentence_config().pooling, Pooling::Cls);
    let v = cls.embed("hello world").vector;
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(
        (norm - 1.0).abs() > 0.01,
        "CLS vector unexpectedly normalised ({norm})"
    );
}

#[test]
fn broken_models_are_refused_with_clear_errors() {
    let config = model_file("config.json");
    let tokenizer = model_file("tokenizer.json");

    let no_layer = rewrite(
        Dtype::F16,
        to_f16,
        "",
        |n| n.starts_with("encoder.layer.5.output.dense"),
        |_| None,
    );
    let err = BertModel::from_files(files(&config, &no_layer, &tokenizer)).unwrap_err();
    assert!(
        err.to_string()
            .contains("encoder.layer.5.output.dense.weight"),
        "{err}"
    );

    let wrong = rewrite(
        Dtype::F16,
        to_f16,
        "",
        |_| false,
        |n| (n == "encoder.layer.0.intermediate.dense.weight").then(|| vec![384, 1536]),
    );
    let err = BertModel::from_files(files(&config, &wrong, &tokenizer)).unwrap_err();
    assert!(err.to_string().contains("shape"), "{err}");

    let seven = String::from_utf8(config.clone())
        .unwrap()
        .replace("\"num_hidden_layers\": 6", "\"num_hidden_layers\": 7");
    let weights = model_file("model.safetensors");
    let err = BertModel::from_files(files(seven.as_bytes(), &weights, &tokenizer)).unwrap_err();
    assert!(err.to_string().contains("encoder.layer.6"), "{err}");
    let five = String::from_utf8(config.clone())
        .unwrap()
        .replace("\"num_hidden_layers\": 6", "\"num_hidden_layers\": 5");
    let err = BertModel::from_files(files(five.as_bytes(), &weights, &tokenizer)).unwrap_err();
    assert!(matches!(err, BertError::Inconsistent(_)), "{err}");

    let err = BertModel::from_files(files(&config, b"not safetensors", &tokenizer)).unwrap_err();
    assert!(matches!(err, BertError::Weights(_)), "{err}");

    // A directory without its weights names the file and the fix.
    let dir = std::env::temp_dir().join(format!("rag-bert-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), &config).unwrap();
    std::fs::write(dir.join("tokenizer.json"), &tokenizer).unwrap();
    let err = BertModel::load(&dir).unwrap_err();
    assert!(
        matches!(err, BertError::MissingFile { .. })
            && err.to_string().contains("model.safetensors"),
        "{err}"
    );
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let err = BertModel::load(&dir).unwrap_err();
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
