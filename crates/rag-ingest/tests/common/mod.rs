//! Builders of real files for the tests: PDFs written with lopdf, DOCX
//! archives written with zip, GB18030 text encoded with encoding_rs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;

use lopdf::{dictionary, Document, Object, Stream};

/// One line of PDF text: font size, x, y (from the bottom) and the text.
pub struct PdfLine<'a> {
    pub y: f64,
    pub text: &'a str,
}

fn hex_u16(v: u32) -> String {
    format!("{v:04X}")
}

/// A PDF with one page per entry of `pages`. ASCII lines are drawn with
/// Helvetica; lines with other characters with a Type0 (Identity-H) font whose
/// ToUnicode CMap maps the codes back to the characters, as PDF writers do for
/// embedded subset CJK fonts (the font program itself is left out: text
/// extraction does not need it).
pub fn pdf_with_text(pages: &[Vec<PdfLine<'_>>]) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    // Codes for every non-ASCII character used, from 1.
    let mut codes: BTreeMap<char, u32> = BTreeMap::new();
    for l in pages.iter().flatten() {
        if !l.text.is_ascii() {
            for c in l.text.chars() {
                let n = codes.len() as u32 + 1;
                codes.entry(c).or_insert(n);
            }
        }
    }
    let helvetica = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
    });
    let mut bfchar = String::new();
    for (c, code) in &codes {
        let mut units = [0u16; 2];
        let utf16: String = c
            .encode_utf16(&mut units)
            .iter()
            .map(|u| hex_u16(u32::from(*u)))
            .collect();
        bfchar.push_str(&format!("<{}> <{}>\n", hex_u16(*code), utf16));
    }
    let cmap = format!(
        "/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n{} beginbfchar\n{}endbfchar\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n",
        codes.len(),
        bfchar
    );
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
    let mut kids = Vec::new();
    for lines in pages {
        let mut content = String::new();
        for l in lines {
            if l.text.is_ascii() {
                let escaped = l
                    .text
                    .replace('\\', "\\\\")
                    .replace('(', "\\(")
                    .replace(')', "\\)");
                content.push_str(&format!("BT /F1 12 Tf 72 {} Td ({escaped}) Tj ET\n", l.y));
            } else {
                let hex: String = l.text.chars().map(|c| hex_u16(codes[&c])).collect();
                content.push_str(&format!("BT /F2 12 Tf 72 {} Td <{hex}> Tj ET\n", l.y));
            }
        }
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.into_bytes()));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        });
        kids.push(Object::from(page));
    }
    finish_pdf(doc, pages_id, kids)
}

fn finish_pdf(mut doc: Document, pages_id: lopdf::ObjectId, kids: Vec<Object>) -> Vec<u8> {
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("write pdf");
    out
}

/// A "scanned" PDF: each page draws one grey image and has no text.
pub fn pdf_scanned(pages: usize) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let pixels: Vec<u8> = (0..64 * 64).map(|i| (i % 251) as u8).collect();
    let image = doc.add_object(Stream::new(
        dictionary! { "Type" => "XObject", "Subtype" => "Image", "Width" => 64, "Height" => 64, "ColorSpace" => "DeviceGray", "BitsPerComponent" => 8 },
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

/// A DOCX archive with the given `word/document.xml` body (the inside of
/// `<w:body>`) and optional `word/styles.xml`.
pub fn docx(body: &str, styles: Option<&str>) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut add = |name: &str, data: &[u8]| {
        zip.start_file(name, opts).unwrap();
        zip.write_all(data).unwrap();
    };
    add(
        "[Content_Types].xml",
        br#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#,
    );
    add(
        "_rels/.rels",
        br#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#,
    );
    let doc = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}<w:sectPr/></w:body></w:document>"#
    );
    add("word/document.xml", doc.as_bytes());
    if let Some(s) = styles {
        let xml = format!(
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">{s}</w:styles>"#
        );
        add("word/styles.xml", xml.as_bytes());
    }
    zip.finish().unwrap().into_inner()
}

/// A zip bomb named like a Word document: `word/document.xml` of `size`
/// bytes of spaces (compresses about 1000:1).
pub fn docx_bomb(size: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(size > u32::MAX as usize);
    zip.start_file("word/document.xml", opts).unwrap();
    let block = vec![b' '; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len());
        zip.write_all(&block[..n]).unwrap();
        left -= n;
    }
    zip.finish().unwrap().into_inner()
}

/// A Word paragraph, optionally with a style id.
pub fn w_p(style: Option<&str>, text: &str) -> String {
    let ppr = style
        .map(|s| format!(r#"<w:pPr><w:pStyle w:val="{s}"/></w:pPr>"#))
        .unwrap_or_default();
    format!(r#"<w:p>{ppr}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>"#)
}
