//! The workbench in a real browser: Debian's headless chromium, driven over
//! the DevTools protocol, against the real server on a loopback port.
//! Screenshots of every step land in target/browser-artifacts/.

mod browser_support;

use browser_support::{small_site, start, start_with, Browser};
use reqwest::Method;
use serde_json::{json, Value};

/// The order stages must appear in (recall and recall_failed share a slot:
/// paths finish in any order).
fn stage_slot(t: &str) -> Option<usize> {
    Some(match t {
        "query_received" => 0,
        "query_analyzed" => 1,
        "recall" | "recall_failed" => 2,
        "fused" => 3,
        "reranked" => 4,
        "context_assembled" => 5,
        "done" => 9,
        _ => return None,
    })
}

fn assert_timeline_in_order(types: &[String]) {
    assert_eq!(
        types.first().map(String::as_str),
        Some("query_received"),
        "{types:?}"
    );
    assert_eq!(types.last().map(String::as_str), Some("done"), "{types:?}");
    for needed in [
        "query_analyzed",
        "recall",
        "fused",
        "reranked",
        "context_assembled",
    ] {
        assert!(
            types.iter().any(|t| t == needed),
            "the timeline shows {needed}: {types:?}"
        );
    }
    let slots: Vec<usize> = types.iter().filter_map(|t| stage_slot(t)).collect();
    assert!(
        slots.windows(2).all(|w| w[0] <= w[1]),
        "stages in pipeline order: {types:?}"
    );
}

