//! The demo knowledge base answers the queries the issue names: Traditional
//! Chinese, one character, typos in Chinese (homophones) and English.

mod common;
use common::*;

#[test]
fn traditional_single_character_and_typo_queries() {
    let dir = demo_data();
    let data = data_of(&dir);

    // 繁體 query finds the 简体 entry.
    let s = sources(&query_events(&data, "demo", "營業時間是幾點", &[]));
    assert!(s[0].0.contains("营业时间"), "top hit: {:?}", s[0]);

    // One character finds the entries about shrimp.
    let s = sources(&query_events(&data, "demo", "虾", &[]));
    assert!(s.len() >= 3);
    for (title, body) in &s[..3] {
        assert!(
            title.contains('虾') || body.contains('虾'),
            "not about shrimp: {title}"
        );
    }

    // A pinyin-input typo (退宽 for 退款) still finds the refund entries.
    let events = query_events(&data, "demo", "退宽", &[]);
    let fuzzy = events
        .iter()
        .find(|e| e["type"] == "recall" && e["list"]["path"] == "fuzzy")
        .unwrap();
    assert!(
        fuzzy["list"]["notes"].to_string().contains("退宽 → 退款"),
        "{}",
        fuzzy["list"]["notes"]
    );
    let s = sources(&events);
    assert!(
        s[..2]
            .iter()
            .all(|(t, b)| t.contains("退款") || b.contains("退款")),
        "{s:?}"
    );

    // An English typo finds the refund entry.
    let s = sources(&query_events(&data, "demo", "refnd", &[]));
    assert!(
        s[0].0.to_lowercase().contains("refund"),
        "top hit: {:?}",
        s[0]
    );

    // A Chinese homophone typo in a longer question.
    let s = sources(&query_events(&data, "demo", "陪送费多少", &[]));
    assert!(s[0].0.contains("配送费"), "top hit: {:?}", s[0]);
}

#[test]
fn synonyms_and_facts_fire_and_are_reported() {
    let dir = demo_data();
    let data = data_of(&dir);
    let events = query_events(&data, "demo", "怎么退钱", &[]);
    let syn = events
        .iter()
        .find(|e| e["type"] == "recall" && e["list"]["path"] == "synonym")
        .unwrap();
    assert!(
        syn["list"]["notes"].to_string().contains("退钱 → 退款"),
        "{}",
        syn["list"]["notes"]
    );
    assert!(sources(&events)[0].1.contains("退款") || sources(&events)[0].0.contains("退款"));

    let events = query_events(&data, "demo", "你们几点开门", &[]);
    let fact = events
        .iter()
        .find(|e| e["type"] == "recall" && e["list"]["path"] == "fact")
        .unwrap();
    let hits = fact["list"]["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "the opening-hours fact should fire");
    assert!(fact["passages"][0]["title"]
        .as_str()
        .unwrap()
        .contains("营业时间"));
}

#[test]
fn every_stage_is_an_event_and_explanations_add_up() {
    let dir = demo_data();
    let data = data_of(&dir);
    let events = query_events(&data, "demo", "海鲜新鲜吗", &["--top-k", "4"]);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "query_received");
    assert_eq!(kinds[1], "query_analyzed");
    assert_eq!(kinds.iter().filter(|k| **k == "recall").count(), 6);
    assert!(
        kinds.ends_with(&["fused", "reranked", "context_assembled", "done"]),
        "{kinds:?}"
    );
    let fused = events.iter().find(|e| e["type"] == "fused").unwrap();
    let hits = fused["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 4);
    assert!(!fused["dropped"].as_array().unwrap().is_empty());
    for h in hits {
        let sum: f64 = h["contributions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["rrf"].as_f64().unwrap())
            .sum();
        assert!((sum - h["score"].as_f64().unwrap()).abs() < 1e-12);
    }
    let done = events.last().unwrap();
    // Non-overlapping phases in order, and each recall path's own time beside them.
    let phases: Vec<&str> = done["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "prepare",
            "query_analyzed",
            "recall",
            "fused",
            "reranked",
            "context_assembled"
        ]
    );
    assert!(done["paths"].as_array().unwrap().len() >= 5, "{done}");
}

#[test]
fn filters_by_tag_and_expired_entries_are_not_searched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "signals"]);
    ok(c);
    let faq = dir.path().join("signals.jsonl");
    std::fs::write(
        &faq,
        concat!(
            "{\"question\":\"NVDA earnings beat\",\"answer\":\"Buy signal on NVDA after earnings.\",\"tags\":[\"NVDA\"]}\n",
            "{\"question\":\"AMD earnings\",\"answer\":\"Hold signal on AMD; buy later.\",\"tags\":[\"AMD\"]}\n",
            "{\"question\":\"Old NVDA promotion\",\"answer\":\"Buy NVDA at a discount.\",\"tags\":[\"NVDA\"],\"valid_until\":\"2020-01-01\"}\n",
        ),
    )
    .unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "signals"]).arg(&faq);
    ok(c);
    let all = sources(&query_events(
        &data,
        "signals",
        "Should I buy NVDA right now?",
        &[],
    ));
    assert_eq!(all.len(), 2, "the expired entry is not searched: {all:?}");
    let tagged = sources(&query_events(
        &data,
        "signals",
        "Should I buy right now?",
        &["--tag", "nvda"],
    ));
    assert_eq!(tagged.len(), 1);
    assert!(tagged[0].0.contains("NVDA"));
}

