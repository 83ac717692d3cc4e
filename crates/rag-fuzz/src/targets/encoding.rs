//! Encoding detection ([`rag_ingest::decode_text`]), format detection, and
//! plain-text extraction.

use rag_ingest::{decode_text, detect_format, extract, Limits, TextEncoding};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Byte patterns of encodings.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "\u{feff}",
        "\r\n",
        "\r",
        "\n",
        "\t",
        "\x0c",
        "\x00",
        "\x00a\x00b\x00c",
        "a\x00b\x00c\x00",
        "\u{4e2d}\u{6587}",
        "\u{9ad4}",
        "%PDF-",
        "PK\x03\x04",
        "<html>",
        "<body>",
        "<!doctype html>",
    ],
    nest: &[],
    text: false,
};

const NAMES: &[(&str, Option<&str>)] = &[
    ("notes.txt", None),
    ("notes", None),
    ("notes.TXT", Some("text/plain; charset=gbk")),
    ("https://example.org/a/b?x=1#f", Some("text/html")),
    ("page", Some("application/xhtml+xml")),
    ("x.md", None),
    ("x.bin", None),
    ("x.pdf", None),
    ("x.docx", None),
    ("dir/.hidden", Some("application/octet-stream")),
    ("C:\\a\\b.csv", None),
    ("x.", Some("")),
    ("x.jsonl", Some(";;")),
];

/// Runs one input: `decode_text` (with its invariants), `detect_format`
/// under several names, and a plain-text extraction.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    match decode_text(bytes) {
        Err(e) => {
            sig.add(e.code()).message(&e.to_string());
        }
        Ok(d) => {
            ensure!(!d.text.contains('\r'), "decoded text keeps a \\r");
            let utf8 = |b: &[u8]| {
                std::str::from_utf8(b)
                    .ok()
                    .map(|s| s.replace("\r\n", "\n").replace('\r', "\n"))
            };
            if let Some(rest) = bytes.strip_prefix(b"\xef\xbb\xbf") {
                ensure!(
                    d.encoding == TextEncoding::Utf8Bom,
                    "BOM read as {:?}",
                    d.encoding
                );
                ensure!(
                    Some(&d.text) == utf8(rest).as_ref(),
                    "UTF-8 (BOM) text changed"
                );
            } else if !bytes.contains(&0)
                && !bytes.starts_with(b"\xff\xfe")
                && !bytes.starts_with(b"\xfe\xff")
            {
                if let Some(t) = utf8(bytes) {
                    ensure!(
                        d.encoding == TextEncoding::Utf8,
                        "UTF-8 read as {:?}",
                        d.encoding
                    );
                    ensure!(d.text == t, "UTF-8 text changed by decoding");
                }
            }
            if !matches!(d.encoding, TextEncoding::Gb18030) {
                ensure!(
                    d.replacements == 0,
                    "{} replacements in {:?}",
                    d.replacements,
                    d.encoding
                );
            }
            sig.add(d.encoding.name().to_owned())
                .magnitude(d.replacements);
        }
    }
    for (name, media) in NAMES {
        match detect_format(name, *media, bytes) {
            Ok(f) => sig.add(f.as_str()),
            Err(e) => sig.add(e.code()),
        };
    }
    let r = extract("notes.txt", None, bytes, &Limits::default());
    check::extraction(&r, &mut sig);
    sig.finish()
}
