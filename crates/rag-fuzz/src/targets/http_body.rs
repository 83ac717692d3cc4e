//! JSON bodies of the HTTP API, as the handlers read them with serde_json:
//! `QueryRequest` (and its overrides merged over the knowledge base's
//! parameters), `RetrievalParams`, `RetrievalOverrides`, `Filters`,
//! `KbSettings` (`PUT /kbs/{kb}/settings`), synonym groups and user words
//! (the lexicon routes). Whatever parses is validated; what validates must
//! fuse to finite scores; any JSON value survives a round trip.

use rag_core::{
    Filters, KbSettings, QueryRequest, RetrievalOverrides, RetrievalParams, SynonymGroup, UserWord,
};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of JSON and of the bodies' keys.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "{\"kb\":\"k\",\"query\":\"q\"}",
        "\"kb\":",
        "\"query\":",
        "\"params\":",
        "\"overrides\":",
        "\"filters\":",
        "\"generate\":true",
        "\"conversation_id\":",
        "\"paths\":[\"bm25\",\"substring\",\"fuzzy\",\"synonym\",\"fact\",\"dense\"]",
        "\"per_path_k\":",
        "\"top_k\":",
        "\"rerank_top_k\":",
        "\"k\":",
        "\"weights\":{\"bm25\":1,\"dense\":0}",
        "\"lexical_interpolation\":",
        "\"auto_interpolation\":false",
        "\"min_score\":",
        "\"fusion\":{}",
        "\"bm25\":{\"k1\":1.2,\"b\":0.75}",
        "\"fields\":{\"mode\":\"multi_field\",\"title\":2,\"body\":1,\"tags\":0}",
        "\"ngram_weight\":",
        "\"fuzzy_threshold\":",
        "\"tags\":[\"a\"]",
        "\"created_after\":",
        "\"as_of\":",
        "\"retrieval\":{}",
        "\"answer\":{\"profile\":\"document\"}",
        "\"min_fused\":",
        "\"drafts\":{\"max_pairs\":30}",
        "\"terms\":[\"a\",\"b\"]",
        "\"word\":\"电机\",\"freq\":",
        "1.7e308",
        "1e308",
        "-1e308",
        "5e-324",
        "1e400",
        "-0",
        "0",
        "1000",
        "1000.0000001",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "null",
        "true",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\"\\ud83d\\ude00\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
    ],
    nest: &[("[", "]"), ("{\"a\":", "}"), ("{\"overrides\":", "}")],
    text: true,
};

fn params(p: &RetrievalParams, sig: &mut Sig) {
    match p.validate() {
        Ok(()) => {
            check::validated_params(p);
            sig.add("valid");
        }
        Err(e) => {
            sig.add(e.to_string().split(':').next().unwrap_or("").to_owned());
        }
    }
}

/// Equal, up to the last bits of floats: serde_json (without its
/// `float_roundtrip` feature) parses decimal floats with a fast algorithm
/// that may be one unit in the last place off, so a printed float can come
/// back a hair different.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x != y => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => {
            sig.add(0u8);
            let again = serde_json::to_vec(&v);
            ensure!(again.is_ok(), "a JSON value cannot be printed");
            let again = again.unwrap_or_default();
            let back = serde_json::from_slice::<serde_json::Value>(&again);
            ensure!(
                back.as_ref().is_ok_and(|b| same_json(b, &v)),
                "a JSON value changed in a round trip: {:?}",
                back.err().map(|e| e.to_string())
            );
        }
        Err(e) => {
            sig.add(e.classify() as u8);
        }
    }
    if let Ok(q) = serde_json::from_slice::<QueryRequest>(bytes) {
        let base = q.params.clone().unwrap_or_default();
        let (p, _) = q.overrides.apply(&base);
        params(&p, &mut sig);
        sig.add(q.generate).add(q.conversation_id.is_some());
    }
    if let Ok(p) = serde_json::from_slice::<RetrievalParams>(bytes) {
        params(&p, &mut sig);
    }
    if let Ok(o) = serde_json::from_slice::<RetrievalOverrides>(bytes) {
        let (p, _) = o.apply(&RetrievalParams::default());
        params(&p, &mut sig);
    }
    if let Ok(f) = serde_json::from_slice::<Filters>(bytes) {
        sig.add(f.tags.len().min(3)).add(f.as_of.is_some());
    }
    if let Ok(s) = serde_json::from_slice::<KbSettings>(bytes) {
        params(&s.retrieval, &mut sig);
        sig.add(s.answer.validate().is_ok())
            .add(s.drafts.validate().is_ok());
    }
    if let Ok(g) = serde_json::from_slice::<Vec<SynonymGroup>>(bytes) {
        sig.magnitude(g.len());
    }
    if let Ok(w) = serde_json::from_slice::<Vec<UserWord>>(bytes) {
        sig.magnitude(w.len());
    }
    sig.finish()
}
