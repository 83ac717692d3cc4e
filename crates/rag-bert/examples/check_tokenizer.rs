//! Compares the tokenizer with reference ids:
//!
//! ```text
//! cargo run -p rag-bert --example check_tokenizer -- FIXTURE.json
//! ```
//!
//! `FIXTURE.json` is `{"tokenizer": <tokenizer.json>, "cases": [{"text", "ids"}]}`
//! as `scripts/models/make-bert-fixture.py` writes it. Exits non-zero on any
//! difference.

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: check_tokenizer FIXTURE.json");
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("readable")).expect("JSON");
    let tokenizer = rag_bert::BertTokenizer::from_json(fixture["tokenizer"].to_string().as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let cases = fixture["cases"].as_array().expect("cases");
    let mut bad = 0;
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).expect("ids");
        let got = tokenizer.encode(text, usize::MAX).ids;
        if got != want {
            bad += 1;
            println!("{text:?}\n  got  {got:?}\n  want {want:?}");
        }
    }
    println!("{} of {} cases equal", cases.len() - bad, cases.len());
    if bad > 0 {
        std::process::exit(1);
    }
}
