//! PDF through [`rag_ingest::extract`] (pdf-extract on lopdf).
//!
//! A mutated PDF usually has a broken cross-reference table, which stops the
//! reader before any object is parsed. So each input is tried raw and, when
//! it has objects, again with a rebuilt xref table and trailer: the mutated
//! objects, streams, fonts and content operators then reach the parser.

use rag_ingest::{extract, Limits};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of PDF syntax.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        " obj\n",
        "\nendobj\n",
        " 0 R",
        " 1 0 R",
        " 2 0 R",
        " 3 0 R",
        " 4 0 R",
        " 5 0 R",
        "<<",
        ">>",
        "[",
        "]",
        "stream\n",
        "\nendstream",
        "/Type",
        "/Catalog",
        "/Pages",
        "/Page",
        "/Kids",
        "/Count",
        "/Parent",
        "/Contents",
        "/Resources",
        "/Font",
        "/XObject",
        "/Subtype /Form",
        "/Form",
        "/X0 Do\n",
        "/Do",
        "/Length",
        "/Filter",
        "/FlateDecode",
        "/ASCIIHexDecode",
        "/Outlines",
        "/First",
        "/Next",
        "/Prev",
        "/ObjStm",
        "/N",
        "/XRef",
        "/Encoding",
        "/Differences",
        "/ToUnicode",
        "/Type0",
        "/Identity-H",
        "/DescendantFonts",
        "/Widths",
        "/FirstChar",
        "/MediaBox",
        "/BaseFont /Helvetica",
        "BT\n",
        "\nET",
        "/F1 12 Tf\n",
        "(Hello) Tj\n",
        "[(A) -120 (B)] TJ\n",
        "T*\n",
        "1 0 0 1 72 720 Tm\n",
        "0 -14 Td\n",
        "q\n",
        "Q\n",
        "cm\n",
        "beginbfchar\n",
        "endbfchar\n",
        "beginbfrange\n",
        "<0001> <FFFF> <0041>\n",
        "begincodespacerange\n",
        "xref\n",
        "trailer\n",
        "startxref\n",
        "%%EOF\n",
        "null",
        "true",
        "-1",
        "99999999",
        "(\\\\)",
        "<FEFF00410042>",
        "%PDF-1.7\n",
    ],
    nest: &[
        ("<<", ">>"),
        ("[", "]"),
        ("(", ")"),
        ("q\n", "Q\n"),
        ("BT ", "ET "),
    ],
    text: false,
};

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let limits = Limits::default();
    let raw = extract("upload.pdf", Some("application/pdf"), bytes, &limits);
    check::extraction(&raw, &mut sig);
    if let Some(fixed) = rebuild_xref(bytes) {
        sig.add(1u8);
        let r = extract("upload.pdf", Some("application/pdf"), &fixed, &limits);
        check::extraction(&r, &mut sig);
    }
    sig.finish()
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | b'\x0c' | 0)
}

/// `N G obj` headers: (offset, N, G).
fn objects(b: &[u8]) -> Vec<(usize, u32, u16)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(k) = find(&b[i..], b"obj") {
        let at = i + k;
        i = at + 3;
        // Walk back over "N G ".
        let mut j = at;
        let mut nums = [0u64; 2];
        let mut ok = true;
        for n in nums.iter_mut().rev() {
            let end = j;
            while j > 0 && is_ws(b[j - 1]) {
                j -= 1;
            }
            if j == end {
                ok = false;
                break;
            }
            let digits_end = j;
            while j > 0 && b[j - 1].is_ascii_digit() {
                j -= 1;
            }
            if j == digits_end || digits_end - j > 9 {
                ok = false;
                break;
            }
            *n = std::str::from_utf8(&b[j..digits_end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX);
        }
        if ok && (j == 0 || is_ws(b[j - 1])) && nums[0] < 100_000 && nums[1] <= 65_535 {
            out.push((j, nums[0] as u32, nums[1] as u16));
        }
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// The `N G R` after the last `/Root` (or the first catalog object).
fn root(b: &[u8], objs: &[(usize, u32, u16)]) -> (u32, u16) {
    if let Some(k) = rfind(b, b"/Root") {
        let rest = &b[k + 5..b.len().min(k + 40)];
        let s = String::from_utf8_lossy(rest);
        let mut it = s.split_whitespace();
        if let (Some(n), Some(g)) = (it.next(), it.next()) {
            if let (Ok(n), Ok(g)) = (n.parse(), g.parse()) {
                return (n, g);
            }
        }
    }
    let catalog = objs.iter().find(|(off, _, _)| {
        let end = b.len().min(off + 200);
        find(&b[*off..end], b"/Catalog").is_some()
    });
    catalog
        .or(objs.first())
        .map_or((1, 0), |(_, n, g)| (*n, *g))
}

/// The input with a fresh classic xref table and trailer after its last
/// object, or `None` when it has no objects or the table would be the same.
pub fn rebuild_xref(b: &[u8]) -> Option<Vec<u8>> {
    let objs = objects(b);
    let last = objs.iter().map(|o| o.0).max()?;
    let cut = rfind(&b[last..], b"xref")
        .or_else(|| rfind(&b[last..], b"trailer"))
        .or_else(|| rfind(&b[last..], b"startxref"))
        .map_or(b.len(), |k| last + k);
    let size = objs.iter().map(|o| o.1).max()? as usize + 1;
    let mut table = vec![None; size];
    for (off, n, g) in &objs {
        table[*n as usize] = Some((*off, *g));
    }
    let (rn, rg) = root(b, &objs);
    let mut out = b[..cut].to_vec();
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    let xref_at = out.len();
    out.extend_from_slice(format!("xref\n0 {size}\n0000000000 65535 f \n").as_bytes());
    for e in &table[1..] {
        match e {
            Some((off, g)) => out.extend_from_slice(format!("{off:010} {g:05} n \n").as_bytes()),
            None => out.extend_from_slice(b"0000000000 00000 f \n"),
        }
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {size} /Root {rn} {rg} R >>\nstartxref\n{xref_at}\n%%EOF\n")
            .as_bytes(),
    );
    (out != b).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilt_xref_points_at_the_objects() {
        let pdf = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\nxref\n0 1\nbroken\n";
        let fixed = rebuild_xref(pdf).unwrap();
        let s = String::from_utf8(fixed).unwrap();
        assert!(s.contains("0000000009 00000 n \n"), "{s}");
        assert!(s.contains("/Root 1 0 R"), "{s}");
        assert!(!s.contains("broken"));
        assert_eq!(rebuild_xref(b"%PDF-1.4\nno objects"), None);
    }
}
