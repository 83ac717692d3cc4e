//! The seed corpus, generated: `rag-fuzz gen-corpus` writes these files to
//! `corpus/<target>/`. Every seed is written here by hand (or computed, like
//! the PDFs' cross-reference tables and the DOCX archives); none is copied
//! from elsewhere. Regression inputs (`regress-*`) are added to the corpus
//! directories by hand and are not generated.

use std::path::Path;

use rag_core::{KbSettings, RetrievalParams};

/// One seed file.
pub struct Seed {
    /// Target (directory).
    pub target: &'static str,
    /// File name.
    pub name: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

fn seed(target: &'static str, name: &str, bytes: impl Into<Vec<u8>>) -> Seed {
    Seed {
        target,
        name: name.to_owned(),
        bytes: bytes.into(),
    }
}

// ---- PDF -------------------------------------------------------------------

/// A zlib stream of stored (uncompressed) deflate blocks: FlateDecode data
/// without a compressor.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let chunks: Vec<&[u8]> = if data.is_empty() {
        vec![&[][..]]
    } else {
        data.chunks(65_535).collect()
    };
    for (i, c) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        let len = c.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut s = format!("<< /Length {} {dict}>>\nstream\n", data.len()).into_bytes();
    s.extend_from_slice(data);
    s.extend_from_slice(b"\nendstream");
    s
}

