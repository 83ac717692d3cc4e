//! Text encoding detection: UTF-8 (with or without BOM), UTF-16 (BOM, or
//! unmarked but evidently UTF-16), GBK/GB18030 and other legacy encodings via
//! `chardetng`. The detected encoding is reported, never silently assumed.

use encoding_rs::{Encoding, GB18030, UTF_16BE, UTF_16LE};
use serde::{Deserialize, Serialize};

use crate::IngestError;

/// The encoding a text file was decoded from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "encoding", content = "name")]
pub enum TextEncoding {
    /// UTF-8 without a byte-order mark.
    Utf8,
    /// UTF-8 with a byte-order mark (removed from the text).
    Utf8Bom,
    /// UTF-16 little-endian (with a BOM, or detected by its zero bytes).
    Utf16Le,
    /// UTF-16 big-endian (with a BOM, or detected by its zero bytes).
    Utf16Be,
    /// GBK or GB18030 (decoded as GB18030, a superset of GBK and GB2312).
    Gb18030,
    /// Another legacy encoding guessed by `chardetng` (WHATWG label, e.g. `Big5`).
    Legacy(String),
}

impl TextEncoding {
    /// A display name (`UTF-8`, `GB18030`, ...).
    pub fn name(&self) -> &str {
        match self {
            TextEncoding::Utf8 => "UTF-8",
            TextEncoding::Utf8Bom => "UTF-8 (BOM)",
            TextEncoding::Utf16Le => "UTF-16LE",
            TextEncoding::Utf16Be => "UTF-16BE",
            TextEncoding::Gb18030 => "GB18030",
            TextEncoding::Legacy(n) => n,
        }
    }
}

/// Text decoded from bytes, with its encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedText {
    /// The text: no BOM, line endings normalised to `\n`.
    pub text: String,
    /// What it was decoded from.
    pub encoding: TextEncoding,
    /// Invalid byte sequences replaced with U+FFFD (only for GB18030, at
    /// most one plus one per 1000 non-ASCII bytes; otherwise decoding fails). The
    /// caller should warn when this is not 0.
    pub replacements: usize,
}

fn strict(enc: &'static Encoding, bytes: &[u8]) -> Option<String> {
    enc.decode_without_bom_handling_and_without_replacement(bytes)
        .map(|c| c.into_owned())
}

/// Evidence that BOM-less bytes are UTF-16: zeros concentrated on one parity.
fn unmarked_utf16(bytes: &[u8]) -> Option<&'static Encoding> {
    let sample = &bytes[..bytes.len().min(4096) & !1];
    if sample.len() < 4 {
        return None;
    }
    let half = sample.len() / 2;
    let even = sample.iter().step_by(2).filter(|b| **b == 0).count();
    let odd = sample
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|b| **b == 0)
        .count();
    // ASCII-heavy UTF-16 has a zero in nearly every other byte; CJK-heavy
    // UTF-16 has few zeros, which this does not try to guess.
    if odd * 10 >= half * 4 && even * 10 < half {
        Some(UTF_16LE)
    } else if even * 10 >= half * 4 && odd * 10 < half {
        Some(UTF_16BE)
    } else {
        None
    }
}

fn finish(
    text: String,
    encoding: TextEncoding,
    replacements: usize,
) -> Result<DecodedText, IngestError> {
    // Control characters other than tab, newline, carriage return and form
    // feed mean the bytes were not text in this encoding.
    let controls = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c'))
        .count();
    if controls > 0 && controls * 100 > text.chars().count() {
        return Err(IngestError::malformed(
            "text",
            format!(
                "binary data ({controls} control characters after decoding as {})",
                encoding.name()
            ),
        ));
    }
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    };
    Ok(DecodedText {
        text,
        encoding,
        replacements,
    })
}

