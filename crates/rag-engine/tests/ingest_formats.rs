//! Ingest through the engine over a real store: files of every format,
//! generated here (a Markdown file with nested headings, an HTML page with
//! navigation and footer, GB18030 text, a DOCX written with zip, PDFs written
//! with lopdf), checked in the stored document, its chunks, a query, and the
//! job's progress events.

use async_trait::async_trait;
use rag_core::{Chunk, CoreError, Document, Embedder, KbSettings, TenantId};
use rag_engine::rag_ingest::ChunkParams;
use rag_engine::{
    Components, Engine, EngineConfig, IngestOptions, IngestOutcome, IngestProgress, IngestStatus,
    IngestSummary,
};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

// ---------------------------------------------------------------- fixtures

struct Kb {
    _dir: tempfile::TempDir,
    engine: Engine,
    tenant: TenantId,
}

const KB: &str = "kb";

async fn kb_with(embedder: Option<Arc<dyn Embedder>>) -> Kb {
    kb_with_config(embedder, EngineConfig::default()).await
}

async fn kb_with_config(embedder: Option<Arc<dyn Embedder>>, config: EngineConfig) -> Kb {
    let dir = tempfile::tempdir().unwrap();
    let store =
        rag_store::EmbeddedStore::open(&dir.path().join("data"), rag_store::OpenMode::ReadWrite)
            .unwrap();
    let mut components = Components::lexical(Arc::new(store));
    if embedder.is_some() {
        components.embedder = embedder;
        components.cache = Some(Arc::new(
            rag_store::SqliteEmbeddingCache::open(&dir.path().join("cache")).unwrap(),
        ));
    }
    let engine = Engine::new(components, config);
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, KB, KbSettings::default())
        .await
        .unwrap();
    Kb {
        _dir: dir,
        engine,
        tenant,
    }
}

async fn kb() -> Kb {
    kb_with(None).await
}

/// Small chunks, so that the short test documents are split.
fn small(target_tokens: usize, overlap_tokens: usize) -> IngestOptions {
    IngestOptions::new(ChunkParams {
        target_tokens,
        overlap_tokens,
        min_split_chars: 0,
    })
}

impl Kb {
    async fn ingest(
        &self,
        name: &str,
        bytes: &[u8],
        options: &IngestOptions,
    ) -> (IngestOutcome, Vec<IngestProgress>) {
        let mut events = Vec::new();
        let outcome = self
            .engine
            .ingest_with(&self.tenant, KB, name, bytes.to_vec(), options, &mut |e| {
                events.push(e)
            })
            .await
            .unwrap();
        (outcome, events)
    }

    async fn stored(&self, source: &str) -> (Document, Vec<Chunk>) {
        let store = self.engine.store();
        let kb = self.engine.kb(&self.tenant, KB).await.unwrap();
        let docs = store.documents(&self.tenant, kb.id).await.unwrap();
        let info = docs
            .iter()
            .find(|d| d.source == source)
            .unwrap_or_else(|| panic!("{source} not stored: {docs:?}"));
        store
            .document(&self.tenant, kb.id, info.id)
            .await
            .unwrap()
            .unwrap()
    }

    async fn doc_count(&self) -> usize {
        let kb = self.engine.kb(&self.tenant, KB).await.unwrap();
        self.engine
            .store()
            .documents(&self.tenant, kb.id)
            .await
            .unwrap()
            .len()
    }

    /// Bodies of the context sources a query assembles, best first.
    async fn search(&self, query: &str) -> Vec<String> {
        let request =
            serde_json::from_value(serde_json::json!({ "kb": KB, "query": query, "params": null }))
                .unwrap();
        let events = self.engine.query_collect(&self.tenant, request).await;
        let events = serde_json::to_value(&events).unwrap();
        let context = events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "context_assembled")
            .unwrap_or_else(|| panic!("no context for {query:?}: {events}"));
        context["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["passage"]["body"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn stages(events: &[IngestProgress]) -> Vec<&'static str> {
    events.iter().map(IngestProgress::stage).collect()
}

fn paths(chunks: &[Chunk]) -> Vec<String> {
    chunks.iter().map(|c| c.heading_path.join(" › ")).collect()
}

/// Checks what every stored document must satisfy: chunks are slices of the
/// stored text at their offsets, numbered in order.
fn check_offsets(doc: &Document, chunks: &[Chunk]) {
    assert!(!chunks.is_empty());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.ordinal as usize, i);
        assert_eq!(
            c.text,
            doc.text[c.start..c.end],
            "chunk {i} is not the text at its offsets"
        );
    }
}