#[test]
fn user_dictionary_and_review_flags() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = cmd(&data);
    c.args(["kb", "create", "shop"]);
    ok(c);
    let faq = dir.path().join("faq.jsonl");
    std::fs::write(
        &faq,
        concat!(
            "{\"question\":\"钵钵鸡辣吗\",\"answer\":\"招牌钵钵鸡中辣。\"}\n",
            "{\"question\":\"本周特价\",\"answer\":\"毛血旺八折。\",\"valid_until\":\"2020-01-01\"}\n",
            "{\"question\":\"新品试吃\",\"answer\":\"下周上线。\",\"status\":\"pending\"}\n",
        ),
    )
    .unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "shop"]).arg(&faq);
    ok(c);

    // Before the user word, 钵钵鸡 is split and the query's analysis shows it.
    let tokens = |events: &[serde_json::Value]| -> Vec<String> {
        let a = events
            .iter()
            .find(|e| e["type"] == "query_analyzed")
            .unwrap();
        a["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["kind"] == "han")
            .map(|t| t["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let before = tokens(&query_events(&data, "shop", "钵钵鸡", &[]));
    assert!(!before.contains(&"钵钵鸡".to_string()), "{before:?}");
    let dict = dir.path().join("dict.txt");
    std::fs::write(&dict, "# dishes\n钵钵鸡\t100000\n").unwrap();
    let mut c = cmd(&data);
    c.args(["dict", "--kb", "shop"]).arg(&dict);
    ok(c);
    let events = query_events(&data, "shop", "钵钵鸡", &[]);
    assert_eq!(tokens(&events), ["钵钵鸡"]);
    assert!(sources(&events)[0].0.contains("钵钵鸡"));

    // Expired and pending entries are not searched but are flagged for review.
    assert!(sources(&query_events(&data, "shop", "毛血旺 特价", &[]))
        .iter()
        .all(|(t, _)| !t.contains("特价")));
    let mut c = cmd(&data);
    c.args(["faq", "--kb", "shop", "--review", "--limit", "2", "--json"]);
    let r = ok(c);
    // One object per page; review goes through every page.
    let rows: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .flat_map(|l| {
            let page: serde_json::Value = serde_json::from_str(l).unwrap();
            page["faqs"].as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(rows.len(), 2, "{}", r.stdout);
    assert!(rows
        .iter()
        .any(|r| r["question"] == "本周特价" && r["expired"] == true));
    assert!(rows
        .iter()
        .any(|r| r["question"] == "新品试吃" && r["status"] == "pending"));
}

/// With no LLM configured: a Chinese question over the demo knowledge base
/// gets a Chinese extractive answer with valid citations; a question outside
/// it gets the honest miss.
#[test]
fn ask_answers_in_chinese_with_citations_or_says_it_does_not_know() {
    let dir = demo_data();
    let data = data_of(&dir);
    let ask = |q: &str| -> Vec<serde_json::Value> {
        let mut c = cmd(&data);
        c.args(["ask", "--kb", "demo", "--json", q]);
        ok(c)
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let events = ask("怎么退款？");
    let sources = events
        .iter()
        .find(|e| e["type"] == "context_assembled")
        .unwrap()["sources"]
        .as_array()
        .unwrap()
        .len() as u64;
    let answered = events
        .iter()
        .find(|e| e["type"] == "answered")
        .expect("answered event");
    assert_eq!(answered["generator"], "extractive");
    assert_eq!(answered["language"], "zh");
    assert_eq!(answered["kb_miss"], false);
    assert!(
        answered["text"].as_str().unwrap().contains("抽取式回答"),
        "{answered}"
    );
    let cited = answered["cited"].as_array().unwrap();
    assert!(!cited.is_empty());
    assert!(cited
        .iter()
        .all(|c| (1..=sources).contains(&c["n"].as_u64().unwrap())));
    assert!(
        cited
            .iter()
            .any(|c| c["title"].as_str().unwrap().contains("退款")),
        "{cited:?}"
    );
    assert!(answered["removed_citations"].as_array().unwrap().is_empty());

    let events = ask("火星的大气层由什么组成？");
    let answered = events
        .iter()
        .find(|e| e["type"] == "answered")
        .expect("answered event");
    assert_eq!(answered["kb_miss"], true, "{answered}");
    assert!(
        answered["text"]
            .as_str()
            .unwrap()
            .starts_with("知识库中没有相关信息"),
        "{answered}"
    );
}