/// Decodes the bytes of a text file (TXT, Markdown, HTML, CSV, JSONL).
///
/// Order: BOM; zero bytes (unmarked UTF-16, else binary, refused); valid
/// UTF-8; then `chardetng`'s guess decoded strictly (GBK is read as GB18030);
/// a single-byte guess loses to GB18030 when GB18030 reads the bytes as
/// Chinese; GB18030 tolerates one bad sequence plus one per 1000 non-ASCII
/// bytes (counted in [`DecodedText::replacements`]). Anything else gives
/// [`IngestError::EncodingUndecidable`].
pub fn decode_text(bytes: &[u8]) -> Result<DecodedText, IngestError> {
    if let Some(rest) = bytes.strip_prefix(b"\xef\xbb\xbf") {
        let text = std::str::from_utf8(rest).map_err(|e| {
            IngestError::malformed(
                "text",
                format!(
                    "UTF-8 BOM but invalid UTF-8 at byte {}",
                    e.valid_up_to() + 3
                ),
            )
        })?;
        return finish(text.to_owned(), TextEncoding::Utf8Bom, 0);
    }
    for (bom, enc, kind) in [
        (b"\xff\xfe", UTF_16LE, TextEncoding::Utf16Le),
        (b"\xfe\xff", UTF_16BE, TextEncoding::Utf16Be),
    ] {
        if let Some(rest) = bytes.strip_prefix(bom) {
            let text = strict(enc, rest).ok_or_else(|| {
                IngestError::malformed("text", format!("{} BOM but invalid {0} data", kind.name()))
            })?;
            return finish(text, kind, 0);
        }
    }
    if bytes.contains(&0) {
        if let Some(enc) = unmarked_utf16(bytes) {
            let kind = if enc == UTF_16LE {
                TextEncoding::Utf16Le
            } else {
                TextEncoding::Utf16Be
            };
            if let Some(text) = strict(enc, bytes) {
                return finish(text, kind, 0);
            }
        }
        let offset = bytes.iter().position(|b| *b == 0).unwrap_or(0);
        return Err(IngestError::malformed(
            "text",
            format!("binary data (NUL byte at offset {offset})"),
        ));
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return finish(text.to_owned(), TextEncoding::Utf8, 0);
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let guess = detector.guess(None, chardetng::Utf8Detection::Deny);
    // GBK's decoder is GB18030's: decode as the superset and say so.
    let guess = if guess == encoding_rs::GBK {
        GB18030
    } else {
        guess
    };
    let gb = gb18030_lossy(bytes);
    if guess != GB18030 {
        // A damaged GBK file makes chardetng fall back to a single-byte
        // encoding, which decodes anything into mojibake: prefer GB18030 when
        // it reads the bytes as Chinese with at most a few bad sequences.
        let single_byte = guess.is_single_byte();
        if !(single_byte && gb.plausible) {
            if let Some(text) = strict(guess, bytes) {
                return finish(text, TextEncoding::Legacy(guess.name().to_owned()), 0);
            }
        }
    }
    if gb.plausible || gb.replacements == 0 {
        return finish(gb.text, TextEncoding::Gb18030, gb.replacements);
    }
    let mut tried = vec!["UTF-8"];
    if guess != GB18030 {
        tried.push(guess.name());
    }
    tried.push("GB18030");
    Err(IngestError::EncodingUndecidable {
        tried: tried.join(", "),
    })
}

struct Lossy {
    text: String,
    replacements: usize,
    /// Mostly Han among the non-ASCII characters, and at most one bad
    /// sequence plus one per 1000 non-ASCII bytes.
    plausible: bool,
}

fn gb18030_lossy(bytes: &[u8]) -> Lossy {
    let (text, _) = GB18030.decode_without_bom_handling(bytes);
    let text = text.into_owned();
    let replacements = text.chars().filter(|c| *c == '\u{fffd}').count();
    let non_ascii = text.chars().filter(|c| !c.is_ascii() && *c != '\u{fffd}');
    let (mut total, mut han) = (0usize, 0usize);
    for c in non_ascii {
        total += 1;
        if crate::doc::is_cjk(c) || crate::doc::is_cjk_punct(c) {
            han += 1;
        }
    }
    let high_bytes = bytes.iter().filter(|b| **b >= 0x80).count();
    let plausible = total >= 2 && han * 10 >= total * 8 && replacements <= 1 + high_bytes / 1000;
    Lossy {
        text,
        replacements,
        plausible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_with_and_without_bom() {
        let d = decode_text("退款 refund\r\n".as_bytes()).unwrap();
        assert_eq!(
            (d.text.as_str(), d.encoding),
            ("退款 refund\n", TextEncoding::Utf8)
        );
        let d = decode_text(b"\xef\xbb\xbfabc").unwrap();
        assert_eq!(
            (d.text.as_str(), d.encoding),
            ("abc", TextEncoding::Utf8Bom)
        );
    }

    #[test]
    fn utf16_with_bom_and_unmarked() {
        let units: Vec<u8> = "营业 hours"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        let with_bom = [b"\xff\xfe".as_slice(), &units].concat();
        assert_eq!(
            decode_text(&with_bom).unwrap().encoding,
            TextEncoding::Utf16Le
        );
        let be: Vec<u8> = "Opening hours are 11:00 to 02:00"
            .encode_utf16()
            .flat_map(|u| u.to_be_bytes())
            .collect();
        let d = decode_text(&be).unwrap();
        assert_eq!(
            (d.text.as_str(), d.encoding),
            ("Opening hours are 11:00 to 02:00", TextEncoding::Utf16Be)
        );
    }

    #[test]
    fn gb18030_is_detected() {
        let src = "本店营业时间为每天十一点到次日两点，节假日照常营业。退款请在订单页面申请，客服会在二十四小时内处理。";
        let (bytes, _, bad) = GB18030.encode(src);
        assert!(!bad);
        let d = decode_text(&bytes).unwrap();
        assert_eq!(d.encoding, TextEncoding::Gb18030);
        assert_eq!(d.text, src);
    }

    #[test]
    fn binary_and_undecidable() {
        assert!(matches!(
            decode_text(b"\x7fELF\x02\x01\x01\0\0\0\0\0\x03\0>\0"),
            Err(IngestError::Malformed { .. })
        ));
        // A GBK file cut in the middle of a character: read as GB18030 with
        // one replacement, reported, not as windows-1252 mojibake.
        let (encoded, _, _) =
            GB18030.encode("本店营业时间为每天十一点到次日两点，节假日照常营业，欢迎光临。");
        let mut bytes = encoded.into_owned();
        bytes.push(0x81);
        let d = decode_text(&bytes).unwrap();
        assert_eq!((d.encoding, d.replacements), (TextEncoding::Gb18030, 1));
        assert!(d.text.starts_with("本店营业时间"));
        // Many bad sequences: not passed off as GB18030 (0xFF is never valid
        // in it; a single-byte encoding may still take such bytes).
        let noise = [0xff, b'A'].repeat(100);
        let r = decode_text(&[bytes.as_slice(), &noise].concat());
        assert!(
            !matches!(
                r,
                Ok(DecodedText {
                    encoding: TextEncoding::Gb18030,
                    ..
                })
            ),
            "{r:?}"
        );
    }
}
