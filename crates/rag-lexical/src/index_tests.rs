//! Tests of `index.rs` (a file of their own to keep that one short).

use super::*;
use rag_core::{Bm25Params, FaqId};

/// A searchable FAQ passage (also used by the other modules' tests).
pub(crate) fn faq(q: &str, a: &str) -> Passage {
    Passage {
        id: PassageId::Faq(FaqId::generate()),
        title: q.into(),
        body: a.into(),
        tags: vec![],
        aliases: vec![],
        doc: None,
        source: None,
        span: None,
        created_at: 0,
        valid_from: None,
        valid_until: None,
        searchable: true,
        owner: None,
    }
}

#[test]
fn each_hit_names_exactly_the_query_terms_it_contains() {
    let mut passages: Vec<Passage> = (0..300)
        .map(|i| faq(&format!("filler question {i}"), "nothing relevant here"))
        .collect();
    passages.push(faq("refund policy", "refunds take three days"));
    passages.push(faq("delivery times", "delivery takes two days"));
    passages.push(faq("refund and delivery", "both"));
    let index = LexicalIndex::build(
        &Analyzer::new(),
        &KbSnapshot {
            passages,
            ..Default::default()
        },
    );
    let q = index.analyze_query("refund delivery");
    let list = index.bm25(&q, 10, &Bm25Params::default(), &Filter::everything());
    let by_title = |t: &str| {
        let hit = list
            .hits
            .iter()
            .find(|h| index.passage(h.id).is_some_and(|p| p.title == t))
            .unwrap_or_else(|| panic!("no hit {t}: {list:?}"));
        let mut m = hit.matched.clone();
        m.sort();
        m
    };
    assert_eq!(
        by_title("refund and delivery"),
        ["deliveri", "refund"],
        "stemmed"
    );
    assert_eq!(by_title("refund policy"), ["refund"]);
    assert_eq!(by_title("delivery times"), ["deliveri"]);
    assert_eq!(list.hits.len(), 3);
}

#[test]
fn batches_cover_every_passage_in_order() {
    let passages: Vec<Passage> = (0..7)
        .map(|i| faq(&format!("q{i}"), &"x".repeat(i * 10)))
        .collect();
    for budget in [1, 25, 60, 10_000] {
        let mut rest: &[Passage] = &passages;
        let mut batches: Vec<&[Passage]> = Vec::new();
        while !rest.is_empty() {
            let n = crate::segment::batch_len(rest, budget);
            assert!(n > 0);
            let (batch, tail) = rest.split_at(n);
            batches.push(batch);
            rest = tail;
        }
        // A batch only goes past the budget with its last passage.
        for b in &batches {
            let bytes: usize = b[..b.len() - 1]
                .iter()
                .map(|p| p.title.len() + p.body.len())
                .sum();
            assert!(bytes < budget, "budget {budget}: {bytes}");
        }
        if budget == 1 {
            assert_eq!(batches.len(), 7);
        }
        if budget == 10_000 {
            assert_eq!(batches.len(), 1);
        }
    }
}

