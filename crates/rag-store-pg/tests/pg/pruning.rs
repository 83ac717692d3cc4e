//! BM25 in PostgreSQL prunes with MaxScore (a first pass over the rarest
//! terms' passages gives a threshold; the weakest terms are then only
//! looked up for the candidates). What it returns must be what scoring
//! every posting returns: here, what the in-memory index built from the
//! same snapshot returns.

use super::*;

/// A deterministic corpus over a small vocabulary with very uneven
/// frequencies: a few words in almost every passage, most in a few.
fn corpus(kb: KbId, docs: usize) -> Vec<WriteOp> {
    let words: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    let han = ["退款", "配送", "会员", "发票", "积分"];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..docs)
        .map(|d| {
            let len = 6 + (next() % 14) as usize;
            let mut text: Vec<String> = Vec::new();
            for _ in 0..len {
                // Word i with probability about 1/(i+1): Zipf-like.
                let r = (next() % 10_000) as f64 / 10_000.0;
                let i = ((60f64.powf(r)) as usize).saturating_sub(1).min(59);
                text.push(words[i].clone());
            }
            if next() % 3 == 0 {
                text.push("the".into());
            }
            if next() % 4 == 0 {
                text.push(han[(next() % 5) as usize].into());
            }
            let text = text.join(" ");
            // "x" on one passage in 7; "y", on one in 61, leaves fewer
            // than k of a pass's best few hundred.
            let mut tags = Vec::new();
            if d % 7 == 0 {
                tags.push("x".to_owned());
            }
            if d % 61 == 0 {
                tags.push("y".to_owned());
            }
            one_chunk(Document {
                id: DocId::generate(),
                kb,
                title: if d % 5 == 0 {
                    words[d % 60].clone()
                } else {
                    String::new()
                },
                source: format!("d{d}.md"),
                content_hash: format!("h{d}"),
                tags,
                created_at: 1 + d as i64,
                updated_at: 1 + d as i64,
                text,
                owner: None,
            })
        })
        .collect()
}

#[test]
fn pruned_bm25_in_postgres_ranks_and_scores_as_scoring_every_posting() {
    rt().block_on(async {
        let (db, store, t, kb) = TestDb::with_kb().await;
        let ops = corpus(kb, 900);
        for batch in ops.chunks(300) {
            store.apply(&t, kb, batch.to_vec()).await.unwrap();
        }
        let snapshot = store.snapshot(&t, kb).await.unwrap();
        let analyzer = rag_text::Analyzer::new();
        let index = rag_lexical::LexicalIndex::build(&analyzer, &snapshot);
        // Rare words beside common ones (w0…w3 are in most passages), stop
        // words and Chinese bigrams, and a word no passage holds. With
        // k = 5 the first pass reads the rarest lists only (its budget is
        // 16 postings a result), so each of these queries needs the
        // threshold to be exact, and most need the second pass.
        let queries = [
            "w57 w0 w1 w2",
            "w41 w33 w1 the",
            "w59 w58 w0",
            "w12 w3 w2 w1 w0",
            "the w0 w1",
            "退款 w0 w44",
            "配送 会员 w1",
            "w0 w0 w1 w50",
            "w20 w21 w22 w23 w24 w25",
            "w5 nothinglikeit w0",
        ];
        let admin = client(&db.admin).await;
        let mut compared = 0;
        for raw in queries {
            // The premise: at k = 5 the first pass cannot read every list.
            let tokens: Vec<String> = index
                .analyze_query(raw)
                .tokens
                .iter()
                .map(|t| t.text.clone())
                .collect();
            let postings: i64 = admin
                .query_one(
                    "SELECT coalesce(sum(df_any), 0)::bigint FROM ragscope.lex_terms WHERE kb_id = $1 AND term = ANY($2)",
                    &[&kb.0, &tokens],
                )
                .await
                .unwrap()
                .get(0);
            assert!(postings > 16 * 5, "{raw}: {postings} postings");
            for k in [1usize, 5, 20] {
                for tags in [vec![], vec!["x".to_owned()], vec!["y".to_owned()]] {
                    let filters = Filters {
                        tags: tags.clone(),
                        ..Filters::default()
                    };
                    let ctx = SearchCtx {
                        filters: filters.clone(),
                        now: now(),
                        viewer: Viewer::Everything,
                    };
                    let q = index.analyze_query(raw);
                    let params = RetrievalParams::default();
                    let want = index.bm25(
                        &q,
                        k,
                        &params.bm25,
                        &rag_lexical::Filter::new(&filters, ctx.now, &ctx.viewer),
                    );
                    let got = store_list(&store, &t, kb, PathKind::Bm25, &q, k, &ctx).await;
                    let ids = |l: &RankedList| l.hits.iter().map(|h| h.id).collect::<Vec<_>>();
                    assert_eq!(ids(&got), ids(&want), "{raw} k={k} tags={tags:?}");
                    for (g, w) in got.hits.iter().zip(&want.hits) {
                        assert!(
                            (g.score - w.score).abs() <= 1e-4 * w.score.abs().max(1.0),
                            "{raw} k={k}: {} vs {}",
                            g.score,
                            w.score
                        );
                        assert_eq!(g.matched, w.matched, "{raw} k={k}");
                    }
                    assert_eq!(got.notes, want.notes, "{raw} k={k}");
                    compared += want.hits.len();
                }
            }
        }
        assert!(compared > 300, "only {compared} hits compared");
        drop(store);
        db.drop().await;
    });
}