// ------------------------------------------------------- file builders
// After crates/rag-ingest/tests/common (our own test helpers).

/// A one-font PDF: ASCII lines in Helvetica, other lines with a Type0 font
/// whose ToUnicode CMap maps two-byte codes to the characters.
fn pdf_with_text(pages: &[&[&str]]) -> Vec<u8> {
    use lopdf::{dictionary, Object, Stream};
    let mut doc = lopdf::Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let mut codes: std::collections::BTreeMap<char, u32> = Default::default();
    for line in pages
        .iter()
        .flat_map(|p| p.iter())
        .filter(|l| !l.is_ascii())
    {
        for c in line.chars() {
            let n = codes.len() as u32 + 1;
            codes.entry(c).or_insert(n);
        }
    }
    let mut bfchar = String::new();
    for (c, code) in &codes {
        let mut units = [0u16; 2];
        let utf16: String = c
            .encode_utf16(&mut units)
            .iter()
            .map(|u| format!("{u:04X}"))
            .collect();
        bfchar.push_str(&format!("<{code:04X}> <{utf16}>\n"));
    }
    let cmap = format!(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n{} beginbfchar\n{bfchar}endbfchar\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n",
        codes.len()
    );
    let helvetica = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
    });
    let to_unicode = doc.add_object(Stream::new(dictionary! {}, cmap.into_bytes()));
    let descriptor = doc.add_object(dictionary! {
        "Type" => "FontDescriptor", "FontName" => "TestSong", "Flags" => 4,
        "FontBBox" => vec![0.into(), (-120).into(), 1000.into(), 880.into()],
        "ItalicAngle" => 0, "Ascent" => 880, "Descent" => -120, "CapHeight" => 700, "StemV" => 80,
    });
    let cid_font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "CIDFontType2", "BaseFont" => "TestSong",
        "CIDSystemInfo" => dictionary! { "Registry" => Object::string_literal("Adobe"), "Ordering" => Object::string_literal("Identity"), "Supplement" => 0 },
        "FontDescriptor" => descriptor, "DW" => 1000,
    });
    let cjk = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type0", "BaseFont" => "TestSong", "Encoding" => "Identity-H",
        "DescendantFonts" => vec![cid_font.into()], "ToUnicode" => to_unicode,
    });
    let resources =
        doc.add_object(dictionary! { "Font" => dictionary! { "F1" => helvetica, "F2" => cjk } });
    let mut kids: Vec<Object> = Vec::new();
    for lines in pages {
        let mut content = String::new();
        for (i, l) in lines.iter().enumerate() {
            // A blank line's worth of space between lines: one paragraph each.
            let y = 760 - 40 * i;
            if l.is_ascii() {
                content.push_str(&format!("BT /F1 12 Tf 72 {y} Td ({l}) Tj ET\n"));
            } else {
                let hex: String = l.chars().map(|c| format!("{:04X}", codes[&c])).collect();
                content.push_str(&format!("BT /F2 12 Tf 72 {y} Td <{hex}> Tj ET\n"));
            }
        }
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.into_bytes()));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        });
        kids.push(page.into());
    }
    finish_pdf(doc, pages_id, kids)
}

/// A "scanned" PDF: every page is one grey image, no text.
fn pdf_scanned(pages: usize) -> Vec<u8> {
    use lopdf::{dictionary, Stream};
    let mut doc = lopdf::Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let pixels: Vec<u8> = (0..32 * 32).map(|i| (i % 251) as u8).collect();
    let image = doc.add_object(Stream::new(
        dictionary! { "Type" => "XObject", "Subtype" => "Image", "Width" => 32, "Height" => 32, "ColorSpace" => "DeviceGray", "BitsPerComponent" => 8 },
        pixels,
    ));
    let resources = doc.add_object(dictionary! { "XObject" => dictionary! { "Im1" => image } });
    let mut kids = Vec::new();
    for _ in 0..pages {
        let content = doc.add_object(Stream::new(
            dictionary! {},
            b"q 451 0 0 698 72 72 cm /Im1 Do Q\n".to_vec(),
        ));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        });
        kids.push(page.into());
    }
    finish_pdf(doc, pages_id, kids)
}

