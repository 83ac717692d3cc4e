//! The lexical interpolation λ: suggested from the analysed query before
//! recall, and raised after recall when BM25 has a clear winner. The
//! `fused` event reports the value applied and why.

use rag_core::{AnalyzedQuery, FusionRule, Language, PathKind, RankedList, TokenKind};

/// Whether the question is in one of the two languages and the knowledge base in the other.
fn across_languages(q: &AnalyzedQuery, kb: Language) -> bool {
    matches!(
        (q.language, kb),
        (Language::Zh, Language::En) | (Language::En, Language::Zh)
    )
}

/// λ suggested for a query: a question in another language than the
/// knowledge base leans on vectors; identifiers and very short queries lean
/// lexical; otherwise an even split (best among 0.4–0.8 on XQuAD zh→zh and
/// en→en).
pub(crate) fn suggest_lambda(
    q: &AnalyzedQuery,
    kb: Language,
    rule: FusionRule,
) -> (f64, &'static str) {
    if rule == FusionRule::Convex {
        return convex_lambda(q, kb);
    }
    if across_languages(q, kb) {
        (0.2, "the question and the knowledge base are in different languages: words rarely match across languages, meaning does")
    } else if q
        .tokens
        .iter()
        .any(|t| matches!(t.kind, TokenKind::Ident | TokenKind::Number))
    {
        (
            0.7,
            "the query names identifiers or numbers, which exact matching finds best",
        )
    } else if q.tokens.iter().filter(|t| t.kind.retrieves()).count() <= 2 {
        (0.6, "a short keyword query")
    } else {
        (0.5, "a balanced question")
    }
}

/// λ of the convex rule for a question in the knowledge base's language
/// over document passages: 0.6, the best mean of the passage development
/// sets (SciFact train, XQuAD zh→zh and en→en; 0.25–0.7 tried, see
/// docs/quality.md). FAQ matching lowers it to [`CONVEX_FAQ_LAMBDA`] after
/// recall. The rule needs no other per-query adjustment: a path's lead shows
/// in its normalised scores.
pub(crate) const CONVEX_LAMBDA: f64 = 0.6;
/// λ of the convex rule across languages: the RRF rule's value, kept (no
/// development set is cross-lingual).
pub(crate) const CONVEX_ACROSS_LAMBDA: f64 = 0.2;

/// λ of the convex rule: lexical matching weighs less across languages.
fn convex_lambda(q: &AnalyzedQuery, kb: Language) -> (f64, &'static str) {
    if across_languages(q, kb) {
        (CONVEX_ACROSS_LAMBDA, "the question and the knowledge base are in different languages: words rarely match across languages, meaning does")
    } else {
        (CONVEX_LAMBDA, "the convex rule's split for a question in the knowledge base's language; each path's weight then follows how far its best candidates lead")
    }
}

/// λ of the convex rule when the question is matched against FAQ questions
/// (most of the dense path's best candidates are FAQ entries): short
/// questions against short questions, where meaning carries more than shared
/// words. Chosen on banking77 and bq dev (0.25–0.4 tried; see
/// docs/quality.md); document passages keep [`CONVEX_LAMBDA`].
pub(crate) const CONVEX_FAQ_LAMBDA: f64 = 0.3;
/// λ of the convex rule over document passages when the second
/// embedder's list takes part (`second.rs`): its opinion shares the dense
/// weight, and the dense side then earns a larger share. Chosen on SciFact
/// train (0.4–0.6 tried; docs/quality.md).
pub(crate) const CONVEX_SECOND_LAMBDA: f64 = 0.4;
/// λ of FAQ matching when the second embedder's list takes part. Chosen on
/// banking77 dev (0.1–0.4 tried; docs/quality.md).
pub(crate) const CONVEX_SECOND_FAQ_LAMBDA: f64 = 0.2;
/// The factor on the second embedder's weight in FAQ matching: with equal
/// weights, its share of the dense side goes from 0.5 to 0.7. It was
/// trained on paraphrase and question pairs, which FAQ matching is; chosen
/// on banking77 dev with λ (shares 0.3–0.9 tried; docs/quality.md).
pub(crate) const SECOND_FAQ_FACTOR: f64 = 0.7 / 0.3;

