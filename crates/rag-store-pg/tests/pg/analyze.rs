//! Planner statistics after a large load: the store analyses the recall
//! tables itself once a write has doubled a knowledge base, so the planner
//! knows the knowledge base's rows before autovacuum gets to them.

use super::*;

/// `last_analyze` (manual analyses only) and `analyze_count` of a table.
async fn analysed(admin: &Client, table: &str) -> (bool, i64) {
    let row = admin
        .query_one(
            "SELECT last_analyze IS NOT NULL, analyze_count FROM pg_stat_user_tables
             WHERE schemaname = 'ragscope' AND relname = $1",
            &[&table],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The planner's estimate of a knowledge base's postings.
async fn estimated_postings(admin: &Client, kb: KbId) -> f64 {
    let plan: serde_json::Value = admin
        .query_one(
            &format!(
                "EXPLAIN (FORMAT JSON) SELECT 1 FROM ragscope.postings WHERE kb_id = '{}'",
                kb.0
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    plan[0]["Plan"]["Plan Rows"].as_f64().unwrap()
}

#[test]
fn a_load_that_doubles_a_knowledge_base_is_analysed_and_small_writes_are_not() {
    rt().block_on(async {
        let (db, store, t, kb) = TestDb::with_kb().await;
        assert!(
            store.analyses_allowed(),
            "migration 11 grants MAINTAIN on PostgreSQL 17 and later"
        );
        let admin = client(&db.admin).await;
        assert_eq!(analysed(&admin, "postings").await, (false, 0));
        // Below the minimum: nothing.
        let few: Vec<WriteOp> = (0..50)
            .map(|i| WriteOp::PutFaq(faq(kb, &format!("early question {i}"))))
            .collect();
        store.apply(&t, kb, few).await.unwrap();
        assert_eq!(store.analyses_run(), 0);
        // 1,200 entries at once: the knowledge base grew from 50 to 1,250.
        let load: Vec<WriteOp> = (0..1_200)
            .map(|i| {
                WriteOp::PutFaq(faq(
                    kb,
                    &format!("how do I change limit number {i} of my card"),
                ))
            })
            .collect();
        store.apply(&t, kb, load).await.unwrap();
        assert_eq!(store.analyses_run(), 1);
        for table in ["passages", "postings", "lex_terms", "vectors"] {
            assert_eq!(analysed(&admin, table).await, (true, 1), "{table}");
        }
        let postings = count(&admin, "postings").await as f64;
        let estimate = estimated_postings(&admin, kb).await;
        assert!(
            estimate > postings * 0.8 && estimate < postings * 1.25,
            "the planner expects {estimate} postings of {postings}"
        );
        // A day of small writes to it analyses nothing more.
        for i in 0..20 {
            let one = vec![WriteOp::PutFaq(faq(kb, &format!("later question {i}")))];
            store.apply(&t, kb, one).await.unwrap();
        }
        assert_eq!(store.analyses_run(), 1);
        assert_eq!(analysed(&admin, "postings").await, (true, 1));
        drop(admin);
        db.drop().await;
    });
}