/// Objects written one after another; returns the bytes and each object's offset.
fn pdf_body(version: &str, objs: &[(u32, Vec<u8>)]) -> (Vec<u8>, Vec<(u32, usize)>) {
    let mut out = format!("%PDF-{version}\n%\u{e2}\u{e3}\n").into_bytes();
    let mut offsets = Vec::new();
    for (n, body) in objs {
        offsets.push((*n, out.len()));
        out.extend_from_slice(format!("{n} 0 obj\n").as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    (out, offsets)
}

/// A PDF with a classic xref table.
fn pdf(objs: &[(u32, Vec<u8>)], trailer: &str) -> Vec<u8> {
    let (mut out, offsets) = pdf_body("1.4", objs);
    let size = offsets.iter().map(|o| o.0).max().unwrap_or(0) + 1;
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {size}\n0000000000 65535 f \n").as_bytes());
    for n in 1..size {
        match offsets.iter().find(|o| o.0 == n) {
            Some((_, off)) => out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes()),
            None => out.extend_from_slice(b"0000000000 00000 f \n"),
        }
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {size} {trailer}>>\nstartxref\n{xref}\n%%EOF\n").as_bytes(),
    );
    out
}

fn obj(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

const HELVETICA: &str = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";

fn one_page(content: &[u8], resources: &str, extra: Vec<(u32, Vec<u8>)>) -> Vec<u8> {
    let mut objs = vec![
        (1, obj("<< /Type /Catalog /Pages 2 0 R >>")),
        (2, obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")),
        (
            3,
            obj(&format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources {resources} /Contents 5 0 R >>"
            )),
        ),
        (4, obj(HELVETICA)),
        (5, stream("", content)),
    ];
    objs.extend(extra);
    pdf(&objs, "/Root 1 0 R ")
}

fn pdf_seeds() -> Vec<Seed> {
    let fonts = "<< /Font << /F1 4 0 R >> >>";
    let mut out = vec![seed(
        "pdf",
        "hello.pdf",
        one_page(
            b"BT /F1 12 Tf 72 720 Td (Motors are covered for two years.) Tj ET",
            fonts,
            vec![],
        ),
    )];
    // Two pages under a nested page tree, several text operators.
    let page = |n: u32, content: u32| {
        (
            n,
            obj(&format!(
                "<< /Type /Page /Parent 6 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents {content} 0 R >>"
            )),
        )
    };
    out.push(seed(
        "pdf",
        "two-pages.pdf",
        pdf(
            &[
                (1, obj("<< /Type /Catalog /Pages 2 0 R >>")),
                (2, obj("<< /Type /Pages /Kids [6 0 R] /Count 2 >>")),
                (6, obj("<< /Type /Pages /Parent 2 0 R /Kids [3 0 R 7 0 R] /Count 2 >>")),
                page(3, 5),
                page(7, 8),
                (4, obj(HELVETICA)),
                (
                    5,
                    stream(
                        "",
                        b"BT /F1 14 Tf 14 TL 72 740 Td (Warranty) Tj T* T* /F1 10 Tf (The first paragraph of page one.) Tj T* (It goes on here.) ' ET",
                    ),
                ),
                (
                    8,
                    stream(
                        "",
                        b"BT /F1 10 Tf 1 0 0 1 72 700 Tm [(Page) -250 (two,) 120 (kerned.)] TJ 0 -40 Td 2 1 (Spaced) \" ET",
                    ),
                ),
            ],
            "/Root 1 0 R ",
        ),
    ));
    // A form XObject drawn by the page.
    out.push(seed(
        "pdf",
        "xobject.pdf",
        one_page(
            b"q 1 0 0 1 0 0 cm /X0 Do Q BT /F1 12 Tf 72 650 Td (After the form.) Tj ET",
            "<< /Font << /F1 4 0 R >> /XObject << /X0 6 0 R >> >>",
            vec![(
                6,
                stream(
                    "/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> ",
                    b"BT /F1 10 Tf 72 700 Td (Inside the form.) Tj ET",
                ),
            )],
        ),
    ));
    // A compressed content stream.
    let content = b"BT /F1 12 Tf 72 720 Td (Compressed text, stored deflate blocks.) Tj ET";
    let mut flate = pdf_body(
        "1.4",
        &[
            (1, obj("<< /Type /Catalog /Pages 2 0 R >>")),
            (2, obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")),
            (
                3,
                obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"),
            ),
            (4, obj(HELVETICA)),
            (5, stream("/Filter /FlateDecode ", &zlib_stored(content))),
        ],
    )
    .0;
    // No xref table at all: the reader has to rebuild it.
    flate.extend_from_slice(b"trailer\n<< /Root 1 0 R >>\n%%EOF\n");
    out.push(seed("pdf", "flate-no-xref.pdf", flate));
    // A Type0 font with a ToUnicode CMap.
    let cmap = b"/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n/CMapName /Seed-UCS def\n/CMapType 2 def\n1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n2 beginbfchar\n<0001> <7535>\n<0002> <673A>\nendbfchar\n1 beginbfrange\n<0010> <0019> <0030>\nendbfrange\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend";
    out.push(seed(
        "pdf",
        "tounicode.pdf",
        pdf(
            &[
                (1, obj("<< /Type /Catalog /Pages 2 0 R >>")),
                (2, obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")),
                (
                    3,
                    obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"),
                ),
                (
                    4,
                    obj("<< /Type /Font /Subtype /Type0 /BaseFont /SeedCID /Encoding /Identity-H /DescendantFonts [6 0 R] /ToUnicode 7 0 R >>"),
                ),
                (5, stream("", b"BT /F1 12 Tf 72 720 Td <000100020012> Tj ET")),
                (
                    6,
                    obj("<< /Type /Font /Subtype /CIDFontType2 /BaseFont /SeedCID /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor 8 0 R /DW 1000 /W [1 [500 500]] >>"),
                ),
                (7, stream("", cmap)),
                (
                    8,
                    obj("<< /Type /FontDescriptor /FontName /SeedCID /Flags 4 /FontBBox [0 -200 1000 800] /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>"),
                ),
            ],
            "/Root 1 0 R ",
        ),
    ));
    // Outlines, an Info dictionary and a Differences encoding.
    out.push(seed(
        "pdf",
        "outlines.pdf",
        pdf(
            &[
                (1, obj("<< /Type /Catalog /Pages 2 0 R /Outlines 9 0 R /PageMode /UseOutlines >>")),
                (2, obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")),
                (
                    3,
                    obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"),
                ),
                (
                    4,
                    obj("<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman /FirstChar 32 /LastChar 126 /Encoding << /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [65 /B /C 128 /Euro 150 /endash] >> >>"),
                ),
                (5, stream("", b"BT /F1 12 Tf 72 720 Td (ABC \\200 \\226 \\(paren\\) \\\\) Tj ET")),
                (9, obj("<< /Type /Outlines /First 10 0 R /Last 10 0 R /Count 1 >>")),
                (10, obj("<< /Title (Chapter one) /Parent 9 0 R /Dest [3 0 R /Fit] >>")),
                (11, obj("<< /Title (Seed) /Producer (rag-fuzz) /CreationDate (D:20260101000000Z) >>")),
            ],
            "/Root 1 0 R /Info 11 0 R ",
        ),
    ));
    out.push(seed("pdf", "objstm.pdf", pdf_objstm()));
    out
}

/// PDF 1.5: catalog and page tree in an object stream, an xref stream.
fn pdf_objstm() -> Vec<u8> {
    let o1 = "<< /Type /Catalog /Pages 2 0 R >>";
    let o2 = "<< /Type /Pages /Kids [3 0 R] /Count 1 >>";
    let header = format!("1 0 2 {} ", o1.len() + 1);
    let objstm_data = format!("{header}{o1}\n{o2}");
    let (mut out, mut offsets) = pdf_body(
        "1.5",
        &[
            (
                3,
                obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"),
            ),
            (4, obj(HELVETICA)),
            (5, stream("", b"BT /F1 12 Tf 72 720 Td (Objects in a stream.) Tj ET")),
            (
                6,
                stream(
                    &format!("/Type /ObjStm /N 2 /First {} ", header.len()),
                    objstm_data.as_bytes(),
                ),
            ),
        ],
    );
    let xref_at = out.len();
    offsets.push((7, xref_at));
    let off = |n: u32| offsets.iter().find(|o| o.0 == n).map_or(0, |o| o.1) as u32;
    let mut rows: Vec<u8> = Vec::new();
    let mut row = |t: u8, f2: u32, f3: u16| {
        rows.push(t);
        rows.extend_from_slice(&f2.to_be_bytes());
        rows.extend_from_slice(&f3.to_be_bytes());
    };
    row(0, 0, 0xffff);
    row(2, 6, 0);
    row(2, 6, 1);
    for n in 3..=7 {
        row(1, off(n), 0);
    }
    out.extend_from_slice(b"7 0 obj\n");
    out.extend_from_slice(&stream(
        "/Type /XRef /Size 8 /W [1 4 2] /Root 1 0 R ",
        &rows,
    ));
    out.extend_from_slice(format!("\nendobj\nstartxref\n{xref_at}\n%%EOF\n").as_bytes());
    out
}

// ---- DOCX ------------------------------------------------------------------

const W: &str = "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\" xmlns:mc=\"http://schemas.openxmlformats.org/markup-compatibility/2006\"";

fn docx_document(body: &str) -> String {
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document {W}><w:body>{body}</w:body></w:document>")
}

fn para(style: Option<&str>, text: &str) -> String {
    let ppr = style.map_or(String::new(), |s| {
        format!("<w:pPr><w:pStyle w:val=\"{s}\"/></w:pPr>")
    });
    format!("<w:p>{ppr}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
}

fn docx_seeds() -> Vec<Seed> {
    let body = [
        para(Some("Title"), "保修手册"),
        para(Some("Heading1"), "Motors"),
        "<w:p><w:r><w:t xml:space=\"preserve\">Motors are covered </w:t></w:r><w:r><w:t>for two years.</w:t></w:r><w:r><w:tab/><w:t>电机保修两年。</w:t></w:r></w:p>".into(),
        "<w:p><w:pPr><w:numPr><w:ilvl w:val=\"0\"/><w:numId w:val=\"1\"/></w:numPr></w:pPr><w:r><w:t>First item</w:t></w:r></w:p>".into(),
        "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Part</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Years</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:p><w:r><w:t>Motor</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>2</w:t></w:r></w:p></w:tc></w:tr></w:tbl>".into(),
        "<w:p><w:r><mc:AlternateContent><mc:Choice Requires=\"wps\"><w:t>text box</w:t></mc:Choice><mc:Fallback><w:t>text box copy</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>".into(),
        "<w:p><w:r><w:t>Line one</w:t><w:br/><w:t>line two &amp; more &lt;tags&gt; &#x4e2d;</w:t></w:r></w:p>".into(),
    ]
    .concat();
    let doc = docx_document(&body);
    let styled = docx_document(
        &[
            para(Some("Custom2"), "A heading by style name"),
            para(None, "Body text under it."),
            para(Some("Outline"), "A heading by outline level"),
            para(Some("heading3"), "A heading by style id"),
            para(None, "More body text."),
        ]
        .concat(),
    );
    let styles = format!("<?xml version=\"1.0\"?><w:styles {W}><w:style w:type=\"paragraph\" w:styleId=\"Custom2\"><w:name w:val=\"heading 2\"/></w:style><w:style w:type=\"paragraph\" w:styleId=\"Outline\"><w:name w:val=\"Outline\"/><w:pPr><w:outlineLvl w:val=\"2\"/></w:pPr></w:style></w:styles>");
    let core = "<?xml version=\"1.0\"?><cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>Seed title</dc:title></cp:coreProperties>";
    let parts = |d: &str, s: &str, c: &str| {
        let mut v = d.as_bytes().to_vec();
        for p in [s, c] {
            v.push(0);
            v.extend_from_slice(p.as_bytes());
        }
        v
    };
    let mut bomb = b"<w:document><w:body><w:p><w:r><w:t>".to_vec();
    bomb.resize(bomb.len() + (12 << 20), b'a');
    bomb.extend_from_slice(b"</w:t></w:r></w:p></w:body></w:document>");
    // Length a multiple of 3: packed deflated.
    while !bomb.len().is_multiple_of(3) {
        bomb.push(b' ');
    }
    vec![
        seed("docx", "parts-basic.xml", doc.clone()),
        seed("docx", "parts-styles.xml", parts(&styled, &styles, core)),
        seed(
            "docx",
            "raw-basic.docx",
            crate::targets::docx::pack(&parts(&doc, &styles, core)),
        ),
        seed("docx", "raw-bomb.docx", crate::targets::docx::pack(&bomb)),
    ]
}

// ---- HTML ------------------------------------------------------------------

fn html_seeds() -> Vec<Seed> {
    let article = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Warranty | Example Shop</title>
<style>body { font: 14px sans-serif }</style><script>var x = "<p>not text</p>";</script></head>
<body><nav class="site-nav"><a href="/">Home</a> <a href="/shop">Shop</a> <a href="/help">Help</a></nav>
<article><h1>Motor warranty</h1>
<p>Motors are covered for two years from the date of purchase. Keep the receipt.</p>
<h2>What is covered</h2>
<ul><li>Defects in materials</li><li><p>Defects in workmanship</p><ul><li>nested item</li></ul></li></ul>
<table><tr><th>Part</th><th>Years</th></tr><tr><td>Motor</td><td>2</td></tr><tr><td>Battery</td><td>1</td></tr></table>
<pre>  code   keeps
    its spaces</pre>
<blockquote>A quoted remark.</blockquote>
<p>Line one<br>line two &amp; three &nbsp; &#x4e2d;&#25991;</p>
</article><footer class="footer">Copyright</footer></body></html>
"#;
    let main_role = r#"<html><body><div class="sidebar"><p>Sidebar text that is long enough to count for something.</p></div>
<div role="main"><h2>退款政策</h2><p>在订单页申请退款，一到三个工作日到账。</p><ol><li>打开订单</li><li>申请退款</li></ol></div>
<ul><li><a href="/a">A</a></li><li><a href="/b">B</a></li><li><a href="/c">C</a></li></ul></body></html>
"#;
    let readability = r#"<html><head><title>Plain page</title></head><body>
<div id="header"><a href="/">logo</a></div>
<div><div class="content"><p>This paragraph has enough text to vote for its parent element in the fallback.</p>
<p>Another long paragraph of body text follows here, with more words than the navigation.</p></div></div>
<div class="comments"><p>A comment that should not win the vote at all, being short.</p></div>
<td>stray cell text that is also fairly long for the vote</td>
</body></html>
"#;
    let links = r##"<html><head><base href="https://example.org/docs/"></head><body>
<a href="intro.html">intro</a> <a href="intro.html#part">again</a> <a href="/abs/path?q=1">abs</a>
<a href="https://other.example/x">other</a> <a href="javascript:void(0)">js</a> <a href="mailto:a@example.org">mail</a>
<a href="tel:123">tel</a> <a href="data:text/html,x">data</a> <a href="#top">top</a> <a rel="nofollow noopener" href="/private">nf</a>
<map><area href="/area" alt="a"></map> <a href="  spaced.html  ">spaced</a> <A HREF="UPPER.HTML">upper</A>
</body></html>
"##;
    let mut gbk = b"<html><head><meta charset=\"gbk\"><title>".to_vec();
    gbk.extend_from_slice(b"\xd6\xd0\xce\xc4</title></head><body><p>\xb5\xe7\xbb\xfa\xb1\xa3\xd0\xde\xc1\xbd\xc4\xea\xa1\xa3</p></body></html>\n");
    let messy = r#"<div><p>unclosed paragraph<p>another <b>bold <i>both</b> italic</i>
<!-- a comment <p>inside</p> --><template><p>template text</p></template>
<svg><text>svg text</text></svg><select><option>opt</option></select><textarea><p>raw</p></textarea>
<table><td>cell without row<tr><td>second</table><li>stray item
<h7>not a heading</h7><h3>a real one</h3><noscript>no script</noscript>
"#;
    vec![
        seed("html", "article.html", article),
        seed("html", "main-role.html", main_role),
        seed("html", "readability.html", readability),
        seed("html", "links.html", links),
        seed("html", "gbk.html", gbk.clone()),
        seed("html", "messy.html", messy),
        seed("html_links", "links.html", links),
        seed("html_links", "article.html", article),
        seed("html_links", "main-role.html", main_role),
        seed("html_links", "messy.html", messy),
        seed("html_links", "gbk.html", gbk),
    ]
}

// ---- Markdown --------------------------------------------------------------

fn markdown_seeds() -> Vec<Seed> {
    let warranty = "# Warranty\n\nMotors are covered for two years. Batteries for one.\n\n## Motors\n\n- Defects in materials\n- Defects in workmanship\n  - nested point\n  - another\n\n1. Open the order\n2. Ask for a repair\n\n```\ncode block\n  indented\n```\n\n| Part | Years |\n|------|:-----:|\n| Motor | 2 |\n| Battery | 1 |\n\n> A quoted remark\n> over two lines.\n\nSee [the shop](https://example.org/shop) and ![a picture](p.png).[^1]\n\n[^1]: A footnote.\n\n### Deep heading\n\nText *with* **emphasis** and `code`.\n";
    let setext = "Title\n=====\n\nSub title\n---------\n\n<div class=\"note\">\n<p>HTML block</p>\n</div>\n\nHard  \nbreak and trailing backslash\\\nhere.\n\n- [ ] task\n- [x] done\n\n7. seventh\n8. eighth\n\n    indented code\n\n***\n\n[ref]: https://example.org \"Title\"\n[a link][ref]\n";
    let cjk = "# 保修\n\n## 电机\n\n电机保修两年。电池保修一年！有问题吗？请联系客服，我们会尽快处理、回复。\n\n## 退款\n\n在订单页申请退款；一到三个工作日到账。\n\n- 第一步：打开订单\n- 第二步：申请退款\n";
    let edge = "---\ntitle: front matter\n---\n\n> - quoted list\n> continued lazily\nlazy line\n\n* a\n\n  paragraph in item\n\n* b\n\n######## too deep\n\n# \n\n#no space\n\n`unclosed code\n\n**unclosed strong\n\n<!-- comment -->\n\n&amp; &copy; &#0; &#x110000;\n";
    vec![
        seed("markdown", "warranty.md", warranty),
        seed("markdown", "setext.md", setext),
        seed("markdown", "cjk.md", cjk),
        seed("markdown", "edge.md", edge),
    ]
}

// ---- FAQ tables ------------------------------------------------------------

fn faq_seeds() -> Vec<Seed> {
    let basic =
        "question,answer\nHow long is the motor warranty?,Two years.\n怎么退款,在订单页申请退款\n";
    let full = "question,answer,tags,source_url,status,valid_from,valid_until\n\"Multi-line, quoted\",\"First line\nsecond line with \"\"quotes\"\"\",\"a, b; c|d\",https://example.org/faq,pending,2026-01-01,2026-12-31T23:59:59Z\n退货,七天内可退,\"售后，退货；政策\",,disabled,1767312000,\nq3,a3,,,approved,,\n";
    let mut bom_crlf =
        b"\xef\xbb\xbfQuestion,ANSWER,Tags\r\nOne,Uno,x\r\nTwo,Dos,\"y,z\"\r\n".to_vec();
    bom_crlf.extend_from_slice(b"Three,Tres,\r\n");
    let gbk_csv: &[u8] =
        b"question,answer\n\xb5\xe7\xbb\xfa\xb1\xa3\xd0\xde,\xc1\xbd\xc4\xea\xa1\xa3\n";
    let reordered = "extra,answer,question,valid_until\nignored,The answer,The question,2026-05-01T00:00:00+08:00\n";
    let jsonl_basic = "{\"question\":\"How long is the motor warranty?\",\"answer\":\"Two years.\"}\n{\"question\":\"怎么退款\",\"answer\":\"在订单页申请退款\",\"tags\":[\"退款\",\"售后\"]}\n";
    let jsonl_full = "{\"question\":\"q1\",\"answer\":\"a1\",\"tags\":\"a, b; c\",\"source_url\":\"https://example.org/1\",\"status\":\"Pending\",\"valid_from\":1767312000,\"valid_until\":\"2026-12-31\"}\n\n{\"question\":\" spaced \",\"answer\":\" out \",\"status\":\"disabled\",\"valid_from\":\"2026-01-01T00:00:00Z\",\"unknown\":{\"nested\":[1,2,3]}}\r\n{\"question\":\"\\u7535\\u673a\",\"answer\":\"escaped \\\"quotes\\\" \\\\ \\n newline\"}\n";
    vec![
        seed("faq_csv", "basic.csv", basic),
        seed("faq_csv", "full.csv", full),
        seed("faq_csv", "bom-crlf.csv", bom_crlf),
        seed("faq_csv", "gbk.csv", gbk_csv),
        seed("faq_csv", "reordered.csv", reordered),
        seed("faq_jsonl", "basic.jsonl", jsonl_basic),
        seed("faq_jsonl", "full.jsonl", jsonl_full),
    ]
}

// ---- encodings -------------------------------------------------------------

fn utf16(s: &str, le: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let units = std::iter::once(0xfeff)
        .filter(|_| bom)
        .chain(s.encode_utf16());
    for u in units {
        out.extend_from_slice(&if le { u.to_le_bytes() } else { u.to_be_bytes() });
    }
    out
}

fn encoding_seeds() -> Vec<Seed> {
    let text = "Motors are covered for two years.\n电机保修两年。\r\nSecond line.\rThird.\n";
    let mut utf8_bom = b"\xef\xbb\xbf".to_vec();
    utf8_bom.extend_from_slice(text.as_bytes());
    let mut controls = b"text\x01\x02\x03 with\x1b[0m controls\x0c and a form feed\n".to_vec();
    controls.extend_from_slice(&[0x7f, 0x08, b'\n']);
    vec![
        seed("encoding", "utf8.txt", text),
        seed("encoding", "utf8-bom.txt", utf8_bom),
        seed("encoding", "utf16le-bom.txt", utf16(text, true, true)),
        seed("encoding", "utf16be-bom.txt", utf16(text, false, true)),
        seed("encoding", "utf16le-unmarked.txt", utf16("plain ascii text in utf-16\n", true, false)),
        seed("encoding", "utf16be-unmarked.txt", utf16("plain ascii text in utf-16\n", false, false)),
        seed(
            "encoding",
            "gbk.txt",
            &b"\xd6\xd0\xce\xc4\xa3\xac\xb5\xe7\xbb\xfa\xb1\xa3\xd0\xde\xc1\xbd\xc4\xea\xa1\xa3\nGBK text\n"[..],
        ),
        seed("encoding", "gbk-damaged.txt", &b"\xd6\xd0\xce\xc4\xff\xb5\xe7\xbb\xfa\xb1\xa3\xd0\x20\xc1\xbd\xc4\xea\n"[..]),
        seed("encoding", "big5.txt", &b"\xa4\xa4\xa4\xe5 Big5 \xa4\xa4\xa4\xe5\n"[..]),
        seed("encoding", "shift-jis.txt", &b"\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x95\xb6\x8f\xcd\n"[..]),
        seed("encoding", "latin1.txt", &b"caf\xe9 na\xefve r\xe9sum\xe9 \xa9 2026\n"[..]),
        seed("encoding", "cp1252.txt", &b"\x93smart quotes\x94 \x96 dash \x80 euro\n"[..]),
        seed("encoding", "controls.txt", controls),
        seed("encoding", "html-sniffed", "<!doctype html><body><p>sniffed as HTML</p></body>"),
    ]
}

// ---- chunking --------------------------------------------------------------

fn chunk_seeds() -> Vec<Seed> {
    // Four parameter bytes (budget, overlap, split size, format/counter), then the file.
    let with = |params: [u8; 4], body: &str| {
        let mut v = params.to_vec();
        v.extend_from_slice(body.as_bytes());
        v
    };
    let mut prose = String::new();
    for i in 0..40 {
        prose.push_str(&format!(
            "Sentence number {i} talks about motors, batteries and the warranty; it ends here. "
        ));
        if i % 7 == 6 {
            prose.push_str("\n\n");
        }
    }
    let words: String = (0..3000).map(|i| format!("word{} ", i % 97)).collect();
    let han: String = "电机保修两年电池保修一年请联系客服".repeat(120);
    let md = "# Manual\n\n## Motors\n\nMotors are covered for two years. Keep the receipt! Ask us anything?\n\n- first point, with a comma\n- second point: with a colon\n\n```\nlet x = 1;\nlet y = 2;\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Batteries\n\n### Details\n\n电池保修一年。若有问题，请联系客服：我们会处理。\n";
    vec![
        seed("chunk", "prose.bin", with([5, 2, 2, 0], &prose)),
        seed(
            "chunk",
            "prose-small-budget.bin",
            with([0, 4, 1, 2], &prose),
        ),
        seed("chunk", "one-line-words.bin", with([4, 1, 1, 0], &words)),
        seed("chunk", "han-no-punct.bin", with([3, 3, 2, 4], &han)),
        seed("chunk", "manual.bin", with([2, 2, 0, 1], md)),
        seed("chunk", "manual-bytes.bin", with([1, 0, 1, 5], md)),
        seed(
            "chunk",
            "tiny.bin",
            with([6, 0, 3, 1], "# Title\n\nShort text."),
        ),
    ]
}

// ---- queries, config, HTTP bodies -------------------------------------------

fn query_seeds() -> Vec<Seed> {
    let queries = [
        ("zh.txt", "电机保修多久"),
        ("en.txt", "How long is the motor warranty?"),
        ("typo.txt", "退宽"),
        (
            "idents.txt",
            "NVDA GPU il-6 interleukin-6 a_b/c-d v1.2.3 3,000 12:30",
        ),
        ("stops.txt", "the who"),
        ("traditional.txt", "電機保修 臺灣"),
        ("fullwidth.txt", "ＡＢＣ１２３　全角，标点！"),
        ("url.txt", "https://example.org/x?y=1&z=2 user@example.org"),
        (
            "unicode.txt",
            "İstanbul straße ﬁle Ω K ① ㎏ e\u{301} \u{200d}\u{202e}",
        ),
        ("mixed.txt", "保修warranty两年2years"),
        (
            "user-words.txt",
            "新品牌电机怎么保修\u{1}新品牌 100\n电机保修\n  \nX 4294967295\n",
        ),
    ];
    queries.iter().map(|(n, q)| seed("query", n, *q)).collect()
}

fn config_seeds() -> Vec<Seed> {
    let config = r#"# A configuration in the shape of ragscope.toml.
data_dir = "/var/lib/ragscope"
tenant = "default"

[log]
level = "info"
format = "json"

[limits]
max_file_bytes = 67108864
extract_wall_ms = 30000
extract_cpu_ms = 20000
extract_memory_mb = 512

[retrieval]
per_path_k = 20
paths = ["bm25", "substring", "fuzzy", "synonym", "fact", "dense"]
fuzzy_threshold = 0.3
rerank_top_k = 5
rerank = true

[retrieval.bm25]
k1 = 1.5
b = 0.75
ngram_weight = 0.5
fields = { mode = "multi_field", title = 2.0, body = 1.0, tags = 0.5 }

[retrieval.fusion]
k = 60.0
lexical_interpolation = 0.5
auto_interpolation = true
top_k = 10
min_score = 0.0

[retrieval.fusion.weights]
bm25 = 1.0
substring = 0.1
fuzzy = 1.0
synonym = 0.5
fact = 1.0
dense = 1.0

[server]
bind = "127.0.0.1:8080"
max_concurrent_queries_per_key = 8
max_concurrent_ingests_per_key = 2

[embedder]
kind = "none"

[sources]
proxy = "http://proxy.internal:3128"
"#;
    let retrieval = toml::to_string(&RetrievalParams::default()).unwrap_or_default();
    let settings = toml::to_string(&KbSettings::default()).unwrap_or_default();
    let overrides = "k = 30.0\ntop_k = 3\nlexical_interpolation = 0.25\npaths = [\"bm25\", \"dense\"]\n[weights]\nbm25 = 2.0\ndense = 0.5\n";
    let values = "str = \"esc \\t \\u00e9 \\U0001F600\"\nlit = 'C:\\path'\nml = \"\"\"\nline\\\n  joined\"\"\"\nmll = '''\nraw\n'''\nint = [0x7f, 0o17, 0b101, +1_000, -0]\nflt = [1e308, -0.0, inf, -inf, nan, 3.14]\ndt = [1979-05-27T07:32:00Z, 1979-05-27T00:32:00.999999-07:00, 1979-05-27T07:32:00, 1979-05-27, 07:32:00]\ninline = { a = { b = [1, { c = 2 }] } }\n\"quoted key\".dotted.key = true\n[[tables]]\nn = 1\n[[tables]]\nn = 2\n[a.b.c]\nd = []\n";
    vec![
        seed("config", "ragscope.toml", config),
        seed("config", "retrieval.toml", retrieval),
        seed("config", "kb-settings.toml", settings),
        seed("config", "overrides.toml", overrides),
        seed("config", "values.toml", values),
    ]
}

fn http_body_seeds() -> Vec<Seed> {
    let query = r#"{"kb":"demo","query":"电机保修多久","overrides":{"k":60,"weights":{"bm25":1,"dense":0.5},"top_k":5,"paths":["bm25","dense"],"lexical_interpolation":0.7},"filters":{"tags":["warranty"],"as_of":1767312000,"created_after":0},"generate":true,"conversation_id":"c-1"}"#;
    let with_params = format!(
        "{{\"kb\":\"demo\",\"query\":\"q\",\"params\":{}}}",
        serde_json::to_string(&RetrievalParams::default()).unwrap_or_default()
    );
    let hostile = r#"{"kb":"k","query":"q","overrides":{"k":0,"weights":{"bm25":1.7e308,"substring":1.7e308},"min_score":-1,"top_k":0}}"#;
    vec![
        seed("http_body", "query.json", query),
        seed("http_body", "query-params.json", with_params),
        seed("http_body", "query-hostile.json", hostile),
        seed(
            "http_body",
            "params.json",
            serde_json::to_string_pretty(&RetrievalParams::default()).unwrap_or_default(),
        ),
        seed(
            "http_body",
            "settings.json",
            serde_json::to_string(&KbSettings::default()).unwrap_or_default(),
        ),
        seed(
            "http_body",
            "overrides.json",
            r#"{"per_path_k":50,"rerank_top_k":3,"rerank":false,"auto_interpolation":false,"bm25":{"k1":1.2,"b":0.5,"fields":{"mode":"multi_field","title":2,"body":1,"tags":0}},"fuzzy_threshold":0.4}"#,
        ),
        seed(
            "http_body",
            "filters.json",
            r#"{"tags":["a","B"],"created_after":-9223372036854775808,"created_before":9223372036854775807}"#,
        ),
        seed(
            "http_body",
            "synonyms.json",
            r#"[{"terms":["退款","退钱","refund"]},{"terms":[]}]"#,
        ),
        seed(
            "http_body",
            "user-words.json",
            r#"[{"word":"新品牌","freq":100},{"word":"电机保修","freq":null},{"word":" "}]"#,
        ),
    ]
}

/// Every generated seed.
pub fn all() -> Vec<Seed> {
    let mut v = pdf_seeds();
    v.extend(docx_seeds());
    v.extend(html_seeds());
    v.extend(markdown_seeds());
    v.extend(faq_seeds());
    v.extend(encoding_seeds());
    v.extend(chunk_seeds());
    v.extend(query_seeds());
    v.extend(config_seeds());
    v.extend(http_body_seeds());
    v
}

/// Writes every generated seed under `root/<target>/`; returns how many.
pub fn write_corpus(root: &Path) -> std::io::Result<usize> {
    let seeds = all();
    for s in &seeds {
        let dir = root.join(s.target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(&s.name), &s.bytes)?;
    }
    Ok(seeds.len())
}