/// The convex rule's λ after recall: the same-language split lowered to
/// [`CONVEX_FAQ_LAMBDA`] when the question is being matched against FAQ
/// questions ([`crate::feedback::faq_matching`]), and to
/// [`CONVEX_SECOND_LAMBDA`] or [`CONVEX_SECOND_FAQ_LAMBDA`] when the
/// second embedder scored the candidates. Returns λ, why, and the factor
/// on the second embedder's weight ([`SECOND_FAQ_FACTOR`] or 1).
pub(crate) fn convex_after_recall(
    suggested: (f64, &str),
    lists: &[RankedList],
) -> (f64, String, f64) {
    let (lambda, reason) = suggested;
    if lambda != CONVEX_LAMBDA {
        return (lambda, reason.to_owned(), 1.0);
    }
    let dense = lists
        .iter()
        .find(|l| l.path == PathKind::Dense)
        .map(|l| l.hits.as_slice())
        .unwrap_or_default();
    let second = lists
        .iter()
        .any(|l| l.path == PathKind::SecondDense && !l.hits.is_empty());
    let looked = dense.len().min(crate::feedback::FAQ_LOOK);
    match (crate::feedback::faq_matching(dense), second) {
        (Some(faqs), false) => (
            CONVEX_FAQ_LAMBDA,
            format!(
                "{faqs} of the dense path's best {looked} candidates are FAQ entries: a question matched against FAQ questions, where meaning carries more than shared words (otherwise {lambda}: {reason})"
            ),
            1.0,
        ),
        (Some(faqs), true) => (
            CONVEX_SECOND_FAQ_LAMBDA,
            format!(
                "{faqs} of the dense path's best {looked} candidates are FAQ entries, and a second embedder, trained on paraphrases, scored the candidates too: meaning carries more than shared words, and the second embedder's weight is raised {SECOND_FAQ_FACTOR:.2}× (otherwise {lambda}: {reason})"
            ),
            SECOND_FAQ_FACTOR,
        ),
        (None, true) => (
            CONVEX_SECOND_LAMBDA,
            format!(
                "a second embedder scored the candidates too: two models' reading of meaning earns the dense side a larger share (otherwise {lambda}: {reason})"
            ),
            1.0,
        ),
        (None, false) => (lambda, reason.to_owned(), 1.0),
    }
}

/// BM25's best score at least this fraction above its second best counts as
/// a confident lexical answer (chosen on XQuAD zh→zh, en→en and SciFact
/// train; see README).
const CLEAR_BM25_MARGIN: f64 = 0.4;
/// λ of a query whose BM25 list has a clear winner.
const CONFIDENT_LEXICAL_LAMBDA: f64 = 0.9;