async fn timeline(b: &Browser) -> Vec<String> {
    let v = b
        .eval("[...document.querySelectorAll('#timeline .stage')].map(li => li.dataset.type)")
        .await;
    serde_json::from_value(v).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_page_runs_the_demo_then_a_live_query_and_citations_open_their_passage() {
    let server = start(true).await;
    server.seed_demo().await;
    let b = Browser::launch("ask").await;
    b.goto(&format!("{}/", server.url)).await;

    // First screen: a complete pipeline on the demo knowledge base, marked demo.
    b.wait_for("document.body.dataset.ready === '1'", "the demo pipeline")
        .await;
    let ready_ms = b.eval("Number(document.body.dataset.readyMs)").await;
    println!("workbench first screen ready (data-ready) {ready_ms} ms after navigation start");
    b.screenshot("1-demo").await;
    assert_eq!(
        b.eval("document.getElementById('ask-mode').dataset.mode")
            .await,
        "demo"
    );
    assert_eq!(b.eval("document.getElementById('kb').value").await, "demo");
    assert_timeline_in_order(&timeline(&b).await);
    assert_eq!(
        b.eval("document.getElementById('answer').dataset.state")
            .await,
        "done"
    );
    // No embedder in this server: the dense path's failure is shown as a warning, not hidden.
    let warnings = b
        .eval("document.getElementById('ask-warnings').textContent")
        .await;
    assert!(warnings.as_str().unwrap().contains("dense"), "{warnings}");
    assert!(b.eval("document.querySelector('#timeline .stage[data-type=recall_failed]').classList.contains('warn')").await.as_bool().unwrap());

    // A live query.
    b.type_into("#ask-q", "怎么申请退款").await;
    b.click("#ask-submit").await;
    b.wait_for("document.getElementById('ask-mode').dataset.mode === 'live' && document.getElementById('answer').dataset.state === 'done' && document.getElementById('ask-q').value === '怎么申请退款'", "the live query").await;
    let types = timeline(&b).await;
    assert_timeline_in_order(&types);
    // Thumbs up is stored in the query log.
    let query_id = b
        .wait_for(
            "document.querySelector('#feedback')?.dataset.queryId",
            "the feedback buttons",
        )
        .await;
    b.click("#feedback .fb-up").await;
    b.wait_for(
        "document.querySelector('#feedback')?.dataset.state === 'useful'",
        "the feedback recorded",
    )
    .await;
    let (s, logged) = server
        .call(
            Method::GET,
            &format!("/log/{}", query_id.as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(s, 200, "{logged}");
    assert_eq!(logged["feedback"], "useful", "{logged}");
    let first_source_title = b
        .eval("document.querySelector('#sources .src-title').textContent")
        .await;
    assert!(
        first_source_title.as_str().unwrap().contains("退款"),
        "{first_source_title}"
    );
    b.screenshot("2-live").await;

    // A stage's details: the fused stage lists its hits with their contributions.
    b.click("#timeline .stage[data-type=fused]").await;
    b.wait_for("document.querySelector('#stage-detail .stage-detail[data-type=fused] table.contributions')", "fused details").await;
    let rows = b
        .eval("document.querySelectorAll('#stage-detail table.grid > tbody > tr').length")
        .await;
    assert!(rows.as_u64().unwrap() >= 1);
    b.click("#timeline .stage[data-type=query_analyzed]").await;
    b.wait_for("document.querySelector('#stage-detail .stage-detail[data-type=query_analyzed]')?.textContent.includes('退款')", "analysis details with tokens").await;

    // A citation opens its passage with the matched terms highlighted.
    let cite = if b
        .eval("!!document.querySelector('#answer-text .cite')")
        .await
        .as_bool()
        .unwrap()
    {
        "#answer-text .cite"
    } else {
        "#sources .cite"
    };
    let n = b
        .eval(&format!("document.querySelector('{cite}').dataset.n"))
        .await;
    b.click(cite).await;
    b.wait_for(
        "document.querySelector('dialog.passage-dialog[open]')",
        "the passage dialog",
    )
    .await;
    let title = b
        .eval("document.querySelector('dialog.passage-dialog .passage-title').textContent")
        .await;
    let expected = b.eval(&format!("[...document.querySelectorAll('#sources li')].find(li => li.querySelector('.cite').dataset.n === {n}).querySelector('.src-title').textContent")).await;
    assert_eq!(title, expected, "the citation [{n}] opens its own passage");
    let marks = b.eval("[...document.querySelectorAll('dialog.passage-dialog .passage-body mark')].map(m => m.textContent)").await;
    assert!(
        marks.as_array().is_some_and(|m| !m.is_empty()),
        "the passage is highlighted: {marks}"
    );
    assert!(
        marks
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().contains("退款")),
        "{marks}"
    );
    b.screenshot("3-citation").await;
    b.click("dialog.passage-dialog button.close").await;
    b.wait_for(
        "!document.querySelector('dialog.passage-dialog')",
        "the dialog closed",
    )
    .await;

    // A document chunk cited opens inside its document with chunk boundaries.
    b.type_into("#ask-q", "How do I pair the app over Bluetooth?")
        .await;
    b.click("#ask-submit").await;
    b.wait_for("document.getElementById('ask-q').value.includes('Bluetooth') && document.getElementById('answer').dataset.state === 'done' && document.querySelector('#sources .cite')", "the English query").await;
    b.click("#sources .cite").await;
    b.wait_for(
        "document.querySelector('dialog.passage-dialog .document-text .chunk.cited')",
        "the cited chunk in its document",
    )
    .await;
    let chunks = b
        .eval("document.querySelectorAll('dialog.passage-dialog .document-text .chunk').length")
        .await;
    assert!(
        chunks.as_u64().unwrap() >= 2,
        "chunk boundaries are drawn: {chunks}"
    );
    b.screenshot("4-chunk-in-document").await;
    b.click("dialog.passage-dialog button.close").await;

    // Language toggle, remembered across a reload.
    assert_eq!(
        b.eval("document.querySelector('#nav a[data-page=ask]').textContent")
            .await,
        "问答"
    );
    b.click("#lang").await;
    b.wait_for(
        "document.querySelector('#nav a[data-page=ask]').textContent === 'Ask'",
        "English UI",
    )
    .await;
    b.goto(&format!("{}/#ask", server.url)).await;
    b.wait_for("document.body.dataset.ready === '1' && document.querySelector('#nav a[data-page=lab]').textContent === 'Retrieval lab'", "English after reload").await;
    b.screenshot("5-english").await;
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_lab_compares_three_columns_and_a_slider_refuses_with_rank_changes() {
    let server = start(true).await;
    server.seed_demo().await;
    let b = Browser::launch("lab").await;
    b.goto(&format!("{}/#lab", server.url)).await;
    b.wait_for("document.getElementById('lab-q')", "the lab")
        .await;
    b.type_into("#lab-q", "退钱 营业时间").await;
    b.click("#lab-run").await;
    b.wait_for(
        "document.getElementById('page-lab').dataset.state === 'done'",
        "three retrievals",
    )
    .await;
    let cols = b
        .eval("[...document.querySelectorAll('.lab-col')].map(c => c.dataset.column)")
        .await;
    assert_eq!(cols, json!(["vector", "lexical", "hybrid"]));
    // Vector only: no embedder here, shown as a warning in its column.
    let vector = b
        .eval("document.querySelector('#lab-vector .col-status').textContent")
        .await;
    assert!(vector.as_str().unwrap().contains("dense"), "{vector}");
    // Lexical: hits with <mark> highlights of the matched terms.
    let lexical_hits = b
        .eval("document.querySelectorAll('#lab-lexical .hit').length")
        .await
        .as_u64()
        .unwrap();
    assert!(lexical_hits >= 3, "{lexical_hits}");
    let marks = b.eval("[...document.querySelectorAll('#lab-lexical .hit .snippet mark')].map(m => m.textContent)").await;
    assert!(
        marks
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "营业时间" || m == "退钱" || m == "营业"),
        "{marks}"
    );
    assert!(b
        .eval("!document.getElementById('lab-emptylex')")
        .await
        .as_bool()
        .unwrap());
    // The query's tokens.
    let tokens = b
        .eval("[...document.querySelectorAll('#lab-tokens .token')].map(t => t.textContent)")
        .await;
    assert!(
        tokens.as_array().unwrap().iter().any(|t| t == "营业时间"),
        "{tokens}"
    );
    // Hybrid column: one hit's explanation.
    b.click("#lab-hybrid .hit summary").await;
    b.wait_for(
        "document.querySelector('#lab-hybrid .hit details[open] table.contributions tbody tr')",
        "a hit's explanation",
    )
    .await;
    b.screenshot("1-three-columns").await;

    // Weight bm25 to 0 with the keyboard: the cached candidates are re-fused and ranks move.
    let before: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#lab-lexical .hit')].map(h => h.dataset.id)")
            .await,
    )
    .unwrap();
    b.click("#lab-w-bm25").await;
    b.press("Home").await;
    b.wait_for("document.getElementById('lab-w-bm25').value === '0' && Number(document.getElementById('lab-lexical').dataset.refuseCount || 0) >= 1 && Number(document.getElementById('lab-hybrid').dataset.refuseCount || 0) >= 1", "re-fusion").await;
    let after: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#lab-lexical .hit')].map(h => h.dataset.id)")
            .await,
    )
    .unwrap();
    assert_ne!(before, after, "the lexical ranking changed without bm25");
    let deltas = b
        .eval("[...document.querySelectorAll('#lab-lexical .hit')].map(h => h.dataset.delta)")
        .await;
    assert!(
        deltas.as_array().unwrap().iter().all(|d| d.is_string()),
        "every re-fused hit shows its rank change: {deltas}"
    );
    assert!(
        deltas
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "up" || d == "down" || d == "new"),
        "{deltas}"
    );
    // The bm25 contribution now carries weight 0.
    let weights = b.eval("[...document.querySelectorAll('#lab-lexical .hit table.contributions tbody tr')].filter(tr => tr.cells[0].textContent === 'bm25').map(tr => tr.cells[3].textContent)").await;
    assert!(
        weights
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w == "0" || w == "0.00"),
        "{weights}"
    );
    b.screenshot("2-refused").await;

    // A query no lexical path can match is flagged loudly.
    b.type_into("#lab-q", "ꙮꙮꙮ").await;
    b.click("#lab-run").await;
    b.wait_for("document.getElementById('page-lab').dataset.state === 'done' && document.getElementById('lab-q').value === 'ꙮꙮꙮ'", "the second retrieval").await;
    b.wait_for(
        "document.getElementById('lab-emptylex')",
        "the empty-lexical flag",
    )
    .await;
    b.screenshot("3-empty-lexical").await;
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_lab_explains_why_an_expected_entry_was_not_returned() {
    let server = start(true).await;
    server.seed_demo().await;
    let b = Browser::launch("lab-why-not").await;
    b.goto(&format!("{}/#lab", server.url)).await;
    b.wait_for("document.getElementById('lab-q')", "the lab")
        .await;
    b.type_into("#lab-q", "营业时间").await;
    b.click("#lab-run").await;
    b.wait_for(
        "document.getElementById('page-lab').dataset.state === 'done'",
        "three retrievals",
    )
    .await;
    // The lexical column's first hit, explained from its button: BM25
    // returned it at the rank the column shows.
    let first = b
        .eval("document.querySelector('#lab-lexical .hit').dataset.id")
        .await;
    b.click("#lab-lexical .hit .whynot-ask").await;
    b.wait_for(
        "document.getElementById('lab-whynot').dataset.state === 'done'",
        "the explanation",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelector('.whynot-result').dataset.id")
            .await,
        first
    );
    let bm25 = b
        .eval("document.querySelector('.verdicts tr[data-path=bm25] .verdict').dataset.status")
        .await;
    assert_eq!(bm25, json!("returned"));
    // An entry the query does not match, typed in: BM25 names it no match,
    // with the query terms the entry lacks.
    let (_, faqs) = server
        .call(reqwest::Method::GET, "/kbs/demo/faqs", None)
        .await;
    let other = faqs["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            let text = format!("{}{}", f["question"], f["answer"]);
            !text.contains("营业") && !text.contains("时间")
        })
        .expect("a demo entry without the query's terms");
    let id = format!("faq:{}", other["id"].as_str().unwrap());
    b.eval("document.getElementById('lab-whynot-id').value = ''")
        .await;
    b.type_into("#lab-whynot-id", &id).await;
    b.click("#lab-whynot-run").await;
    b.wait_for(
        &format!("document.getElementById('lab-whynot').dataset.state === 'done' && document.querySelector('.whynot-result').dataset.id === {}", json!(id)),
        "the typed entry's explanation",
    )
    .await;
    let bm25 = b
        .eval("document.querySelector('.verdicts tr[data-path=bm25]').textContent")
        .await;
    let text = bm25.as_str().unwrap();
    assert!(text.contains("不匹配") && text.contains("营业"), "{text}");
    // Its title renders as text.
    let title = b
        .eval("document.querySelector('.whynot-result h3').textContent")
        .await;
    assert_eq!(title, other["question"]);
    b.screenshot("1-no-match").await;
    // A made-up id is an error in the panel, not a broken page.
    b.eval("document.getElementById('lab-whynot-id').value = ''")
        .await;
    b.type_into("#lab-whynot-id", "faq:0190b5f4-0000-7000-8000-000000000000")
        .await;
    b.click("#lab-whynot-run").await;
    b.wait_for(
        "document.getElementById('lab-whynot').dataset.state === 'error'",
        "the not-found error",
    )
    .await;
    b.screenshot("2-not-found").await;
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_page_edits_disables_and_approves_an_faq_entry_through_the_api() {
    let server = start(true).await;
    server.seed_demo().await;
    let (_, faqs) = server.call(Method::GET, "/kbs/demo/faqs", None).await;
    let entry = faqs["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["question"] == "怎么申请退款？")
        .unwrap()
        .clone();
    let id = entry["id"].as_str().unwrap().to_owned();
    assert_eq!(entry["edited"], false);

    let b = Browser::launch("corpus").await;
    b.goto(&format!("{}/#corpus", server.url)).await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-faq]')",
        "the FAQ table",
    )
    .await;
    // Paginated: 47 entries, 20 per page.
    assert_eq!(
        b.eval("document.querySelectorAll('#corpus-body tbody tr[data-faq]').length")
            .await,
        20
    );
    b.type_into("#faq-filter", "申请退款").await;
    let row = format!("#corpus-body tr[data-faq='{id}']");
    b.wait_for(
        &format!("document.querySelector(\"{row}\")"),
        "the filtered row",
    )
    .await;
    b.click(&format!("{row} .edit-faq")).await;
    b.wait_for(
        "document.getElementById('faq-edit-answer')",
        "the edit form",
    )
    .await;
    let new_answer = "在订单详情页点「申请退款」，我们会在 30 分钟内处理。（已由浏览器测试修改）";
    b.type_into("#faq-edit-answer", new_answer).await;
    b.click("#faq-edit-save").await;
    b.wait_for(
        &format!("document.querySelector(\"{row} .edited\")?.dataset.edited === 'true'"),
        "the edited flag",
    )
    .await;
    b.screenshot("1-edited").await;
    let (s, after) = server
        .call(Method::GET, &format!("/kbs/demo/faqs/{id}"), None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(after["edited"], true);
    assert_eq!(after["answer"], new_answer);

    b.click(&format!("{row} .disable-faq")).await;
    b.wait_for(
        &format!("document.querySelector(\"{row}\")?.dataset.status === 'disabled'"),
        "disabled",
    )
    .await;
    let (_, after) = server
        .call(Method::GET, &format!("/kbs/demo/faqs/{id}"), None)
        .await;
    assert_eq!(after["status"], "disabled");
    b.click(&format!("{row} .approve-faq")).await;
    b.wait_for(
        &format!("document.querySelector(\"{row}\")?.dataset.status === 'approved'"),
        "approved",
    )
    .await;
    let (_, after) = server
        .call(Method::GET, &format!("/kbs/demo/faqs/{id}"), None)
        .await;
    assert_eq!(after["status"], "approved");

    // A new entry, pending until approved.
    b.click("#new-faq").await;
    b.wait_for(
        "document.getElementById('faq-new-question')",
        "the new-entry form",
    )
    .await;
    b.type_into("#faq-new-question", "可以开发票吗？").await;
    b.type_into("#faq-new-answer", "可以，下单时填写抬头即可。")
        .await;
    b.eval("(() => { const s = document.getElementById('faq-new-status'); s.value = 'pending'; s.dispatchEvent(new Event('change')); })()").await;
    b.click("#faq-new-save").await;
    b.wait_for("!document.getElementById('faq-new')", "the form closed")
        .await;
    b.type_into("#faq-filter", "开发票").await;
    b.wait_for("[...document.querySelectorAll('#corpus-body tr[data-faq]')].some(r => r.textContent.includes('可以开发票吗？') && r.dataset.status === 'pending')", "the new entry").await;
    let (_, faqs) = server.call(Method::GET, "/kbs/demo/faqs", None).await;
    assert!(faqs["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["question"] == "可以开发票吗？" && f["status"] == "pending"));

    // Documents: view one with its chunk boundaries.
    b.click("#corpus-tab-docs").await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-doc] .view-doc')",
        "the documents table",
    )
    .await;
    b.click("#corpus-body tr[data-doc] .view-doc").await;
    b.wait_for(
        "document.querySelectorAll('dialog.doc-dialog .document-text .chunk').length >= 1",
        "the document view",
    )
    .await;
    b.screenshot("2-document").await;
    b.click("dialog.doc-dialog button.close").await;

    // Deleting a knowledge base asks for its name first.
    let (s, _) = server
        .call(Method::POST, "/kbs", Some(json!({ "name": "scratch" })))
        .await;
    assert_eq!(s, 201);
    b.goto(&format!("{}/#corpus", server.url)).await;
    b.wait_for(
        "document.querySelector(\"#corpus-kbs tr[data-kb='scratch'] .del-kb\")",
        "the scratch row",
    )
    .await;
    b.click("#corpus-kbs tr[data-kb='scratch'] .del-kb").await;
    b.wait_for(
        "document.querySelector('dialog.confirm[open] .confirm-ok')?.disabled === true",
        "the confirmation",
    )
    .await;
    b.type_into("dialog.confirm .confirm-input", "scratch")
        .await;
    b.click("dialog.confirm .confirm-ok").await;
    b.wait_for(
        "!document.querySelector(\"#corpus-kbs tr[data-kb='scratch']\")",
        "the deleted row",
    )
    .await;
    let (s, _) = server.call(Method::GET, "/kbs/scratch", None).await;
    assert_eq!(s, 404);
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_html_in_documents_renders_as_text_and_never_runs() {
    let server = start(true).await;
    server.seed_demo().await;
    let hostile = "# Hostile <script>window.__xss = 1</script> notice\n\n\
                   Zebracorn policy: <img src=x onerror=\"window.__xss = 2\"> and <script>window.__xss = 3</script> stay text.\n\n\
                   ## Second\n\nMore zebracorn <b onmouseover=\"window.__xss = 4\">bold</b> text.\n";
    // Plain text keeps the markup verbatim (Markdown conversion may drop tags).
    let text = server
        .upload(
            "demo",
            vec![("hostile.txt".into(), hostile.as_bytes().to_vec())],
        )
        .await;
    assert!(text.contains("event: indexed"), "{text}");
    let (_, docs) = server.call(Method::GET, "/kbs/demo/documents", None).await;
    let doc = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["source"] == "hostile.txt")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, full) = server
        .call(Method::GET, &format!("/kbs/demo/documents/{doc}"), None)
        .await;
    let stored = full["document"]["text"].as_str().unwrap();
    assert!(
        stored.contains("<img src=x onerror=") && stored.contains("<b onmouseover="),
        "the stored text keeps the markup: {stored}"
    );
    let (s, _) = server
        .call(Method::POST, "/kbs/demo/faqs", Some(json!({ "question": "<img src=x onerror=\"window.__xss = 5\"> zebracorn?", "answer": "<script>window.__xss = 6</script>" })))
        .await;
    assert_eq!(s, 201);

    let b = Browser::launch("xss").await;
    b.goto(&format!("{}/", server.url)).await;
    b.wait_for("document.body.dataset.ready === '1'", "the first screen")
        .await;
    b.type_into("#ask-q", "zebracorn policy").await;
    b.click("#ask-submit").await;
    b.wait_for("document.getElementById('ask-q').value === 'zebracorn policy' && document.getElementById('answer').dataset.state === 'done' && document.querySelectorAll('#sources li').length >= 2", "the hostile sources").await;
    let sources = b
        .eval("document.getElementById('sources').textContent")
        .await;
    assert!(
        sources.as_str().unwrap().contains("<img src=x onerror="),
        "markup shown as text: {sources}"
    );
    assert!(
        sources.as_str().unwrap().contains("<script>window.__xss"),
        "{sources}"
    );
    // Open each source: passage and whole document.
    let n = b
        .eval("document.querySelectorAll('#sources .cite').length")
        .await
        .as_u64()
        .unwrap();
    for i in 0..n {
        b.click(&format!("#sources li:nth-child({}) .cite", i + 1))
            .await;
        b.wait_for(
            "document.querySelector('dialog.passage-dialog[open]')",
            "a passage",
        )
        .await;
        b.screenshot(&format!("1-passage-{i}")).await;
        b.click("dialog.passage-dialog button.close").await;
        b.wait_for("!document.querySelector('dialog.passage-dialog')", "closed")
            .await;
    }
    // The lab and the corpus render the same texts.
    b.goto(&format!("{}/#lab", server.url)).await;
    b.wait_for("document.getElementById('lab-q')", "the lab")
        .await;
    b.type_into("#lab-q", "zebracorn").await;
    b.click("#lab-run").await;
    b.wait_for("document.getElementById('page-lab').dataset.state === 'done' && document.querySelectorAll('#lab-lexical .hit').length >= 2", "lab hits").await;
    b.goto(&format!("{}/#corpus", server.url)).await;
    b.type_into("#faq-filter", "zebracorn").await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-faq]')?.textContent.includes('<img src=x')",
        "the hostile FAQ row as text",
    )
    .await;
    b.click("#corpus-tab-docs").await;
    b.type_into("#doc-filter", "hostile.txt").await;
    b.click("#corpus-body tr[data-doc] .view-doc").await;
    b.wait_for("document.querySelector('dialog.doc-dialog .document-text')?.textContent.includes('<b onmouseover=')", "the hostile document as text").await;
    b.screenshot("2-document").await;

    let ran = b.eval("typeof window.__xss").await;
    assert_eq!(ran, "undefined", "no hostile script or handler ran");
    let injected = b.eval("document.querySelectorAll('main img, main script, main b, dialog img, dialog script, dialog b').length").await;
    assert_eq!(injected, 0, "no element was created from document text");
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_server_logs_in_with_a_session_cookie_and_refuses_writes_without_the_csrf_token() {
    let server = start(false).await;
    server.seed_demo().await;
    let rw = server.key("read_write").await;
    let b = Browser::launch("login").await;
    b.goto(&format!("{}/", server.url)).await;
    b.wait_for(
        "document.body.dataset.ready === 'login' && !document.getElementById('login').hidden",
        "the login form",
    )
    .await;
    b.screenshot("1-login").await;
    b.type_into("#login-key", "rsk_wrong").await;
    b.click("#login-form button[type=submit]").await;
    b.wait_for(
        "document.getElementById('login-error').textContent.length > 0",
        "the refusal",
    )
    .await;
    b.type_into("#login-key", &rw).await;
    b.click("#login-form button[type=submit]").await;
    b.wait_for(
        "document.body.dataset.ready === '1' && document.body.dataset.mode === 'session'",
        "the logged-in first screen",
    )
    .await;
    b.screenshot("2-logged-in").await;

    // The session cookie: HttpOnly (invisible to scripts), SameSite=Strict; the key itself is nowhere.
    let cookies = b.cookies(&server.url).await;
    let session = cookies
        .iter()
        .find(|c| c["name"] == "ragscope_session")
        .expect("the session cookie is set");
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");
    assert!(!session["value"].as_str().unwrap().contains(&rw));
    assert_eq!(
        b.eval("document.cookie.includes('ragscope_session')").await,
        false
    );
    assert_eq!(
        b.eval(&format!(
            "document.documentElement.outerHTML.includes({})",
            json!(rw)
        ))
        .await,
        false
    );

    // Writes with the cookie but without the CSRF token are refused; with it they pass.
    let without = b
        .eval("fetch('/api/v1/kbs', {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({name: 'csrf-probe'})}).then(async r => [r.status, (await r.json()).code])")
        .await;
    assert_eq!(without, json!([403, "csrf_failed"]));
    let wrong = b
        .eval("fetch('/api/v1/kbs', {method: 'POST', headers: {'content-type': 'application/json', 'x-csrf-token': 'x'.repeat(64)}, body: JSON.stringify({name: 'csrf-probe'})}).then(r => r.status)")
        .await;
    assert_eq!(wrong, 403);
    let (s, _) = server.call(Method::GET, "/kbs/csrf-probe", None).await;
    assert_eq!(s, 404, "the refused write did nothing");
    let with = b
        .eval("fetch('/api/v1/session').then(r => r.json()).then(s => fetch('/api/v1/kbs', {method: 'POST', headers: {'content-type': 'application/json', 'x-csrf-token': s.csrf_token}, body: JSON.stringify({name: 'csrf-probe'})})).then(r => r.status)")
        .await;
    assert_eq!(with, 201);
    // Reads need no token.
    assert_eq!(
        b.eval("fetch('/api/v1/kbs').then(r => r.status)").await,
        200
    );
    // A request without the cookie (another site's page cannot send it: SameSite=Strict) is not authenticated.
    let res = server
        .client
        .post(server.api("/kbs"))
        .json(&json!({ "name": "nope" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);

    // The UI itself edits through the session (the token is sent for it).
    b.goto(&format!("{}/#corpus", server.url)).await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-faq] .disable-faq')",
        "editing controls",
    )
    .await;
    let id = b
        .eval("document.querySelector('#corpus-body tr[data-faq]').dataset.faq")
        .await;
    b.click("#corpus-body tr[data-faq] .disable-faq").await;
    b.wait_for(&format!("document.querySelector(\"#corpus-body tr[data-faq='{}']\")?.dataset.status === 'disabled'", id.as_str().unwrap()), "disabled through the session").await;

    // Revoking the key ends its session: the next request brings the login back.
    let (_, keys) = server.call(Method::GET, "/keys", None).await;
    let rw_id = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| rw.starts_with(k["prefix"].as_str().unwrap()) && k["role"] == "read_write")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = server.key("read_write").await;
    let (s, _) = server
        .call(Method::DELETE, &format!("/keys/{rw_id}"), None)
        .await;
    assert_eq!(s, 204);
    b.click("#corpus-tab-docs").await;
    b.wait_for(
        "document.body.dataset.ready === 'login' && !document.getElementById('login').hidden",
        "the login after revocation",
    )
    .await;

    // Logout ends the session on the server.
    b.type_into("#login-key", &second).await;
    b.click("#login-form button[type=submit]").await;
    b.wait_for(
        "document.body.dataset.ready === '1' && document.body.dataset.mode === 'session'",
        "logged in again",
    )
    .await;
    b.click("#logout").await;
    b.wait_for(
        "document.body.dataset.ready === 'login'",
        "back at the login",
    )
    .await;
    assert_eq!(
        b.eval("fetch('/api/v1/kbs').then(r => r.status)").await,
        401
    );
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_key_sees_no_editing_controls() {
    let server = start(false).await;
    server.seed_demo().await;
    let ro = server.key("read_only").await;
    let b = Browser::launch("readonly").await;
    b.goto(&format!("{}/", server.url)).await;
    b.wait_for("document.body.dataset.ready === 'login'", "the login form")
        .await;
    b.type_into("#login-key", &ro).await;
    b.click("#login-form button[type=submit]").await;
    b.wait_for("document.body.dataset.ready === '1'", "the first screen")
        .await;
    assert_eq!(b.eval("document.body.dataset.canWrite").await, "0");
    b.goto(&format!("{}/#corpus", server.url)).await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-faq]')",
        "the FAQ table",
    )
    .await;
    let controls = "document.querySelectorAll('.edit-faq, .approve-faq, .disable-faq, .del-faq, .del-kb, .del-doc, #new-kb').length";
    assert_eq!(b.eval(controls).await, 0);
    b.click("#corpus-tab-docs").await;
    b.wait_for(
        "document.querySelector('#corpus-body tr[data-doc]')",
        "the documents",
    )
    .await;
    assert_eq!(b.eval(controls).await, 0);
    b.click("#corpus-tab-lexicon").await;
    b.wait_for("document.getElementById('synonyms')", "the lexicon")
        .await;
    assert_eq!(
        b.eval("document.querySelectorAll('#syn-terms, #dict-word').length")
            .await,
        0
    );
    b.goto(&format!("{}/#ingest", server.url)).await;
    b.wait_for(
        "!document.getElementById('page-ingest').hidden",
        "the ingest page",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelectorAll('#dropzone, #ingest-files').length")
            .await,
        0
    );
    b.screenshot("1-readonly").await;
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_page_uploads_several_files_and_shows_each_files_progress() {
    let server = start(true).await;
    let (s, _) = server
        .call(Method::POST, "/kbs", Some(json!({ "name": "fresh" })))
        .await;
    assert_eq!(s, 201);
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("guide.md");
    std::fs::write(&good, "# 会员指南\n\n会员每月可以领取两张优惠券。\n\n## Points\n\nEvery order earns loyalty points.\n").unwrap();
    let faq = dir.path().join("faq.jsonl");
    std::fs::write(
        &faq,
        "{\"question\":\"会员怎么注册？\",\"answer\":\"在小程序里点「我的」注册。\"}\n",
    )
    .unwrap();
    let bad = dir.path().join("table.xlsx");
    std::fs::write(&bad, b"not supported").unwrap();

    let b = Browser::launch("ingest").await;
    b.goto(&format!("{}/#ingest", server.url)).await;
    b.wait_for("document.getElementById('ingest-files')", "the drop zone")
        .await;
    b.set_files("#ingest-files", &[good, faq, bad]).await;
    b.wait_for(
        "document.querySelector('.ingest-run')?.dataset.state === 'done'",
        "the upload",
    )
    .await;
    let stages: Value = b.eval("Object.fromEntries([...document.querySelectorAll('.ingest-run tr[data-file]')].map(r => [r.dataset.file, r.dataset.stage]))").await;
    assert_eq!(
        stages,
        json!({ "guide.md": "indexed", "faq.jsonl": "indexed", "table.xlsx": "failed" })
    );
    let summary = b
        .eval("document.querySelector('.ingest-run .summary').textContent")
        .await;
    assert!(
        summary.as_str().unwrap().contains("indexed 2")
            && summary.as_str().unwrap().contains("failed 1"),
        "{summary}"
    );
    b.screenshot("1-uploaded").await;
    // The same zone takes a real drag-and-drop (files dragged from outside the page).
    let dropped = dir.path().join("notes.txt");
    std::fs::write(&dropped, "Delivery notes: riders call on arrival.").unwrap();
    b.drop_files("#dropzone", &[dropped]).await;
    b.wait_for("document.querySelectorAll('.ingest-run').length === 2 && document.querySelector('.ingest-run').dataset.state === 'done'", "the dropped upload").await;
    assert_eq!(
        b.eval("document.querySelector('.ingest-run tr[data-file]').dataset.stage")
            .await,
        "indexed"
    );
    let (_, docs) = server.call(Method::GET, "/kbs/fresh/documents", None).await;
    assert_eq!(docs["documents"].as_array().unwrap().len(), 2);
    let (_, faqs) = server.call(Method::GET, "/kbs/fresh/faqs", None).await;
    assert_eq!(faqs["faqs"].as_array().unwrap().len(), 1);
    assert_eq!(faqs["total"], 1);

    // A web page with its same-site links: added, synced, each page's outcome shown.
    let site = small_site().await;
    b.type_into("#source-url", &format!("{site}/")).await;
    b.eval("(() => { const s = document.getElementById('source-depth'); s.value = '1'; })()")
        .await;
    b.click("#source-add").await;
    b.wait_for(
        "document.querySelector('#source-result .ingest-run')?.dataset.state === 'synced'",
        "the URL sync",
    )
    .await;
    let outcomes: Value = b.eval("[...document.querySelectorAll('#source-result tr[data-url]')].map(r => r.dataset.outcome)").await;
    assert_eq!(outcomes, json!(["indexed", "indexed"]));
    b.wait_for(
        "document.querySelector('#source-list tr[data-status=\"synced\"]')",
        "the source in the list",
    )
    .await;
    // Syncing again changes nothing.
    b.click("#source-list .source-sync").await;
    b.wait_for(
        "[...document.querySelectorAll('#source-result tr[data-url]')].map(r => r.dataset.outcome).join() === 'unchanged,unchanged'",
        "the second sync",
    )
    .await;
    b.screenshot("2-url-source").await;
    let (_, docs) = server.call(Method::GET, "/kbs/fresh/documents", None).await;
    assert_eq!(docs["documents"].as_array().unwrap().len(), 4);
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_map_projects_the_vectors_and_places_a_query_with_its_nearest_passages() {
    let server = start_with(true, true).await;
    server.seed_demo().await;
    let (s, map) = server.call(Method::GET, "/kbs/demo/map", None).await;
    assert_eq!(s, 200, "{map}");
    let n = map["points"].as_array().unwrap().len();
    assert!(n > 100, "every passage with a vector is on the map: {n}");
    assert_eq!(
        map["method"], "umap",
        "a knowledge base this size gets a UMAP layout"
    );
    let b = Browser::launch("map").await;
    b.goto(&format!("{}/#map", server.url)).await;
    b.wait_for(
        &format!("document.querySelectorAll('#map-svg circle.pt').length === {n}"),
        "the points",
    )
    .await;
    let groups = b.eval("new Set([...document.querySelectorAll('#map-svg circle.pt')].map(c => c.dataset.group)).size").await;
    assert!(
        groups.as_u64().unwrap() >= 10,
        "coloured by document: {groups}"
    );
    b.type_into("#map-q", "pair the app over Bluetooth").await;
    b.click("#map-run").await;
    b.wait_for("document.getElementById('map-star') && document.querySelectorAll('#map-svg line.nn').length === 5", "the query star").await;
    let nearest = b.eval("[...document.querySelectorAll('#map-nearest tbody tr')].map(r => r.cells[0].textContent)").await;
    assert!(
        nearest
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().unwrap().contains("Pairing")
                || t.as_str().unwrap().contains("Bluetooth")),
        "{nearest}"
    );
    // Hover shows the passage's title.
    let (x, y) = {
        let v = b.eval("(() => { const r = document.querySelector('#map-svg circle.near').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()").await;
        (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
    };
    b.cmd(
        "Input.dispatchMouseEvent",
        json!({ "type": "mouseMoved", "x": x, "y": y }),
    )
    .await;
    b.wait_for(
        "document.getElementById('map-hover').textContent.length > 0",
        "the hover text",
    )
    .await;
    b.eval("(() => { const s = document.getElementById('map-colour'); s.value = 'kind'; s.dispatchEvent(new Event('change')); })()").await;
    b.wait_for("new Set([...document.querySelectorAll('#map-svg circle.pt')].map(c => c.dataset.group)).size <= 3", "coloured by kind").await;
    b.eval("(() => { const s = document.getElementById('map-colour'); s.value = 'language'; s.dispatchEvent(new Event('change')); })()").await;
    b.wait_for(
        "(() => { const g = new Set([...document.querySelectorAll('#map-svg circle.pt')].map(c => c.dataset.group)); return g.has('zh') && g.has('en') && [...g].every(x => ['zh', 'en', 'mixed', 'other'].includes(x)); })()",
        "coloured by language (the demo knowledge base holds Chinese and English passages)",
    )
    .await;
    b.screenshot("1-map").await;
    // A change to the knowledge base recomputes the projection.
    let text = server
        .upload(
            "demo",
            vec![(
                "extra.md".into(),
                "# Extra\n\nA brand new passage about zebracorn desks.\n"
                    .as_bytes()
                    .to_vec(),
            )],
        )
        .await;
    assert!(text.contains("event: indexed"));
    let (_, after) = server.call(Method::GET, "/kbs/demo/map", None).await;
    assert_eq!(after["points"].as_array().unwrap().len(), n + 1);
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insights_turn_a_missed_question_into_an_faq_entry_and_replay_a_logged_query() {
    let server = start(true).await;
    server.seed_demo().await;
    let (s, hit) = server
        .call(
            Method::POST,
            "/kbs/demo/query/sync",
            Some(json!({ "query": "怎么申请退款" })),
        )
        .await;
    assert_eq!(s, 200, "{hit}");
    let miss_q = "xylophone zeppelin quasar";
    let (s, miss) = server
        .call(
            Method::POST,
            "/kbs/demo/query/sync",
            Some(json!({ "query": miss_q })),
        )
        .await;
    assert_eq!(s, 200, "{miss}");
    let answered = miss["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "answered")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        answered["kb_miss"], true,
        "precondition: the question is a miss: {answered}"
    );

    let b = Browser::launch("insights").await;
    b.goto(&format!("{}/#insights", server.url)).await;
    b.wait_for(
        "document.getElementById('page-insights').dataset.state === 'done'",
        "the insights",
    )
    .await;
    assert_eq!(
        b.eval("document.querySelector('#fig-queries .fig-value').textContent")
            .await,
        "2"
    );
    assert_eq!(
        b.eval("document.querySelector('#fig-hitrate .fig-value').textContent")
            .await,
        "50.0%"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#insights-misses tbody tr').length")
            .await,
        1
    );
    // Today's bar holds both questions; the miss threshold is drawn on the score histogram.
    assert_eq!(b.eval("[...document.querySelectorAll('#ins-by-day .bar-slot')].map(s => Number(s.dataset.queries)).reduce((a, b) => a + b, 0)").await, 2);
    assert_eq!(
        b.eval("document.querySelector('#ins-fused-hist .threshold').dataset.threshold")
            .await,
        "0.05"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#insights-figures tr[data-query]').length")
            .await,
        2
    );
    // The demo's synonym groups did not fire for these two questions, except the refund one.
    let dead = b
        .eval("Number(document.querySelector('#fig-deadsyn .fig-value').textContent)")
        .await;
    let (_, lex) = server.call(Method::GET, "/kbs/demo/lexicon", None).await;
    let groups = lex["synonyms"].as_array().unwrap().len() as u64;
    assert!(
        dead.as_u64().unwrap() < groups,
        "the refund question fired a group: {dead} of {groups}"
    );
    b.screenshot("1-insights").await;

    // The miss becomes an approved FAQ entry in one step.
    b.click("#insights-misses .to-faq").await;
    b.wait_for(
        "document.getElementById('miss-question')?.value",
        "the prefilled form",
    )
    .await;
    assert_eq!(
        b.eval("document.getElementById('miss-question').value")
            .await,
        miss_q
    );
    b.type_into("#miss-answer", "本店不提供航天信息，只做川菜外卖。")
        .await;
    b.click("#miss-save").await;
    b.wait_for(
        "document.querySelector('#insights-misses tr[data-faq] .done-faq')",
        "the created entry",
    )
    .await;
    let (_, faqs) = server.call(Method::GET, "/kbs/demo/faqs", None).await;
    let made = faqs["faqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["question"] == miss_q)
        .expect("the FAQ entry exists");
    assert_eq!(made["status"], "approved");
    assert_eq!(made["answer"], "本店不提供航天信息，只做川菜外卖。");

    // Replaying the missed question now finds the new entry: the diff shows it as new.
    let row = b.eval(&format!("[...document.querySelectorAll('#insights-log tbody tr')].findIndex(r => r.cells[1].textContent === {}) + 1", json!(miss_q))).await;
    b.click(&format!(
        "#insights-log tbody tr:nth-child({}) .replay",
        row
    ))
    .await;
    b.wait_for(
        "document.querySelector('dialog.replay-dialog')?.dataset.state === 'done'",
        "the replay",
    )
    .await;
    let first = b
        .eval("document.querySelector('dialog.replay-dialog tbody tr')?.dataset.move")
        .await;
    assert_eq!(first, "new", "the new entry enters the ranking");
    b.screenshot("2-replay").await;
    b.click("dialog.replay-dialog button.close").await;

    // "Open in Ask" runs the logged question live.
    b.click(&format!(
        "#insights-log tbody tr:nth-child({}) .open-ask",
        row
    ))
    .await;
    b.wait_for(&format!("document.getElementById('ask-q')?.value === {} && document.getElementById('answer').dataset.state === 'done' && document.getElementById('ask-mode').dataset.mode === 'live'", json!(miss_q)), "the question in Ask").await;
    b.assert_no_page_errors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_page_tests_the_embedder_and_saves_validated_knowledge_base_settings() {
    let server = start_with(true, true).await;
    server.seed_demo().await;
    let b = Browser::launch("settings").await;
    b.goto(&format!("{}/#settings", server.url)).await;
    b.wait_for(
        "document.getElementById('embedder-info')?.textContent.includes('test-hash-bigram-64')",
        "the embedder",
    )
    .await;
    b.click("#test-embedder").await;
    b.wait_for(
        "document.getElementById('embedder-test-result').dataset.ok === 'true'",
        "the connection test",
    )
    .await;
    // No LLM in this server: the test says so instead of failing silently.
    b.click("#test-llm").await;
    b.wait_for(
        "document.getElementById('llm-test-result').dataset.ok === 'false'",
        "the LLM connection test",
    )
    .await;
    let said = b
        .eval("document.getElementById('llm-test-result').textContent")
        .await;
    assert!(
        said.as_str().unwrap().contains("no LLM is configured"),
        "{said}"
    );
    b.wait_for(
        "document.getElementById('settings-json')?.value.includes('\"fusion\"')",
        "the settings",
    )
    .await;
    // An invalid value is refused by the server and shown.
    let edit = |k: &str| {
        format!("(() => {{ const t = document.getElementById('settings-json'); const s = JSON.parse(t.value); s.retrieval.fusion.k = {k}; t.value = JSON.stringify(s, null, 2); }})()")
    };
    b.eval(&edit("-5")).await;
    b.click("#settings-save").await;
    b.wait_for(
        "document.querySelector('#settings-result .notice.error')",
        "the refusal",
    )
    .await;
    let (_, kb) = server.call(Method::GET, "/kbs/demo", None).await;
    assert_eq!(kb["settings"]["retrieval"]["fusion"]["k"], 60.0);
    // The form: an out-of-range threshold is refused (by the page, and by the
    // server when the page is bypassed), a valid one saved.
    b.eval("(() => { const i = document.getElementById('set-min-fused'); i.value = '7'; })()")
        .await;
    assert_eq!(
        b.eval("document.getElementById('set-min-fused').validity.valid")
            .await,
        false
    );
    b.eval("document.getElementById('answer-form').dispatchEvent(new Event('submit', { cancelable: true }))").await;
    b.wait_for("document.querySelector('#answer-form-result .notice.error')?.textContent.includes('min_fused')", "the server's refusal").await;
    b.eval("(() => { const i = document.getElementById('set-min-fused'); i.value = '0.2'; document.getElementById('set-profile').value = 'faq'; })()").await;
    b.click("#answer-save").await;
    b.wait_for(
        "document.getElementById('answer-form-result').dataset.saved",
        "the form saved",
    )
    .await;
    let (_, kb) = server.call(Method::GET, "/kbs/demo", None).await;
    assert_eq!(kb["settings"]["answer"]["min_fused"], 0.2);
    assert_eq!(kb["settings"]["answer"]["profile"], "faq");
    assert_eq!(
        kb["settings"]["retrieval"]["fusion"]["k"], 60.0,
        "fields not on the form are kept"
    );
    b.eval(&edit("30")).await;
    b.click("#settings-save").await;
    b.wait_for(
        "document.getElementById('settings-result').dataset.saved",
        "saved",
    )
    .await;
    let (_, kb) = server.call(Method::GET, "/kbs/demo", None).await;
    assert_eq!(kb["settings"]["retrieval"]["fusion"]["k"], 30.0);
    b.screenshot("1-settings").await;
    b.assert_no_page_errors();
}

/// Not a browser test, but the browser's threat: in open mode a page of
/// another origin must not be able to write (a plain form post needs no CORS
/// preflight), while the workbench's own requests pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_mode_refuses_cross_origin_writes_and_serves_the_page_with_a_strict_policy() {
    let server = start(true).await;
    let host = server.url.trim_start_matches("http://").to_owned();
    let post = |origin: Option<String>| {
        let mut req = server
            .client
            .post(server.api("/kbs"))
            .json(&json!({ "name": "from-somewhere" }));
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send()
    };
    let res = post(Some("http://evil.example".into())).await.unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let res = post(Some(format!("http://{host}"))).await.unwrap();
    assert_eq!(
        res.status().as_u16(),
        201,
        "the workbench's own origin may write"
    );
    let res = server
        .client
        .get(format!("{}/", server.url))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200, "reads are not refused");
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    let res = server
        .client
        .get(format!("{}/assets/nope.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_widget_on_the_mock_shop_answers_with_clickable_citations() {
    let server = start(true).await;
    server.seed_demo().await;
    let b = Browser::launch("widget").await;
    b.goto(&format!("{}/widget-demo", server.url)).await;
    let inside = |js: &str| {
        format!("(() => {{ const r = document.getElementById('ragscope-widget')?.shadowRoot; return r ? ({js}) : null; }})()")
    };
    b.wait_for(&inside("r.querySelector('.toggle')"), "the widget button")
        .await;
    b.eval(&inside("r.querySelector('.toggle').click()")).await;
    b.wait_for(
        &inside("!r.querySelector('.panel').hidden"),
        "the open panel",
    )
    .await;
    b.eval(&inside("r.querySelector('.ask input').focus()"))
        .await;
    b.cmd("Input.insertText", json!({ "text": "怎么申请退款" }))
        .await;
    b.eval(&inside("r.querySelector('.ask').requestSubmit()"))
        .await;
    b.wait_for(&inside("r.querySelector('.msg.bot')?.dataset.state === 'done' && r.querySelectorAll('.msg.bot .cite').length > 0"), "the answer with citations").await;
    let answer = b
        .eval(&inside("r.querySelector('.msg.bot').textContent"))
        .await;
    assert!(answer.as_str().unwrap().contains("退款"), "{answer}");
    b.eval(&inside("r.querySelector('.msg.bot .cite').click()"))
        .await;
    b.wait_for(&inside("!r.querySelector('.card').hidden && r.querySelector('.card-body').textContent.length > 0"), "the cited passage").await;
    let title = b
        .eval(&inside("r.querySelector('.card-title').textContent"))
        .await;
    assert!(title.as_str().unwrap().starts_with('['), "{title}");
    b.screenshot("1-widget").await;
    b.assert_no_page_errors();
}
