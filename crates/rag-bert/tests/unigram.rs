//! The Unigram (SentencePiece) tokenizer of XLM-RoBERTa style
//! `tokenizer.json` files against the Hugging Face `tokenizers` library
//! (`tests/fixtures/unigram_reference.json`, made by
//! `scripts/models/make-bert-fixture.py`). Needs no model.

use rag_bert::BertTokenizer;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    tokenizer: serde_json::Value,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

#[test]
fn ids_equal_the_reference_library() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/unigram_reference.json"
    );
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let tokenizer = BertTokenizer::from_json(fixture.tokenizer.to_string().as_bytes()).unwrap();
    assert!(fixture.cases.len() >= 30);
    let mut mismatches = Vec::new();
    for case in &fixture.cases {
        let got = tokenizer.encode(&case.text, usize::MAX).ids;
        if got != case.ids {
            let show = |ids: &[u32]| -> Vec<String> {
                ids.iter()
                    .map(|&id| tokenizer.id_to_token(id).unwrap_or("?").to_owned())
                    .collect()
            };
            mismatches.push(format!(
                "{:?}:\n  got  {:?}\n  want {:?}",
                case.text,
                show(&got),
                show(&case.ids)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ:\n{}",
        mismatches.len(),
        fixture.cases.len(),
        mismatches.join("\n")
    );

    // The cases exercise the character map, unknown runs and <mask>.
    let unk = tokenizer.unk_id();
    assert!(fixture.cases.iter().any(|c| c.ids.contains(&unk)));
    let full_width = fixture
        .cases
        .iter()
        .find(|c| c.text.starts_with('Ｆ'))
        .unwrap();
    let ascii = tokenizer.encode("FULLWIDTH text 123!", usize::MAX).ids;
    assert_eq!(
        full_width.ids, ascii,
        "the character map folds full-width forms"
    );
}