fn finish_pdf(
    mut doc: lopdf::Document,
    pages_id: lopdf::ObjectId,
    kids: Vec<lopdf::Object>,
) -> Vec<u8> {
    use lopdf::dictionary;
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        lopdf::Object::Dictionary(
            dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count },
        ),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A DOCX archive whose body is the given paragraphs (style id, text).
fn docx(paragraphs: &[(Option<&str>, &str)]) -> Vec<u8> {
    let body: String = paragraphs
        .iter()
        .map(|(style, text)| {
            let ppr = style
                .map(|s| format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#))
                .unwrap_or_default();
            format!(r#"<w:p>{ppr}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
        })
        .collect();
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let files = [
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#
                .to_owned(),
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#
                .to_owned(),
        ),
        (
            "word/document.xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}<w:sectPr/></w:body></w:document>"#
            ),
        ),
    ];
    for (name, data) in files {
        zip.start_file(name, opts).unwrap();
        zip.write_all(data.as_bytes()).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// A zip whose `word/document.xml` inflates to `size` bytes of spaces.
fn docx_bomb(size: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("word/document.xml", opts).unwrap();
    let block = vec![b' '; 1 << 20];
    for _ in 0..size / block.len() {
        zip.write_all(&block).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

// --------------------------------------------------------------- tests

const MARKDOWN: &str = "# Standing desk guide

The desk has two motors and a memory panel. It lifts 120 kg.

## Assembly

### Frame

Attach the legs to the crossbar with the M6 bolts. Tighten them by hand first! Then use the hex key.

### Top

桌面需要两个人一起安装。先把桌面放在软垫上，再把框架对准预留孔位。拧紧所有螺丝后再翻转桌子。

## Troubleshooting

If the desk shows E01, hold the down button for five seconds. The desk resets and moves to its lowest position.
";

#[tokio::test]
async fn markdown_with_nested_headings() {
    let kb = kb().await;
    let (outcome, events) = kb
        .ingest("docs/guide.md", MARKDOWN.as_bytes(), &small(30, 8))
        .await;
    assert!(
        matches!(
            outcome.status,
            IngestStatus::Document {
                replaced: false,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(
        stages(&events),
        ["received", "extracted", "chunked", "embedded", "indexed"]
    );
    let IngestProgress::Extracted {
        format,
        encoding,
        chars,
        ..
    } = &events[1]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (format.as_str(), encoding.as_deref()),
        ("markdown", Some("UTF-8"))
    );

    let (doc, chunks) = kb.stored("docs/guide.md").await;
    assert_eq!(doc.title, "Standing desk guide");
    assert_eq!(Some(doc.text.chars().count()), *chars);
    // Markdown syntax is gone from the stored text; the words are there.
    assert!(!doc.text.contains('#'));
    assert!(doc
        .text
        .starts_with("Standing desk guide\n\nThe desk has two motors"));
    check_offsets(&doc, &chunks);
    assert_eq!(
        paths(&chunks),
        [
            "Standing desk guide",
            "Standing desk guide › Assembly › Frame",
            "Standing desk guide › Assembly › Frame",
            "Standing desk guide › Assembly › Top",
            "Standing desk guide › Assembly › Top",
            "Standing desk guide › Assembly › Top",
            "Standing desk guide › Troubleshooting",
            "Standing desk guide › Troubleshooting",
        ]
    );
    // A CJK chunk ends at a sentence end, never inside a sentence.
    for c in chunks
        .iter()
        .filter(|c| c.heading_path.last().is_some_and(|h| h == "Top"))
    {
        assert!(c.text.ends_with('。'), "{:?}", c.text);
    }
    let IngestProgress::Chunked {
        chunks: n,
        max_tokens,
        ..
    } = &events[2]
    else {
        panic!()
    };
    assert_eq!(*n, chunks.len());
    assert!(*max_tokens <= 30);

    let hits = kb.search("E01 down button").await;
    assert!(hits[0].contains("E01"), "{hits:?}");
    let hits = kb.search("桌面 安装").await;
    assert!(hits[0].contains("桌面需要两个人一起安装"), "{hits:?}");
}

const PAGE: &str = r#"<!DOCTYPE html>
<html lang="zh"><head><meta charset="utf-8"><title>夜宵配送 - 川味小馆</title>
<script>var tracking = "do not index";</script></head>
<body>
<header class="site-header"><a href="/">川味小馆</a><nav><a href="/menu">菜单</a> <a href="/faq">常见问题</a></nav></header>
<main><article>
<h1>夜宵配送说明</h1>
<p>我们每天营业到次日 02:00，最晚接单时间是 01:30。夜宵菜单和白天一样。</p>
<h2>配送范围</h2>
<p>三公里内免费配送。超过三公里，每公里加收 2 元。</p>
</article></main>
<footer><p>© 2026 川味小馆 · 沪ICP备 12345678 号</p><a href="/privacy">隐私政策</a></footer>
</body></html>"#;

#[tokio::test]
async fn html_page_keeps_main_text_only() {
    let kb = kb().await;
    let (outcome, events) = kb
        .ingest(
            "https://demo.ragscope.local/night",
            PAGE.as_bytes(),
            &small(40, 0),
        )
        .await;
    assert!(
        matches!(outcome.status, IngestStatus::Document { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        stages(&events),
        ["received", "extracted", "chunked", "embedded", "indexed"]
    );
    let (doc, chunks) = kb.stored("https://demo.ragscope.local/night").await;
    assert_eq!(doc.title, "夜宵配送说明");
    for noise in ["常见问题", "菜单</a>", "tracking", "隐私", "ICP", "<p>"] {
        assert!(
            !doc.text.contains(noise),
            "{noise:?} leaked into {:?}",
            doc.text
        );
    }
    assert!(doc.text.contains("三公里内免费配送"));
    check_offsets(&doc, &chunks);
    assert_eq!(paths(&chunks), ["夜宵配送说明", "夜宵配送说明 › 配送范围"]);
    assert!(chunks[1].text.starts_with("配送范围"));

    let hits = kb.search("配送范围 三公里").await;
    assert!(hits[0].contains("三公里内免费配送"), "{hits:?}");
    // The footer is not searchable.
    assert!(kb
        .search("隐私政策")
        .await
        .iter()
        .all(|b| !b.contains("隐私")));
}

#[tokio::test]
async fn gb18030_text_is_decoded() {
    let kb = kb().await;
    let src = "川味小馆退款说明\n\n订单取消后，款项原路退回，一般一到三个工作日到账。\n如果超过七天仍未到账，请联系客服并提供订单号。\n\n生僻字测试：𠮷（需要四字节编码）。";
    let (bytes, _, unmappable) = encoding_rs::GB18030.encode(src);
    assert!(!unmappable);
    assert!(
        std::str::from_utf8(&bytes).is_err(),
        "the test file must not be UTF-8"
    );
    let (outcome, events) = kb
        .ingest("退款.txt", &bytes, &IngestOptions::default())
        .await;
    assert!(
        matches!(outcome.status, IngestStatus::Document { chunks: 1, .. }),
        "{outcome:?}"
    );
    let IngestProgress::Extracted { encoding, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(encoding.as_deref(), Some("GB18030"));
    let (doc, chunks) = kb.stored("退款.txt").await;
    assert_eq!(doc.title, "退款");
    assert_eq!(doc.text, src);
    check_offsets(&doc, &chunks);
    assert_eq!(chunks[0].heading_path, Vec::<String>::new());
    let hits = kb.search("多久到账").await;
    assert!(hits[0].contains("原路退回"), "{hits:?}");
}

#[tokio::test]
async fn docx_and_pdf_documents() {
    let kb = kb().await;
    let bytes = docx(&[
        (Some("Title"), "保修与退换政策"),
        (Some("Heading1"), "退货"),
        (
            None,
            "收到商品七天内可以无理由退货。商品需保持完好，配件齐全。",
        ),
        (Some("Heading2"), "运费"),
        (None, "质量问题由我们承担运费；其他情况由买家承担。"),
        (Some("Heading1"), "Warranty"),
        (None, "Five years on the frame, two years on the motors."),
    ]);
    let (outcome, events) = kb.ingest("policy.docx", &bytes, &small(30, 0)).await;
    assert!(
        matches!(outcome.status, IngestStatus::Document { .. }),
        "{outcome:?}"
    );
    let IngestProgress::Extracted {
        format, encoding, ..
    } = &events[1]
    else {
        panic!("{events:?}")
    };
    assert_eq!((format.as_str(), encoding), ("docx", &None));
    let (doc, chunks) = kb.stored("policy.docx").await;
    assert_eq!(doc.title, "保修与退换政策");
    assert!(!doc.text.contains("<w:"));
    check_offsets(&doc, &chunks);
    let last = chunks.last().unwrap();
    assert_eq!(last.heading_path, ["Warranty"]);
    assert!(last.text.contains("Five years on the frame"));
    assert!(
        chunks
            .iter()
            .any(|c| c.heading_path == ["退货", "运费"] && c.text.contains("买家承担")),
        "{:?}",
        paths(&chunks)
    );

    let bytes = pdf_with_text(&[
        &[
            "Standing Desk Manual",
            "Check the bolts every month.",
            "升降桌使用说明。请勿超过最大承重。",
        ],
        &["保修期为五年，电机保修两年。"],
    ]);
    let (outcome, events) = kb
        .ingest("manual.pdf", &bytes, &IngestOptions::default())
        .await;
    assert!(
        matches!(outcome.status, IngestStatus::Document { .. }),
        "{outcome:?}"
    );
    let IngestProgress::Extracted { format, pages, .. } = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!((format.as_str(), *pages), ("pdf", Some(2)));
    let (doc, chunks) = kb.stored("manual.pdf").await;
    assert_eq!(doc.title, "manual");
    for expected in [
        "Standing Desk Manual",
        "Check the bolts every month.",
        "升降桌使用说明。请勿超过最大承重。",
        "保修期为五年，电机保修两年。",
    ] {
        assert!(
            doc.text.contains(expected),
            "{expected:?} missing from {:?}",
            doc.text
        );
    }
    check_offsets(&doc, &chunks);
    let hits = kb.search("电机保修多久").await;
    assert!(
        hits.iter().take(2).any(|b| b.contains("电机保修两年")),
        "{hits:?}"
    );
    let hits = kb.search("bolts").await;
    assert!(hits[0].contains("Check the bolts"), "{hits:?}");
}

#[tokio::test]
async fn a_scanned_pdf_fails_with_its_code_and_the_batch_goes_on() {
    let kb = kb().await;
    let mut summary = IngestSummary::default();
    let mut all = Vec::new();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("a.md", b"# A\n\nAlpha text about refunds.\n".to_vec()),
        ("scan.pdf", pdf_scanned(2)),
        ("empty.txt", Vec::new()),
        ("bomb.docx", docx_bomb(200 << 20)),
        ("program.exe", b"MZ\x90\x00".to_vec()),
        ("bad.jsonl", b"{\"question\": \"q\"}\n".to_vec()),
        (
            "faq.csv",
            "question,answer\n怎么退款,在订单页申请\n"
                .as_bytes()
                .to_vec(),
        ),
        ("b.txt", "Beta text about delivery.".as_bytes().to_vec()),
    ];
    let options = IngestOptions::default();
    for (name, bytes) in &files {
        let mut events = Vec::new();
        kb.engine
            .ingest_with(&kb.tenant, KB, name, bytes.clone(), &options, &mut |e| {
                summary.record(&e);
                events.push(e);
            })
            .await
            .unwrap();
        // Every file ends with exactly one terminal event, its last.
        assert_eq!(
            events.iter().filter(|e| e.is_terminal()).count(),
            1,
            "{events:?}"
        );
        assert!(events.last().unwrap().is_terminal());
        all.push(events);
    }
    assert_eq!(stages(&all[1]), ["received", "failed"]);
    let IngestProgress::Failed { code, reason, .. } = &all[1][1] else {
        unreachable!()
    };
    assert_eq!(code, "no_text_layer");
    assert!(reason.contains("2 page"), "{reason}");
    assert_eq!(
        stages(&all[6]),
        ["received", "extracted", "embedded", "indexed"]
    );

    let codes: Vec<(&str, usize)> = summary
        .failed
        .iter()
        .map(|(k, v)| (k.as_str(), v.len()))
        .collect();
    assert_eq!(
        codes,
        [
            ("bad_record", 1),
            ("empty_file", 1),
            ("no_text_layer", 1),
            ("too_large", 1),
            ("unsupported_format", 1)
        ]
    );
    assert_eq!(summary.failed["too_large"][0].source, "bomb.docx");
    assert_eq!(
        (
            summary.files,
            summary.documents,
            summary.faqs_added,
            summary.failed_count()
        ),
        (8, 2, 1, 5)
    );
    assert_eq!(kb.doc_count().await, 2);
    assert!(kb.search("delivery").await[0].contains("Beta"));
}

#[tokio::test]
async fn same_bytes_are_skipped_and_a_cancelled_job_stores_nothing() {
    let kb = kb().await;
    let (_, first) = kb
        .ingest("guide.md", MARKDOWN.as_bytes(), &IngestOptions::default())
        .await;
    assert_eq!(stages(&first).last(), Some(&"indexed"));
    // The same content, even under another name, is already there.
    let (outcome, events) = kb
        .ingest("copy.md", MARKDOWN.as_bytes(), &IngestOptions::default())
        .await;
    assert!(
        matches!(outcome.status, IngestStatus::Skipped { .. }),
        "{outcome:?}"
    );
    assert_eq!(stages(&events), ["received", "skipped"]);
    // FAQ rows already present are skipped as a whole file.
    let faq = "question,answer\n怎么退款,在订单页申请\n";
    kb.ingest("faq.csv", faq.as_bytes(), &IngestOptions::default())
        .await;
    let (outcome, _) = kb
        .ingest("faq.csv", faq.as_bytes(), &IngestOptions::default())
        .await;
    assert!(
        matches!(&outcome.status, IngestStatus::Skipped { reason } if reason.contains("already present")),
        "{outcome:?}"
    );
    // Rows already there and rows repeated in a file are left out one by one.
    let mixed = "question,answer\n怎么退款,在订单页申请\n多久到账,三天\n多久到账,三天\n怎么退款,另一个答案\n";
    let (outcome, _) = kb
        .ingest("mixed.csv", mixed.as_bytes(), &IngestOptions::default())
        .await;
    assert!(
        matches!(
            outcome.status,
            IngestStatus::Faqs {
                added: 2,
                duplicates: 2
            }
        ),
        "{outcome:?}"
    );

    let cancel = Arc::new(AtomicBool::new(true));
    let options = IngestOptions::default().with_cancel(cancel);
    let (outcome, events) = kb
        .ingest("late.md", b"# Late\n\nNever stored.\n", &options)
        .await;
    assert!(matches!(outcome.status, IngestStatus::Failed { .. }));
    assert!(
        matches!(events.last(), Some(IngestProgress::Failed { code, .. }) if code == "cancelled"),
        "{events:?}"
    );
    assert_eq!(kb.doc_count().await, 1);
}

#[tokio::test]
async fn an_unknown_kb_or_bad_chunk_sizes_stop_the_job() {
    let kb = kb().await;
    let mut events = Vec::new();
    let err = kb
        .engine
        .ingest_with(
            &kb.tenant,
            "nope",
            "a.md",
            b"# A\n".to_vec(),
            &IngestOptions::default(),
            &mut |e| events.push(e),
        )
        .await
        .unwrap_err();
    assert!(err.is_user_error(), "{err}");
    assert!(
        matches!(events.last(), Some(IngestProgress::Failed { code, .. }) if code == "unknown_kb"),
        "{events:?}"
    );
    let options = IngestOptions::new(ChunkParams {
        target_tokens: 4,
        overlap_tokens: 0,
        min_split_chars: 0,
    });
    let err = kb
        .engine
        .ingest_with(
            &kb.tenant,
            KB,
            "a.md",
            b"# A\n".to_vec(),
            &options,
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("target_tokens"), "{err}");
}

// ------------------------------------------------- embeddings on re-ingest

/// A deterministic bag-of-characters embedder that counts the texts it embeds.
struct CountingEmbedder {
    embedded: AtomicUsize,
}

#[async_trait]
impl Embedder for CountingEmbedder {
    fn model_id(&self) -> &str {
        "test/char-bag-16"
    }

    fn dimensions(&self) -> usize {
        16
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(char_bag(text))
    }

    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| char_bag(t)).collect())
    }
}

fn char_bag(text: &str) -> Vec<f32> {
    let mut v = [0f32; 16];
    for c in text.chars() {
        v[c as usize % 16] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / norm).collect()
}

#[tokio::test]
async fn a_changed_file_replaces_its_document_and_unchanged_chunks_keep_their_vectors() {
    let embedder = Arc::new(CountingEmbedder {
        embedded: AtomicUsize::new(0),
    });
    // Passage vectors only: the counts below are of passages (sentence
    // vectors go through the same cache; `tests/sentence_vectors.rs`).
    let passages_only = EngineConfig {
        sentence_vectors: false,
        ..EngineConfig::default()
    };
    let kb = kb_with_config(Some(embedder.clone()), passages_only).await;
    let options = small(30, 0);
    let (_, events) = kb.ingest("guide.md", MARKDOWN.as_bytes(), &options).await;
    let IngestProgress::Embedded {
        model,
        vectors,
        cached,
        computed,
        ..
    } = &events[3]
    else {
        panic!("{events:?}")
    };
    let (_, chunks) = kb.stored("guide.md").await;
    assert_eq!(model.as_deref(), Some("test/char-bag-16"));
    assert_eq!(
        (*vectors, *cached, *computed),
        (chunks.len(), 0, chunks.len())
    );
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), chunks.len());

    // Only the troubleshooting section changes.
    let changed = MARKDOWN.replace("for five seconds", "for ten seconds");
    let (outcome, events) = kb.ingest("guide.md", changed.as_bytes(), &options).await;
    assert!(
        matches!(
            outcome.status,
            IngestStatus::Document { replaced: true, .. }
        ),
        "{outcome:?}"
    );
    let (doc, new_chunks) = kb.stored("guide.md").await;
    assert!(doc.text.contains("ten seconds"));
    assert_eq!(kb.doc_count().await, 1);
    let changed_chunks = new_chunks
        .iter()
        .filter(|c| {
            !chunks
                .iter()
                .any(|o| o.text == c.text && o.heading_path == c.heading_path)
        })
        .count();
    assert_eq!(changed_chunks, 1, "{:?}", paths(&new_chunks));
    let IngestProgress::Embedded {
        vectors,
        cached,
        computed,
        ..
    } = &events[3]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (*vectors, *cached, *computed),
        (new_chunks.len(), new_chunks.len() - 1, 1)
    );
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), chunks.len() + 1);

    // Every stored chunk has a current vector, and the old document's are gone.
    let kb_id = kb.engine.kb(&kb.tenant, KB).await.unwrap().id;
    let snapshot = kb.engine.store().snapshot(&kb.tenant, kb_id).await.unwrap();
    assert_eq!(snapshot.vectors.len(), new_chunks.len());
    let hits = kb.search("ten seconds").await;
    assert!(hits[0].contains("ten seconds"), "{hits:?}");
}

