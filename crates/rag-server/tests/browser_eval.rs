//! The workbench's Eval page in headless chromium against the real server:
//! a golden set pasted, two settings run side by side, the differing rows
//! marked, and "Adopt B" saving B's settings to the knowledge base.

mod browser_support;

use browser_support::{start, Browser};
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_page_compares_two_settings_and_adopts_b() {
    let server = start(true).await;
    server.seed_demo().await;
    let (s, faqs) = server.call(Method::GET, "/kbs/demo/faqs", None).await;
    assert_eq!(s, 200, "{faqs}");
    let faqs = faqs["faqs"].as_array().unwrap();
    assert!(faqs.len() >= 2, "the demo has FAQ entries");
    let (_, before) = server.call(Method::GET, "/kbs/demo", None).await;
    // Two questions of the demo FAQ, each expecting its own entry; the
    // second carries markup that must show as text.
    let q1 = faqs[0]["question"].as_str().unwrap().to_owned();
    let q2 = format!("{} <i>escaped</i>", faqs[1]["question"].as_str().unwrap());
    let golden_first_expected = json!(format!("faq:{}", faqs[0]["id"].as_str().unwrap()));
    let golden = [
        json!({ "question": q1, "expected": [format!("faq:{}", faqs[0]["id"].as_str().unwrap())] }),
        json!({ "question": q2, "expected": [format!("faq:{}", faqs[1]["id"].as_str().unwrap())] }),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");

    let b = Browser::launch("eval").await;
    b.goto(&format!("{}/#eval", server.url)).await;
    b.wait_for("document.getElementById('eval-side-b')", "the two settings")
        .await;
    // A starts as the knowledge base's settings.
    assert_eq!(
        b.eval("document.getElementById('eval-a-top-k').value")
            .await,
        before["settings"]["retrieval"]["fusion"]["top_k"].to_string()
    );
    // Loaded from a file, then pasted over.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("golden.jsonl");
    std::fs::write(&file, format!("{}\n", golden.lines().next().unwrap())).unwrap();
    b.set_files("#eval-file", &[file]).await;
    b.wait_for(
        "document.getElementById('eval-golden-status').textContent.startsWith('1 ')",
        "the file read",
    )
    .await;
    b.type_into("#eval-golden-text", &golden).await;
    b.wait_for(
        "document.getElementById('eval-golden-status').textContent.startsWith('2 ')",
        "two questions read",
    )
    .await;
    // B: the fact path alone (it never ranks an FAQ entry), three hits.
    for path in [
        "bm25",
        "substring",
        "fuzzy",
        "synonym",
        "translated",
        "dense",
        "second_dense",
    ] {
        let checked = b
            .eval(&format!(
                "document.getElementById('eval-b-path-{path}').checked"
            ))
            .await;
        if checked == true {
            b.click(&format!("#eval-b-path-{path}")).await;
        }
    }
    if b.eval("document.getElementById('eval-b-path-fact').checked")
        .await
        == false
    {
        b.click("#eval-b-path-fact").await;
    }
    b.eval("document.getElementById('eval-b-top-k').value = '3'")
        .await;
    b.click("#eval-run").await;
    b.wait_for(
        "document.querySelectorAll('#eval-queries tbody tr').length === 2",
        "the per-question table",
    )
    .await;
    b.screenshot("1-results").await;

    // Both columns: A finds the entries, B cannot.
    let cell = |sel: &str| format!("Number(document.querySelector({}).textContent)", json!(sel));
    let mean_a = b
        .eval(&cell("#eval-means tr[data-metric='nDCG@10'] td.mean-a"))
        .await;
    let mean_b = b
        .eval(&cell("#eval-means tr[data-metric='nDCG@10'] td.mean-b"))
        .await;
    assert!(mean_a.as_f64().unwrap() > 0.5, "A's mean nDCG@10 {mean_a}");
    assert_eq!(mean_b.as_f64(), Some(0.0), "B's mean nDCG@10");
    let ranks = b
        .eval("[...document.querySelectorAll('#eval-queries tbody tr')].map((r) => [r.querySelector('.q-a-rank').textContent, r.querySelector('.q-b-rank').textContent])")
        .await;
    for r in ranks.as_array().unwrap() {
        assert_ne!(r[0], "–", "A ranks the expected entry: {ranks}");
        assert_eq!(r[1], "–", "B does not: {ranks}");
    }
    assert_eq!(
        b.eval("document.querySelectorAll('#eval-queries tr.differs').length")
            .await,
        2,
        "the rows where A and B differ are marked"
    );
    // Questions are shown as text, never parsed as markup.
    assert_eq!(
        b.eval("document.querySelectorAll('#eval-queries i').length")
            .await,
        0
    );
    let shown = b
        .eval("document.querySelector('#eval-queries tbody tr:nth-child(2) td').textContent")
        .await;
    assert_eq!(shown.as_str(), Some(q2.as_str()));

    // "Why not?" from a row B missed: explained under B's settings (the
    // fact path only, which has no FAQ entry).
    b.click("#eval-queries tbody tr:nth-child(1) .eval-whynot")
        .await;
    b.wait_for(
        "document.getElementById('eval-whynot').dataset.state === 'done'",
        "the row's explanation",
    )
    .await;
    let paths = b
        .eval("[...document.querySelectorAll('#eval-whynot .verdicts tbody tr')].map((r) => r.dataset.path)")
        .await;
    assert_eq!(paths, json!(["fact"]));
    let id = b
        .eval("document.querySelector('#eval-whynot .whynot-result').dataset.id")
        .await;
    assert_eq!(id, golden_first_expected);

    b.click("#eval-adopt-b").await;
    b.wait_for(
        "document.getElementById('eval-adopt-result').dataset.adopted === 'b'",
        "B adopted",
    )
    .await;
    let (_, after) = server.call(Method::GET, "/kbs/demo", None).await;
    let r = &after["settings"]["retrieval"];
    assert_eq!(r["paths"], json!(["fact"]), "{after}");
    assert_eq!(r["fusion"]["top_k"], 3, "{after}");
    assert_eq!(
        after["settings"]["answer"], before["settings"]["answer"],
        "the answer settings are kept"
    );
    b.screenshot("2-adopted").await;
    b.assert_no_page_errors();
}
