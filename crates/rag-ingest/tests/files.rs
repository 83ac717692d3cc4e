//! Real files built inside the tests (PDF, scanned PDF, DOCX, zip bomb, HTML,
//! GB18030 text, Markdown), extracted and chunked, checked against golden
//! snapshots. Refresh with `UPDATE_EXPECT=1 cargo test -p rag-ingest`.

mod common;

use common::*;
use expect_test::{expect, Expect};
use rag_ingest::{
    chunk, extract, ApproxTokenCounter, ChunkParams, Content, ExtractedDoc, Format, IngestError,
    Limits, TextEncoding,
};

fn doc(name: &str, bytes: &[u8]) -> ExtractedDoc {
    let ex =
        extract(name, None, bytes, &Limits::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(ex.content_hash, rag_ingest::sha256_hex(bytes));
    match ex.content {
        Content::Document(d) => d,
        Content::Faqs { .. } => panic!("{name}: FAQ rows, not a document"),
    }
}

/// Blocks as `kind: text`, one per line.
fn render_blocks(d: &ExtractedDoc) -> String {
    d.blocks
        .iter()
        .map(|b| {
            let kind = match b.kind {
                rag_ingest::BlockKind::Heading { level } => format!("h{level}"),
                k => format!("{k:?}").to_lowercase(),
            };
            format!("{kind}: {}", d.block_text(b).replace('\n', "⏎"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Chunks as `[path] bytes chars tokens | text`, checking every offset.
fn render_chunks(d: &ExtractedDoc, params: ChunkParams) -> String {
    let chunks = chunk(d, &params, &ApproxTokenCounter).unwrap();
    let mut out = Vec::new();
    for c in &chunks {
        assert_eq!(c.text, d.text[c.start..c.end]);
        assert_eq!(c.char_start, d.text[..c.start].chars().count());
        assert_eq!(c.char_end, d.text[..c.end].chars().count());
        out.push(format!(
            "[{}] {}..{} ({}..{}) {}t | {}",
            c.heading_path.join(" › "),
            c.start,
            c.end,
            c.char_start,
            c.char_end,
            c.tokens,
            c.text.replace('\n', "⏎")
        ));
    }
    out.join("\n")
}

fn check(actual: String, expected: Expect) {
    expected.assert_eq(&actual);
}

#[test]
fn pdf_with_chinese_and_english_text_layer() {
    let pages = vec![
        vec![
            PdfLine {
                y: 760.0,
                text: "Standing Desk Manual",
            },
            PdfLine {
                y: 720.0,
                text: "Keep the desk away from water.",
            },
            PdfLine {
                y: 705.0,
                text: "Check the bolts every month.",
            },
            PdfLine {
                y: 660.0,
                text: "升降桌使用说明。请勿超过最大承重。",
            },
        ],
        vec![PdfLine {
            y: 760.0,
            text: "保修期为五年，电机保修两年。",
        }],
    ];
    let bytes = pdf_with_text(&pages);
    assert!(bytes.starts_with(b"%PDF-1.5"));
    let d = doc("manual.pdf", &bytes);
    assert_eq!(d.format, Format::Pdf);
    assert_eq!(d.pages.len(), 2);
    check(
        render_blocks(&d),
        expect![[r#"
            paragraph: Standing Desk Manual
            paragraph: Keep the desk away from water. Check the bolts every month.
            paragraph: 升降桌使用说明。请勿超过最大承重。
            paragraph: 保修期为五年，电机保修两年。"#]],
    );
    assert_eq!(&d.text[d.pages[1].clone()], "保修期为五年，电机保修两年。");
    check(
        render_chunks(
            &d,
            ChunkParams {
                target_tokens: 20,
                overlap_tokens: 0,
                min_split_chars: 0,
            },
        ),
        expect![[r#"
            [] 0..52 (0..52) 13t | Standing Desk Manual⏎⏎Keep the desk away from water.
            [] 53..81 (53..81) 10t | Check the bolts every month.
            [] 83..134 (83..100) 17t | 升降桌使用说明。请勿超过最大承重。
            [] 136..178 (102..116) 14t | 保修期为五年，电机保修两年。"#]],
    );
}

#[test]
fn scanned_pdf_is_reported_not_empty() {
    let bytes = pdf_scanned(3);
    let err = extract("scan.pdf", None, &bytes, &Limits::default()).unwrap_err();
    assert_eq!(err, IngestError::NoTextLayer { pages: 3 });
    assert_eq!(err.code(), "no_text_layer");
}

#[test]
fn corrupt_pdf_is_malformed() {
    let mut bytes = pdf_with_text(&[vec![PdfLine {
        y: 700.0,
        text: "Hello",
    }]]);
    bytes.truncate(bytes.len() / 2);
    let err = extract("broken.pdf", None, &bytes, &Limits::default()).unwrap_err();
    assert_eq!(err.code(), "malformed_file", "{err}");
    let err = extract(
        "garbage.pdf",
        None,
        b"%PDF-1.4\n\x00\x01garbage",
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "malformed_file", "{err}");
}

#[test]
fn docx_with_heading_styles() {
    let body = [
        w_p(Some("Title"), "保修与退换政策"),
        w_p(Some("Heading1"), "退货"),
        w_p(None, "收到商品七天内可以无理由退货。商品需保持完好，配件齐全。"),
        w_p(Some("Heading2"), "运费"),
        w_p(None, "质量问题由我们承担运费；其他情况由买家承担。"),
        String::from(r#"<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>Refunds take 3&#8211;5 days &amp; arrive</w:t></w:r><w:r><w:tab/><w:t>by card.</w:t></w:r></w:p>"#),
        w_p(Some("1"), "Warranty"),
        w_p(None, "Five years on the frame."),
        // Deleted text in tracked changes is not part of the document.
        r#"<w:p><w:r><w:t>Kept</w:t></w:r><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del></w:p>"#.to_owned(),
    ]
    .concat();
    // A localised Word names its style ids by number; styles.xml says what they are.
    let styles = r#"<w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/></w:style><w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>"#;
    let bytes = docx(&body, Some(styles));
    let d = doc("policy.docx", &bytes);
    assert_eq!(d.format, Format::Docx);
    assert_eq!(d.title.as_deref(), Some("保修与退换政策"));
    check(
        render_blocks(&d),
        expect![[r#"
        h1: 保修与退换政策
        h1: 退货
        paragraph: 收到商品七天内可以无理由退货。商品需保持完好，配件齐全。
        h2: 运费
        paragraph: 质量问题由我们承担运费；其他情况由买家承担。
        listitem: - Refunds take 3–5 days & arrive	by card.
        h1: Warranty
        paragraph: Five years on the frame.
        paragraph: Kept"#]],
    );
    check(
        render_chunks(
            &d,
            ChunkParams {
                target_tokens: 30,
                overlap_tokens: 5,
                min_split_chars: 0,
            },
        ),
        expect![[r#"
            [退货] 0..76 (0..28) 24t | 保修与退换政策⏎⏎退货⏎⏎收到商品七天内可以无理由退货。
            [退货] 76..115 (28..41) 13t | 商品需保持完好，配件齐全。
            [退货 › 运费] 117..191 (43..69) 24t | 运费⏎⏎质量问题由我们承担运费；其他情况由买家承担。
            [退货 › 运费] 193..236 (71..112) 14t | - Refunds take 3–5 days & arrive	by card.
            [Warranty] 238..278 (114..154) 11t | Warranty⏎⏎Five years on the frame.⏎⏎Kept"#]],
    );
}

#[test]
fn zip_bomb_named_docx_is_refused() {
    let bytes = docx_bomb(200 << 20);
    assert!(bytes.len() < 1 << 20, "the bomb is small: {}", bytes.len());
    let err = extract("bomb.docx", None, &bytes, &Limits::default()).unwrap_err();
    assert!(
        matches!(&err, IngestError::TooLarge { what, .. } if what.contains("word/document.xml")),
        "{err:?}"
    );
    // A zip that is not a Word document.
    let err = extract(
        "x.docx",
        None,
        &docx_bomb(10),
        &Limits {
            max_decompressed_bytes: 5,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
    // Truncated archive.
    let good = docx(&w_p(None, "hi"), None);
    let err = extract(
        "cut.docx",
        None,
        &good[..good.len() / 2],
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "malformed_file", "{err}");
}

const PAGE: &str = r#"<!DOCTYPE html>
<html lang="zh"><head><meta charset="utf-8"><title>夜宵配送 - 川味小馆</title>
<style>body { font: 14px sans-serif }</style><script>var tracking = "do not index";</script></head>
<body>
<header class="site-header"><a href="/">川味小馆</a><nav><a href="/menu">菜单</a> <a href="/faq">常见问题</a></nav></header>
<nav class="breadcrumbs"><a href="/">首页</a> › <a href="/blog">博客</a></nav>
<main>
<article>
<header><h1>夜宵配送说明</h1><p class="byline">2026-03-01</p></header>
<p>我们每天营业到次日 02:00，最晚接单时间是 01:30。夜宵菜单和白天一样。</p>
<h2>配送范围</h2>
<p>三公里内免费配送。超过三公里，每公里加收 2 元。</p>
<ul><li>高新区：30 分钟送达</li><li>天府新区：45 分钟送达</li></ul>
<div class="share"><a href="https://weibo.com">分享到微博</a></div>
<h2>Late-night orders</h2>
<p>Orders placed after 01:30 are cancelled automatically and never charged.<br>Call us at 028-1234-5678.</p>
<table><tr><th>时段</th><th>起送价</th></tr><tr><td>22:00–02:00</td><td>30 元</td></tr></table>
</article>
<aside><h3>热门菜品</h3><p>麻婆豆腐、回锅肉</p></aside>
</main>
<footer><p>© 2026 川味小馆 · 沪ICP备 12345678 号</p><a href="/privacy">隐私政策</a></footer>
<script>console.log("bye")</script>
</body></html>"#;

#[test]
fn html_main_text_without_navigation() {
    let d = doc("https://demo.ragscope.local/blog/night", PAGE.as_bytes());
    assert_eq!(d.format, Format::Html);
    assert_eq!(d.encoding, Some(TextEncoding::Utf8));
    assert_eq!(d.title.as_deref(), Some("夜宵配送说明"));
    for noise in [
        "常见问题",
        "首页",
        "tracking",
        "分享",
        "隐私",
        "ICP",
        "麻婆",
        "font:",
    ] {
        assert!(
            !d.text.contains(noise),
            "{noise:?} leaked into {:?}",
            d.text
        );
    }
    check(
        render_blocks(&d),
        expect![[r#"
        h1: 夜宵配送说明
        paragraph: 2026-03-01
        paragraph: 我们每天营业到次日 02:00，最晚接单时间是 01:30。夜宵菜单和白天一样。
        h2: 配送范围
        paragraph: 三公里内免费配送。超过三公里，每公里加收 2 元。
        listitem: - 高新区：30 分钟送达
        listitem: - 天府新区：45 分钟送达
        h2: Late-night orders
        paragraph: Orders placed after 01:30 are cancelled automatically and never charged.⏎Call us at 028-1234-5678.
        tablerow: 时段 | 起送价
        tablerow: 22:00–02:00 | 30 元"#]],
    );
    check(
        render_chunks(
            &d,
            ChunkParams {
                target_tokens: 40,
                overlap_tokens: 10,
                min_split_chars: 200,
            },
        ),
        expect![[r#"
            [夜宵配送说明] 0..98 (0..50) 35t | 夜宵配送说明⏎⏎2026-03-01⏎⏎我们每天营业到次日 02:00，最晚接单时间是 01:30。
            [夜宵配送说明] 98..128 (50..60) 10t | 夜宵菜单和白天一样。
            [夜宵配送说明 › 配送范围] 130..213 (62..93) 27t | 配送范围⏎⏎三公里内免费配送。超过三公里，每公里加收 2 元。
            [夜宵配送说明 › 配送范围] 215..278 (95..124) 21t | - 高新区：30 分钟送达⏎⏎- 天府新区：45 分钟送达
            [夜宵配送说明 › Late-night orders] 280..397 (126..243) 38t | Late-night orders⏎⏎Orders placed after 01:30 are cancelled automatically and never charged.⏎Call us at 028-1234-5678.
            [夜宵配送说明 › Late-night orders] 372..441 (218..273) 25t | Call us at 028-1234-5678.⏎⏎时段 | 起送价⏎⏎22:00–02:00 | 30 元"#]],
    );
}

#[test]
fn gb18030_text_file() {
    let src = "川味小馆退款说明\n\n订单取消后，款项原路退回，一般一到三个工作日到账。\n如果超过七天仍未到账，请联系客服并提供订单号。\n\n生僻字测试：𠮷（需要四字节编码）。";
    let (bytes, _, unmappable) = encoding_rs::GB18030.encode(src);
    assert!(!unmappable);
    assert!(
        std::str::from_utf8(&bytes).is_err(),
        "the test file must not be UTF-8"
    );
    let d = doc("退款.txt", &bytes);
    assert_eq!(d.encoding, Some(TextEncoding::Gb18030));
    assert_eq!(d.text, src);
    check(
        render_blocks(&d),
        expect![[r#"
        paragraph: 川味小馆退款说明
        paragraph: 订单取消后，款项原路退回，一般一到三个工作日到账。⏎如果超过七天仍未到账，请联系客服并提供订单号。
        paragraph: 生僻字测试：𠮷（需要四字节编码）。"#]],
    );
    check(render_chunks(&d, ChunkParams::default()), expect!["[] 0..225 (0..78) 73t | 川味小馆退款说明⏎⏎订单取消后，款项原路退回，一般一到三个工作日到账。⏎如果超过七天仍未到账，请联系客服并提供订单号。⏎⏎生僻字测试：𠮷（需要四字节编码）。"]);
}

const MARKDOWN: &str = "# Standing desk guide

The desk has two motors and a memory panel. It lifts 120 kg.

## Assembly

### Frame

Attach the legs to the crossbar with the M6 bolts. Tighten them by hand first! Then use the hex key.

1. Unpack the frame.
2. Attach the legs.

### Top

桌面需要两个人一起安装。先把桌面放在软垫上，再把框架对准预留孔位。拧紧所有螺丝后再翻转桌子。

## Troubleshooting

If the desk shows E01, hold the down button for five seconds. The desk resets and moves to its lowest position. See the [support page](https://example.com/support) for other codes.

```
E01  reset needed
E02  overload
```
";

#[test]
fn markdown_nested_headings() {
    let d = doc("guide.md", MARKDOWN.as_bytes());
    assert_eq!(d.title.as_deref(), Some("Standing desk guide"));
    check(
        render_blocks(&d),
        expect![[r#"
        h1: Standing desk guide
        paragraph: The desk has two motors and a memory panel. It lifts 120 kg.
        h2: Assembly
        h3: Frame
        paragraph: Attach the legs to the crossbar with the M6 bolts. Tighten them by hand first! Then use the hex key.
        listitem: 1. Unpack the frame.
        listitem: 2. Attach the legs.
        h3: Top
        paragraph: 桌面需要两个人一起安装。先把桌面放在软垫上，再把框架对准预留孔位。拧紧所有螺丝后再翻转桌子。
        h2: Troubleshooting
        paragraph: If the desk shows E01, hold the down button for five seconds. The desk resets and moves to its lowest position. See the support page for other codes.
        code: E01  reset needed⏎E02  overload"#]],
    );
    check(
        render_chunks(
            &d,
            ChunkParams {
                target_tokens: 30,
                overlap_tokens: 8,
                min_split_chars: 200,
            },
        ),
        expect![[r#"
            [Standing desk guide] 0..81 (0..81) 24t | Standing desk guide⏎⏎The desk has two motors and a memory panel. It lifts 120 kg.
            [Standing desk guide › Assembly › Frame] 83..178 (83..178) 26t | Assembly⏎⏎Frame⏎⏎Attach the legs to the crossbar with the M6 bolts. Tighten them by hand first!
            [Standing desk guide › Assembly › Frame] 151..243 (151..243) 29t | Tighten them by hand first! Then use the hex key.⏎⏎1. Unpack the frame.⏎⏎2. Attach the legs.
            [Standing desk guide › Assembly › Top] 245..286 (245..262) 13t | Top⏎⏎桌面需要两个人一起安装。
            [Standing desk guide › Assembly › Top] 286..349 (262..283) 21t | 先把桌面放在软垫上，再把框架对准预留孔位。
            [Standing desk guide › Assembly › Top] 349..388 (283..296) 13t | 拧紧所有螺丝后再翻转桌子。
            [Standing desk guide › Troubleshooting] 390..468 (298..376) 21t | Troubleshooting⏎⏎If the desk shows E01, hold the down button for five seconds.
            [Standing desk guide › Troubleshooting] 469..556 (377..464) 25t | The desk resets and moves to its lowest position. See the support page for other codes.
            [Standing desk guide › Troubleshooting] 558..589 (466..497) 8t | E01  reset needed⏎E02  overload"#]],
    );
}

#[test]
fn faq_tables_and_per_file_errors() {
    let ex = extract(
        "faq.csv",
        None,
        "question,answer,tags\n怎么退款,在订单页申请,退款|售后\n".as_bytes(),
        &Limits::default(),
    )
    .unwrap();
    let Content::Faqs { rows, encoding } = ex.content else {
        panic!("not FAQ")
    };
    assert_eq!((rows.len(), encoding), (1, TextEncoding::Utf8));
    assert_eq!(rows[0].embedding_text(), "怎么退款: 在订单页申请");
    // GBK-encoded CSV, as Excel in a Chinese locale saves it.
    let (gbk, _, _) =
        encoding_rs::GBK.encode("question,answer\n营业时间是几点,每天十一点到次日两点\n");
    let ex = extract("faq.csv", None, &gbk, &Limits::default()).unwrap();
    let Content::Faqs { rows, encoding } = ex.content else {
        panic!("not FAQ")
    };
    assert_eq!(
        (rows[0].answer.as_str(), encoding),
        ("每天十一点到次日两点", TextEncoding::Gb18030)
    );

    for (name, bytes, code) in [
        ("empty.txt", &b""[..], "empty_file"),
        ("blank.md", b"  \n\n", "empty_file"),
        ("image.png", b"\x89PNG\r\n\x1a\n", "unsupported_format"),
        ("bad.jsonl", b"{\"question\": 1}", "bad_record"),
        ("bin.txt", b"\x00\x01\x02\x03binary", "malformed_file"),
    ] {
        let err = extract(name, None, bytes, &Limits::default()).unwrap_err();
        assert_eq!(err.code(), code, "{name}: {err}");
    }
}

#[test]
fn gbk_html_page_from_a_url() {
    let page = "<html><head><meta charset=\"gbk\"><title>退款</title></head><body><nav><a href=\"/\">首页</a></nav>\
        <div class=\"content\"><h1>退款说明</h1><p>订单取消后，款项原路退回，一般一到三个工作日到账。</p></div></body></html>";
    let (bytes, _, _) = encoding_rs::GBK.encode(page);
    let ex = extract(
        "https://shop.example.cn/help/refund",
        Some("text/html"),
        &bytes,
        &Limits::default(),
    )
    .unwrap();
    let Content::Document(d) = ex.content else {
        panic!("not a document")
    };
    assert_eq!(
        (d.format, d.encoding),
        (Format::Html, Some(TextEncoding::Gb18030))
    );
    assert_eq!(
        d.text,
        "退款说明\n\n订单取消后，款项原路退回，一般一到三个工作日到账。"
    );
}

#[test]
fn docx_text_box_is_kept_once() {
    // Word writes a text box twice: a DrawingML choice and a VML fallback.
    let body = r#"<w:p><w:r><w:t>Before the box.</w:t></w:r><w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:r><w:t>注意：电机过热会自动停机。</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>注意：电机过热会自动停机。</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r><w:r><w:t xml:space="preserve"> After the box.</w:t></w:r></w:p>"#;
    let d = doc("box.docx", &docx(body, None));
    check(
        render_blocks(&d),
        expect![[r#"
        paragraph: 注意：电机过热会自动停机。
        paragraph: Before the box. After the box."#]],
    );
}