/// The λ applied after recall: the suggestion, raised when BM25 has a clear
/// winner for a question in the knowledge base's language (in another
/// language, BM25 scores say little). Returns λ and why.
pub(crate) fn lambda_after_recall(
    suggested: (f64, &str),
    q: &AnalyzedQuery,
    kb: Language,
    lists: &[RankedList],
) -> (f64, String) {
    let (lambda, reason) = suggested;
    let bm25 = lists
        .iter()
        .find(|l| l.path == PathKind::Bm25)
        .map(|l| l.hits.as_slice())
        .unwrap_or_default();
    if across_languages(q, kb)
        || lambda >= CONFIDENT_LEXICAL_LAMBDA
        || bm25.len() < 2
        || bm25[0].score <= 0.0
    {
        return (lambda, reason.to_owned());
    }
    let margin = (bm25[0].score - bm25[1].score) / bm25[0].score;
    if margin >= CLEAR_BM25_MARGIN {
        (
            CONFIDENT_LEXICAL_LAMBDA,
            format!(
                "BM25's best passage scores {:.0} % above the next ({:.2} against {:.2}): exact matching is confident (suggested {lambda} before recall: {reason})",
                margin * 100.0,
                bm25[0].score,
                bm25[1].score
            ),
        )
    } else {
        (lambda, reason.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{FaqId, Hit, PassageId};

    fn query(language: Language) -> AnalyzedQuery {
        AnalyzedQuery {
            raw: String::new(),
            normalized: String::new(),
            language,
            tokens: Vec::new(),
            key_terms: Vec::new(),
        }
    }

    fn bm25(scores: &[f64]) -> Vec<RankedList> {
        let hits = scores
            .iter()
            .enumerate()
            .map(|(i, s)| Hit {
                id: PassageId::Faq(FaqId::generate()),
                rank: i as u32 + 1,
                score: *s,
                matched: vec![],
            })
            .collect();
        vec![RankedList {
            path: PathKind::Bm25,
            hits,
            notes: vec![],
        }]
    }

    #[test]
    fn a_clear_bm25_winner_leans_lexical_and_says_why() {
        let (lambda, why) = lambda_after_recall(
            (0.5, "a balanced question"),
            &query(Language::Zh),
            Language::Zh,
            &bm25(&[20.0, 10.0, 9.0]),
        );
        assert_eq!(lambda, CONFIDENT_LEXICAL_LAMBDA);
        assert!(
            why.contains("50 %") && why.contains("a balanced question"),
            "{why}"
        );
    }

    #[test]
    fn the_convex_rule_splits_by_language_only() {
        let mut q = query(Language::En);
        assert_eq!(
            suggest_lambda(&q, Language::En, FusionRule::Convex).0,
            CONVEX_LAMBDA
        );
        assert_eq!(
            suggest_lambda(&q, Language::Zh, FusionRule::Convex).0,
            CONVEX_ACROSS_LAMBDA
        );
        q.language = Language::Zh;
        assert_eq!(suggest_lambda(&q, Language::Zh, FusionRule::Rrf).0, 0.6);
    }

    fn dense(faqs: usize, chunks: usize) -> Vec<RankedList> {
        let ids = (0..faqs)
            .map(|_| PassageId::Faq(FaqId::generate()))
            .chain((0..chunks).map(|_| PassageId::Chunk(rag_core::ChunkId::generate())));
        let hits = ids
            .enumerate()
            .map(|(i, id)| Hit {
                id,
                rank: i as u32 + 1,
                score: 0.9 - i as f64 * 0.01,
                matched: vec![],
            })
            .collect();
        vec![RankedList {
            path: PathKind::Dense,
            hits,
            notes: vec![],
        }]
    }

    #[test]
    fn faq_matching_leans_on_vectors_and_says_why() {
        let split = (CONVEX_LAMBDA, "same language");
        let (lambda, why, _) = convex_after_recall(split, &dense(9, 1));
        assert_eq!(lambda, CONVEX_FAQ_LAMBDA);
        assert!(why.contains("9 of the dense path's best 10") && why.contains("same language"));
        // Document passages, too few FAQ entries, no dense list, or a
        // question in another language: the split stands.
        assert_eq!(convex_after_recall(split, &dense(0, 20)).0, CONVEX_LAMBDA);
        assert_eq!(convex_after_recall(split, &dense(7, 3)).0, CONVEX_LAMBDA);
        assert_eq!(convex_after_recall(split, &[]).0, CONVEX_LAMBDA);
        let across = (CONVEX_ACROSS_LAMBDA, "across");
        assert_eq!(
            convex_after_recall(across, &dense(10, 0)).0,
            CONVEX_ACROSS_LAMBDA
        );
        // Only the best ten count.
        let mut late = dense(0, 10);
        late[0].hits.extend(dense(10, 0)[0].hits.clone());
        assert_eq!(convex_after_recall(split, &late).0, CONVEX_LAMBDA);
    }

    /// `lists` with the second embedder's list (the dense candidates,
    /// rescored), empty when it did not score them.
    fn with_second(mut lists: Vec<RankedList>, scored: bool) -> Vec<RankedList> {
        let hits = if scored {
            lists[0].hits.clone()
        } else {
            vec![]
        };
        lists.push(RankedList {
            path: PathKind::SecondDense,
            hits,
            notes: vec![],
        });
        lists
    }

    #[test]
    fn the_second_embedder_moves_lambda_and_raises_its_weight_for_faq_matching_only() {
        let split = (CONVEX_LAMBDA, "same language");
        let (lambda, why, factor) = convex_after_recall(split, &with_second(dense(0, 20), true));
        assert_eq!((lambda, factor), (CONVEX_SECOND_LAMBDA, 1.0));
        assert!(why.contains("second embedder"), "{why}");
        let (lambda, why, factor) = convex_after_recall(split, &with_second(dense(9, 1), true));
        assert_eq!(
            (lambda, factor),
            (CONVEX_SECOND_FAQ_LAMBDA, SECOND_FAQ_FACTOR)
        );
        assert!(why.contains("raised 2.33×"), "{why}");
        // An empty second list (a candidate without its vectors): as before.
        let (lambda, _, factor) = convex_after_recall(split, &with_second(dense(9, 1), false));
        assert_eq!((lambda, factor), (CONVEX_FAQ_LAMBDA, 1.0));
        let (lambda, _, factor) = convex_after_recall(split, &with_second(dense(0, 20), false));
        assert_eq!((lambda, factor), (CONVEX_LAMBDA, 1.0));
        // Across languages the split stands.
        let across = (CONVEX_ACROSS_LAMBDA, "across");
        let (lambda, _, factor) = convex_after_recall(across, &with_second(dense(9, 1), true));
        assert_eq!((lambda, factor), (CONVEX_ACROSS_LAMBDA, 1.0));
    }

    #[test]
    fn a_close_race_keeps_the_suggestion() {
        let (lambda, why) = lambda_after_recall(
            (0.5, "a balanced question"),
            &query(Language::En),
            Language::En,
            &bm25(&[20.0, 15.0]),
        );
        assert_eq!((lambda, why.as_str()), (0.5, "a balanced question"));
    }

    #[test]
    fn across_languages_and_without_a_runner_up_bm25_is_not_trusted() {
        let across = lambda_after_recall(
            (0.2, "across"),
            &query(Language::Zh),
            Language::En,
            &bm25(&[20.0, 1.0]),
        );
        assert_eq!(across.0, 0.2);
        let single = lambda_after_recall(
            (0.5, "one hit"),
            &query(Language::Zh),
            Language::Zh,
            &bm25(&[20.0]),
        );
        assert_eq!(single.0, 0.5);
        let none = lambda_after_recall((0.5, "no list"), &query(Language::Zh), Language::Zh, &[]);
        assert_eq!(none.0, 0.5);
    }
}
