//! Golden tests of the analyzer on mixed inputs: behaviour, not API.
//! Refresh with `UPDATE_EXPECT=1 cargo test -p rag-text`.

use expect_test::{expect, Expect};
use rag_text::{Analyzer, Mode, TokenKind};

fn check(input: &str, mode: Mode, expected: Expect) {
    let analyzer = Analyzer::new();
    let rendered: Vec<String> = analyzer
        .analyze(input, mode)
        .into_iter()
        .map(|t| {
            // Every offset must point at the original text the term came from.
            assert!(input.is_char_boundary(t.start) && input.is_char_boundary(t.end));
            format!(
                "{}:{:?}@{}..{}={}",
                t.text,
                t.kind,
                t.start,
                t.end,
                &input[t.start..t.end]
            )
        })
        .collect();
    expected.assert_eq(&rendered.join("\n"));
}

#[test]
fn english_question_with_ticker() {
    check(
        "Should I buy NVDA right now?",
        Mode::Query,
        expect![[r#"
            buy:Word@9..12=buy
            nvda:Ident@13..17=NVDA
            right:Word@18..23=right"#]],
    );
}

#[test]
fn identifiers_kept_whole() {
    check(
        "iPhone15 A-12 3.5km 16:00 opens",
        Mode::Query,
        expect![[r#"
            iphone15:Ident@0..8=iPhone15
            a-12:Ident@9..13=A-12
            12:Number@11..13=12
            3.5km:Ident@14..19=3.5km
            16:00:Number@20..25=16:00
            open:Word@26..31=opens"#]],
    );
}

#[test]
fn chinese_keeps_single_characters() {
    check(
        "虾新鲜吗",
        Mode::Query,
        expect![[r#"
            虾:Han@0..3=虾
            新鲜:Han@3..9=新鲜
            吗:HanStop@9..12=吗
            虾新:HanBigram@0..6=虾新
            鲜吗:HanStopBigram@6..12=鲜吗"#]],
    );
}

#[test]
fn index_mode_adds_characters_of_words() {
    check(
        "鲜虾仁",
        Mode::Index,
        expect![[r#"
            鲜:Han@0..3=鲜
            虾仁:Han@3..9=虾仁
            虾:HanChar@3..6=虾
            仁:HanChar@6..9=仁
            鲜虾:HanBigram@0..6=鲜虾"#]],
    );
}

#[test]
fn traditional_query_matches_simplified_terms() {
    check(
        "營業時間是幾點",
        Mode::Query,
        expect![[r#"
            营业时间:Han@0..12=營業時間
            是:HanStop@12..15=是
            几点:Han@15..21=幾點
            营业:HanBigram@0..6=營業
            业时:HanBigram@3..9=業時
            时间:HanBigram@6..12=時間
            间是:HanStopBigram@9..15=間是
            是几:HanStopBigram@12..18=是幾"#]],
    );
}

#[test]
fn mixed_full_width_and_chinese() {
    check(
        "ＮＶＤＡ本周的信号，iPhone15怎么样？",
        Mode::Query,
        expect![[r#"
            nvda:Ident@0..12=ＮＶＤＡ
            本周:Han@12..18=本周
            的:HanStop@18..21=的
            信号:Han@21..27=信号
            周的:HanStopBigram@15..21=周的
            的信:HanStopBigram@18..24=的信
            iphone15:Ident@30..38=iPhone15
            怎么样:HanStop@38..47=怎么样
            怎么:HanStopBigram@38..44=怎么
            么样:HanStopBigram@41..47=么样"#]],
    );
}

#[test]
fn stop_word_only_query_still_searches() {
    let analyzer = Analyzer::new();
    let terms: Vec<String> = analyzer
        .analyze("the who", Mode::Query)
        .into_iter()
        .map(|t| t.text)
        .collect();
    assert_eq!(terms, ["the", "who"]);
}

#[test]
fn chinese_stop_word_only_query_still_searches() {
    // Alone, stop words are ordinary terms; beside another term they only score.
    let kinds = |q: &str| -> Vec<(String, TokenKind)> {
        Analyzer::new()
            .analyze(q, Mode::Query)
            .into_iter()
            .map(|t| (t.text, t.kind))
            .collect()
    };
    assert!(kinds("怎么样").iter().all(|(_, k)| k.retrieves()));
    let with_word = kinds("怎么退钱");
    assert!(with_word.contains(&("怎么".into(), TokenKind::HanStop)));
    assert!(with_word.iter().any(|(_, k)| k.retrieves()));
}

#[test]
fn letters_with_digits() {
    check(
        "E2Fs KRT17 Rad53-dependent scm3-139",
        Mode::Query,
        expect![[r#"
            e2f:Ident@0..4=E2Fs
            krt17:Ident@5..10=KRT17
            rad53-dependent:Ident@11..26=Rad53-dependent
            rad53:Ident@11..16=Rad53
            depend:Word@17..26=dependent
            scm3-139:Ident@27..35=scm3-139
            scm3:Ident@27..31=scm3
            139:Number@32..35=139"#]],
    );
}

mod properties {
    use proptest::prelude::*;
    use rag_text::{Analyzer, Mode};

    fn mixed_text() -> impl Strategy<Value = String> {
        // Chinese (Simplified and Traditional), English, full-width forms, digits, punctuation, emoji.
        proptest::collection::vec(
            prop_oneof![
                Just("退款".to_string()),
                Just("營業時間".to_string()),
                Just("鲜虾".to_string()),
                Just("ＡＢＣ".to_string()),
                Just("iPhone15".to_string()),
                Just("A-12".to_string()),
                Just("3.5km".to_string()),
                Just("16:00".to_string()),
                Just("state-of-the-art".to_string()),
                Just(" ".to_string()),
                Just("，。！".to_string()),
                Just("🙂".to_string()),
                "[a-zA-Z]{1,8}",
                "[\\u4e00-\\u9fa5]{1,4}",
                any::<char>().prop_map(|c| c.to_string()),
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn offsets_are_char_boundaries_and_positions_monotonic(text in mixed_text(), index in any::<bool>()) {
            let analyzer = Analyzer::new();
            let mode = if index { Mode::Index } else { Mode::Query };
            let tokens = analyzer.analyze(&text, mode);
            let mut last_position = 0;
            for t in &tokens {
                prop_assert!(t.start < t.end && t.end <= text.len());
                prop_assert!(text.is_char_boundary(t.start) && text.is_char_boundary(t.end));
                prop_assert!(t.position >= last_position);
                prop_assert!(!t.text.is_empty());
                last_position = t.position;
            }
            let _ = analyzer.key_terms(&text);
        }
    }
}
