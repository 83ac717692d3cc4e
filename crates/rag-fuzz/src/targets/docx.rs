//! DOCX through [`rag_ingest::extract`] (zip, then quick-xml).
//!
//! Mutating a zip archive byte by byte mostly breaks its checksums, so
//! inputs come in two kinds. One starting with `PK\x03\x04` is a whole file,
//! given as is (damaged archives, zip bombs). Anything else is the XML of
//! the parts, separated by NUL bytes (`word/document.xml`, then
//! `word/styles.xml`, then `docProps/core.xml`), packed into a valid
//! archive before extraction (stored, or deflated when the input's length
//! is a multiple of 3), so the mutations reach the XML reader.

use std::io::{Cursor, Write};

use rag_ingest::{extract, Limits};
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of WordprocessingML.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "<w:p>",
        "</w:p>",
        "<w:r>",
        "</w:r>",
        "<w:t>",
        "</w:t>",
        "<w:t xml:space=\"preserve\">",
        "<w:pPr>",
        "</w:pPr>",
        "<w:pStyle w:val=\"Heading1\"/>",
        "<w:pStyle w:val=\"Title\"/>",
        "<w:outlineLvl w:val=\"8\"/>",
        "<w:numPr><w:ilvl w:val=\"0\"/></w:numPr>",
        "<w:tab/>",
        "<w:br/>",
        "<w:tbl>",
        "</w:tbl>",
        "<w:tr>",
        "</w:tr>",
        "<w:tc>",
        "</w:tc>",
        "<mc:AlternateContent>",
        "<mc:Choice>",
        "</mc:Choice>",
        "<mc:Fallback>",
        "</mc:Fallback>",
        "</mc:AlternateContent>",
        "<w:style w:styleId=\"H\">",
        "<w:name w:val=\"heading 3\"/>",
        "</w:style>",
        "<dc:title>",
        "</dc:title>",
        "&amp;",
        "&lt;",
        "&#x4e2d;",
        "&#0;",
        "&#1114112;",
        "&unknown;",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "<?xml version=\"1.0\"?>",
        "<!DOCTYPE d [<!ENTITY e \"x\">]>",
        "\0",
        "PK\x03\x04",
    ],
    nest: &[
        ("<w:p>", "</w:p>"),
        ("<w:r>", "</w:r>"),
        ("<w:tbl><w:tr><w:tc>", "</w:tc></w:tr></w:tbl>"),
        ("<mc:Fallback>", "</mc:Fallback>"),
        ("<x>", "</x>"),
    ],
    text: true,
};

const PARTS: [&str; 3] = ["word/document.xml", "word/styles.xml", "docProps/core.xml"];

/// Packs the NUL-separated parts into a DOCX archive.
pub fn pack(bytes: &[u8]) -> Vec<u8> {
    let method = if bytes.len().is_multiple_of(3) {
        CompressionMethod::Deflated
    } else {
        CompressionMethod::Stored
    };
    let opts = SimpleFileOptions::default().compression_method(method);
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let written: zip::result::ZipResult<()> = (|| {
        zip.start_file("[Content_Types].xml", opts)?;
        zip.write_all(b"<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"/>")?;
        for (name, part) in PARTS.iter().zip(bytes.split(|b| *b == 0)) {
            zip.start_file(*name, opts)?;
            zip.write_all(part)?;
        }
        Ok(())
    })();
    ensure!(written.is_ok(), "packing a DOCX failed: {written:?}");
    match zip.finish() {
        Ok(c) => c.into_inner(),
        Err(e) => panic!("invariant: finishing a DOCX failed: {e}"),
    }
}

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let limits = Limits {
        max_file_bytes: 64 << 20,
        // Small enough that a bomb among the inputs is refused quickly.
        max_decompressed_bytes: 8 << 20,
    };
    let r = if bytes.starts_with(b"PK\x03\x04") {
        sig.add(0u8);
        extract("report.docx", None, bytes, &limits)
    } else {
        sig.add(1u8);
        extract("report.docx", None, &pack(bytes), &limits)
    };
    check::extraction(&r, &mut sig);
    sig.finish()
}