/// An embedder whose tokenizer counts four tokens per character.
struct DenseTokens;

#[async_trait]
impl Embedder for DenseTokens {
    fn model_id(&self) -> &str {
        "test/four-per-char"
    }
    fn dimensions(&self) -> usize {
        16
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(char_bag(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(texts.iter().map(|t| char_bag(t)).collect())
    }
    fn count_tokens(&self, text: &str) -> Option<usize> {
        Some(text.chars().count() * 4)
    }
}

#[tokio::test]
async fn chunks_are_measured_in_the_active_embedders_tokens() {
    let text: String = (0..60)
        .map(|i| format!("第{i}条：会员每月可以领取两张优惠券，有效期三十天。"))
        .collect::<Vec<_>>()
        .join("");
    let options = IngestOptions::new(ChunkParams::default());
    // Without a local tokenizer: the approximate counter (about a token per Chinese character).
    let plain = kb_with(Some(Arc::new(CountingEmbedder {
        embedded: AtomicUsize::new(0),
    })))
    .await;
    plain.ingest("c.txt", text.as_bytes(), &options).await;
    let (_, approx_chunks) = plain.stored("c.txt").await;
    // With one: chunks fit the model's window in its own tokens.
    let dense = kb_with(Some(Arc::new(DenseTokens))).await;
    dense.ingest("c.txt", text.as_bytes(), &options).await;
    let (_, chunks) = dense.stored("c.txt").await;
    assert!(
        chunks.len() > approx_chunks.len() * 2,
        "{} vs {}",
        chunks.len(),
        approx_chunks.len()
    );
    for c in &chunks {
        assert!(
            c.text.chars().count() * 4 <= ChunkParams::default().target_tokens,
            "{} tokens: {}",
            c.text.chars().count() * 4,
            c.text
        );
    }
}