#[test]
fn batched_build_equals_one_batch() {
    let mut passages = vec![
        faq("怎么申请退款", "在订单页点击申请退款，三个工作日内原路退回"),
        faq("营业时间", "每天 16:00 开门，次日 02:00 打烊"),
        faq(
            "How do I reset my password?",
            "Open settings, choose Security and press Reset password.",
        ),
    ];
    for i in 0..300 {
        passages.push(faq(
            &format!("问题 {i} question"),
            &format!("答案 answer number {i} 退款 refund {}", i % 7),
        ));
    }
    let snapshot = KbSnapshot {
        passages,
        ..Default::default()
    };
    let analyzer = Analyzer::new();
    let one =
        LexicalIndex::build_in_batches(&analyzer, snapshot.passages.clone(), &snapshot, usize::MAX);
    let many = LexicalIndex::build_in_batches(&analyzer, snapshot.passages.clone(), &snapshot, 64);
    assert_eq!(one.vocabulary_size(), many.vocabulary_size());
    assert_eq!(one.segments[0].lengths, many.segments[0].lengths);
    assert_eq!(one.segments[0].match_text, many.segments[0].match_text);
    for q in ["退款", "refund answer 3", "营业时间", "reset password"] {
        let (a, b) = (one.analyze_query(q), many.analyze_query(q));
        let params = Bm25Params::default();
        let (la, lb) = (
            one.bm25(&a, 50, &params, &crate::Filter::everything()),
            many.bm25(&b, 50, &params, &crate::Filter::everything()),
        );
        assert!(!la.hits.is_empty(), "{q}");
        let key = |l: &rag_core::RankedList| {
            l.hits
                .iter()
                .map(|h| (h.id, h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&la), key(&lb), "{q}");
    }
}

#[test]
fn chinese_stop_words_score_but_never_find_a_passage_alone() {
    let passages = vec![
        faq("怎么开发票", "在订单页申请"),
        faq("退款多久到账", "三天内原路退回"),
        faq("怎么申请退款", "在订单页点退款"),
    ];
    let index = LexicalIndex::build(
        &Analyzer::new(),
        &KbSnapshot {
            passages,
            ..Default::default()
        },
    );
    let title = |id: PassageId| index.passage(id).map(|p| p.title.clone()).unwrap();
    let q = index.analyze_query("怎么退款");
    let list = index.bm25(&q, 10, &Bm25Params::default(), &Filter::everything());
    let titles: Vec<String> = list.hits.iter().map(|h| title(h.id)).collect();
    // 怎么 alone finds nothing (the invoice entry is not returned), and it
    // lifts the entry holding both terms above the one holding 退款 only.
    assert_eq!(titles, ["怎么申请退款", "退款多久到账"], "{list:?}");
    // It is not among what matched either: only 退款 found the passage.
    assert!(list.hits.iter().all(|h| h.matched == ["退款"]), "{list:?}");
    // On its own a stop word is an ordinary term.
    let alone = index.bm25(
        &index.analyze_query("怎么"),
        10,
        &Bm25Params::default(),
        &Filter::everything(),
    );
    assert_eq!(alone.hits.len(), 2, "{alone:?}");
}

#[test]
fn merges_never_gather_more_than_the_cap() {
    let passages: Vec<Passage> = (0..40)
        .map(|i| {
            faq(
                &format!("question {i} refund"),
                &format!("answer {}", i % 5),
            )
        })
        .collect();
    let snapshot = KbSnapshot {
        passages,
        ..Default::default()
    };
    let analyzer = Analyzer::new();
    let mut taken = snapshot.clone();
    let mut index =
        LexicalIndex::build_streamed(&analyzer, &mut taken, [], 1, |_, _| Ok::<_, ()>(None))
            .unwrap();
    assert_eq!(index.segments.len(), 40);
    let copied = index.merge_segments(3);
    assert!(copied > 0, "small segments still merge");
    assert!(index.segments.iter().all(|s| s.len() <= 3));
    // Of one size class, as many as fit are merged: what is left cannot
    // pair up under the cap.
    let ones = index.segments.iter().filter(|s| s.len() == 1).count();
    assert!(ones < MERGE_FACTOR, "{ones} one-passage segments left");
    let whole = LexicalIndex::build(&analyzer, &snapshot);
    let q = whole.analyze_query("refund answer 3");
    let key = |ix: &LexicalIndex| {
        ix.bm25(&q, 50, &Bm25Params::default(), &Filter::everything())
            .hits
            .iter()
            .map(|h| (h.id, h.score.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&index), key(&whole));
    // A segment at the cap is never merged with another.
    let before = index.segments.len();
    assert_eq!(index.merge_segments(3), 0);
    assert_eq!(index.segments.len(), before);
}
