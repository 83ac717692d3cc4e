//! Golden tests of the sentence-support check across languages, with the
//! real in-process multilingual-e5-small (the model file from
//! `scripts/models/fetch-e5.sh`): a Chinese answer over English sources and
//! an English answer over Chinese sources, each with one invented sentence
//! that must come out unsupported (and, in the first, a sentence with a
//! wrong number, which the embeddings alone would pass). Term overlap is
//! near zero across languages, so support has to come from the embeddings.
//! Refresh with `UPDATE_EXPECT=1 cargo test -p rag-answer --test support_golden`.

use expect_test::{expect, Expect};
use rag_answer::{check_citations, check_support, SentenceEmbedder, SupportConfig, Verdict};
use rag_core::event::ContextSource;
use rag_core::{ChunkId, PassageId, PassageKind, PassageView};
use rag_e5::{E5Model, Kind};
use rag_text::Analyzer;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn model() -> &'static E5Model {
    static MODEL: OnceLock<E5Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let p: PathBuf = std::env::var_os("RAGSCOPE_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models"))
            .join("e5-small-q4.bin");
        assert!(
            p.exists(),
            "{} is missing: run scripts/models/fetch-e5.sh",
            p.display()
        );
        E5Model::load(&p).expect("the e5 model loads")
    })
}

/// Sentence similarity is symmetric: both sides get e5's `query: ` role.
struct E5Sentences;

impl SentenceEmbedder for E5Sentences {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(model()
            .embed_many(texts, Kind::Query)
            .into_iter()
            .map(|e| e.vector)
            .collect())
    }
}

fn source(n: u32, title: &str, body: &str) -> ContextSource {
    let id = PassageId::Chunk(ChunkId::generate());
    ContextSource {
        n,
        passage: PassageView {
            id,
            kind: PassageKind::Chunk,
            title: title.into(),
            body: body.into(),
            source: None,
            highlights: vec![],
        },
    }
}

fn check(answer: &str, sources: &[ContextSource], expected: Expect) {
    let checked = check_citations(answer, sources);
    let report = check_support(
        &Analyzer::new(),
        &checked.text,
        sources,
        Some(&E5Sentences),
        &SupportConfig::default(),
    );
    assert_eq!(report.embedding_note, None);
    let mut lines = Vec::new();
    for s in &report.sentences {
        let line = match &s.verdict {
            Verdict::Supported {
                support,
                by_terms,
                by_embedding,
            } => {
                let body = &sources
                    .iter()
                    .find(|x| x.n == support.n)
                    .unwrap()
                    .passage
                    .body;
                assert_eq!(
                    &body[support.span.0..support.span.1],
                    support.text,
                    "the span points at the supporting sentence"
                );
                format!(
                    "SUPPORTED by [{}] {}..{} {:?} (overlap {:.2}, cosine {:.2}, terms {by_terms}, embedding {by_embedding})",
                    support.n,
                    support.span.0,
                    support.span.1,
                    support.text,
                    support.overlap,
                    support.cosine.unwrap()
                )
            }
            Verdict::Unsupported { closest } => {
                let c = closest.as_ref().unwrap();
                format!(
                    "UNSUPPORTED (closest [{}] {:?}, overlap {:.2}, cosine {:.2}, missing numbers {:?})",
                    c.n,
                    c.text,
                    c.overlap,
                    c.cosine.unwrap(),
                    c.missing_numbers
                )
            }
            Verdict::Uncited => "UNCITED".to_string(),
        };
        lines.push(format!("{} {:?}\n  -> {line}", s.text, s.cites));
    }
    expected.assert_eq(&lines.join("\n"));
}

#[test]
fn chinese_answer_over_english_sources() {
    let sources = vec![
        source(
            1,
            "Weight capacity",
            "The Lumen Desk Pro is rated for a maximum lifting load of 120 kg. Keep heavy items within the middle two-thirds of the desktop. An uneven load can make one leg work harder than the other.",
        ),
        source(2, "Warranty", "The motors are covered by a five-year warranty. All other parts are covered for two years from the date of delivery."),
    ];
    check(
        "Lumen Desk Pro 的最大承重是 120 公斤 [1]。电机保修五年 [2]。这款桌子可以在水下使用 [1]。其他部件保修 3 年 [2]。",
        &sources,
        expect![[r#"
            Lumen Desk Pro 的最大承重是 120 公斤。 [1]
              -> SUPPORTED by [1] 0..65 "The Lumen Desk Pro is rated for a maximum lifting load of 120 kg." (overlap 0.50, cosine 0.91, terms false, embedding true)
            电机保修五年。 [2]
              -> SUPPORTED by [2] 0..47 "The motors are covered by a five-year warranty." (overlap 0.00, cosine 0.85, terms false, embedding true)
            这款桌子可以在水下使用。 [1]
              -> UNSUPPORTED (closest [1] "Keep heavy items within the middle two-thirds of the desktop.", overlap 0.00, cosine 0.79, missing numbers [])
            其他部件保修 3 年。 [2]
              -> UNSUPPORTED (closest [2] "All other parts are covered for two years from the date of delivery.", overlap 0.00, cosine 0.83, missing numbers ["3"])"#]],
    );
}

#[test]
fn english_answer_over_chinese_sources() {
    let sources = vec![
        source(
            1,
            "保修政策",
            "电机享有 5 年保修。控制盒、键盘和桌面等其他部件保修 2 年。保修期从签收之日起计算。",
        ),
        source(
            2,
            "退换货",
            "签收后 30 天内可以无理由退货。退货运费由我们承担。",
        ),
    ];
    check(
        "The motors have a five-year warranty [1]. You can return the desk within 30 days of delivery for any reason [2]. Every order comes with a free office chair [2].",
        &sources,
        expect![[r#"
            The motors have a five-year warranty. [1]
              -> SUPPORTED by [1] 0..27 "电机享有 5 年保修。" (overlap 0.00, cosine 0.89, terms false, embedding true)
            You can return the desk within 30 days of delivery for any reason. [2]
              -> SUPPORTED by [2] 0..43 "签收后 30 天内可以无理由退货。" (overlap 0.14, cosine 0.87, terms false, embedding true)
            Every order comes with a free office chair. [2]
              -> UNSUPPORTED (closest [2] "签收后 30 天内可以无理由退货。", overlap 0.00, cosine 0.78, missing numbers [])"#]],
    );
}
