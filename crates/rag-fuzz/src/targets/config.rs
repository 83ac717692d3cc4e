//! The configuration file's TOML.
//!
//! ragscope's `Config` lives in the binary crate, so it cannot be reached
//! from here; what it is made of can: any TOML document (`toml::Table`,
//! which must survive a round trip through `toml::to_string`), and the
//! library types the file holds or that are stored as TOML-like settings:
//! `RetrievalParams` (the `[retrieval]` section, also parsed on its own),
//! `KbSettings` and `RetrievalOverrides`. Whatever parses is validated, and
//! what validates must fuse to finite scores.

use rag_core::{KbSettings, RetrievalOverrides, RetrievalParams};
use serde::Deserialize;

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of TOML and of the configuration's keys.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "[retrieval]\n",
        "[retrieval.fusion]\n",
        "[retrieval.fusion.weights]\n",
        "[retrieval.bm25]\n",
        "[retrieval.bm25.fields]\n",
        "[[a]]\n",
        "[limits]\n",
        "[server]\n",
        "per_path_k = ",
        "paths = [\"bm25\", \"dense\"]\n",
        "k = ",
        "top_k = ",
        "min_score = ",
        "lexical_interpolation = ",
        "bm25 = ",
        "dense = ",
        "mode = \"multi_field\"\n",
        "title = ",
        "k1 = ",
        "fuzzy_threshold = ",
        "rerank = false\n",
        "profile = \"faq\"\n",
        "max_pairs = ",
        " = ",
        "=",
        "\"",
        "'''",
        "\"\"\"",
        "\\u0000",
        "\\U0010FFFF",
        "\\uD800",
        "nan",
        "+inf",
        "-inf",
        "1e308",
        "1.7e308",
        "0x7fffffffffffffff",
        "0o777",
        "0b1",
        "1_000",
        "1979-05-27T07:32:00Z",
        "1979-05-27",
        "07:32:00",
        "9999-12-31T23:59:60.999999999-23:59",
        "true",
        "{ a = 1 }",
        "# comment\n",
        "\n",
        "\r\n",
        ".",
        ",",
    ],
    nest: &[("[", "]"), ("{ a = ", " }"), ("a.", ""), ("[[", "]]\n")],
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

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let text = String::from_utf8_lossy(bytes);
    match toml::from_str::<toml::Table>(&text) {
        Err(e) => {
            sig.add(1u8).message(e.message());
        }
        Ok(table) => {
            sig.add(0u8).magnitude(table.len());
            match toml::to_string(&table) {
                Ok(again) => {
                    let back = toml::from_str::<toml::Table>(&again);
                    ensure!(
                        back.is_ok(),
                        "toml printed a table it cannot read back: {:?}",
                        back.err().map(|e| e.to_string())
                    );
                    let back = back.unwrap_or_default();
                    ensure!(
                        toml::to_string(&back).ok().as_deref() == Some(&*again),
                        "a TOML table changed in a round trip"
                    );
                }
                Err(e) => {
                    sig.add(2u8).message(&e.to_string());
                }
            }
            if let Some(v) = table.get("retrieval") {
                if let Ok(p) = RetrievalParams::deserialize(v.clone()) {
                    params(&p, &mut sig);
                }
            }
        }
    }
    if let Ok(p) = toml::from_str::<RetrievalParams>(&text) {
        params(&p, &mut sig);
    }
    if let Ok(s) = toml::from_str::<KbSettings>(&text) {
        params(&s.retrieval, &mut sig);
        sig.add(s.answer.validate().is_ok())
            .add(s.drafts.validate().is_ok());
    }
    if let Ok(o) = toml::from_str::<RetrievalOverrides>(&text) {
        let (p, _) = o.apply(&RetrievalParams::default());
        params(&p, &mut sig);
    }
    sig.finish()
}
