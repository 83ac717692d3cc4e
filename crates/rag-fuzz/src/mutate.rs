//! Deterministic mutation of inputs: byte-level edits, dictionary tokens,
//! splices between corpus entries, repetition of chunks, and, for text
//! formats, structure-aware edits (deep nesting of brackets and tags, whole
//! lines moved or repeated, numbers replaced by extreme ones, odd Unicode).

use crate::rng::Rng;

/// What a target's inputs look like, for the structure-aware edits.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    /// Tokens of the format (keywords, delimiters, markup).
    pub dict: &'static [&'static str],
    /// Opening and closing pairs nested deeply by the nesting edit.
    pub nest: &'static [(&'static str, &'static str)],
    /// Whether inputs are text (line edits, Unicode insertions) rather than binary.
    pub text: bool,
}

const INTERESTING_BYTES: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b'\r', b'\t', b' ', b'"', b'\'', b'\\', b'<', b'>', b'/', b'&',
    b'{', b'}', b'[', b']', b'(', b')', b',', b';', b':', b'#', b'-', b'|', b'=', b'%', b'0', b'9',
];

/// Numbers that break arithmetic.
const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "-2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e308",
    "1.7e308",
    "-1e308",
    "1e309",
    "5e-324",
    "1e-400",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "0.0000001",
    "3.4e38",
    "1e39",
];

/// Characters that trip up text handling: combining marks, zero-width and
/// bidirectional controls, full-width forms, Traditional Chinese,
/// surrogate-pair planes, case changes that change length.
const INTERESTING_CHARS: &[char] = &[
    '\u{0301}',
    '\u{200b}',
    '\u{200d}',
    '\u{202e}',
    '\u{2066}',
    '\u{feff}',
    '\u{fffd}',
    '\u{3000}',
    '\u{ff21}',
    '\u{ff10}',
    '\u{ff0c}',
    '\u{3002}',
    '\u{ff01}',
    '\u{2026}',
    '\u{201c}',
    '中',
    '國',
    '電',
    '機',
    '的',
    '是',
    '\u{20000}',
    '\u{1f600}',
    '\u{0130}',
    '\u{1e9e}',
    'ß',
    'ﬁ',
    '\u{fb03}',
    '\u{2126}',
    '\u{212a}',
    '\u{00a0}',
    '\u{2028}',
    '\u{0085}',
    '\u{ac00}',
    'ア',
    '\u{0e01}',
    '\u{0627}',
    '\u{10ffff}',
    '\u{e000}',
    '\u{1d400}',
    '㎏',
    '①',
    '\u{0000}',
];

/// Byte sequences that are not UTF-8 (or only barely).
const BAD_UTF8: &[&[u8]] = &[
    b"\x80",
    b"\xbf",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xfe\xff",
    b"\xe4\xb8",
    b"\x81\x30\x81\x30",
    b"\xd6\xd0",
];

/// One mutation step applied to `buf`, choosing among the kinds of edit.
fn step(g: &Grammar, rng: &mut Rng, buf: &mut Vec<u8>, pool: &[Vec<u8>], max_len: usize) {
    let len = buf.len();
    let pos = |rng: &mut Rng| rng.below(len + 1);
    match rng.below(if g.text { 18 } else { 14 }) {
        0 if len > 0 => {
            let i = rng.below(len);
            buf[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            buf[i] = rng.next_u64() as u8;
        }
        2 if len > 0 => {
            let i = rng.below(len);
            buf[i] = *rng.pick(INTERESTING_BYTES);
        }
        3 => {
            let n = rng.size(16);
            let at = pos(rng);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            buf.splice(at..at, bytes);
        }
        4 | 5 if !g.dict.is_empty() => {
            let tok = rng.pick(g.dict).as_bytes();
            let at = pos(rng);
            if rng.one_in(2) || at == len {
                buf.splice(at..at, tok.iter().copied());
            } else {
                let end = (at + tok.len()).min(len);
                buf.splice(at..end, tok.iter().copied());
            }
        }
        6 if len > 0 => {
            let at = rng.below(len);
            let n = rng.size(len - at);
            buf.drain(at..at + n);
        }
        7 if len > 0 => {
            // Repeat a chunk: usually a few times, sometimes until the input is large.
            let at = rng.below(len);
            let n = rng.size((len - at).min(4096));
            let chunk = buf[at..at + n].to_vec();
            let room = max_len.saturating_sub(len) / n.max(1);
            let times = if rng.one_in(8) {
                room
            } else {
                rng.size(room.min(16))
            };
            let mut rep = Vec::with_capacity(n * times);
            for _ in 0..times {
                rep.extend_from_slice(&chunk);
            }
            let to = pos(rng);
            buf.splice(to..to, rep);
        }
        8 if len > 1 => {
            let from = rng.below(len);
            let n = rng.size(len - from);
            let chunk = buf[from..from + n].to_vec();
            let to = pos(rng);
            if rng.one_in(2) {
                buf.splice(to..to, chunk);
            } else {
                let end = (to + n).min(len);
                buf.splice(to..end, chunk);
            }
        }
        9 if !pool.is_empty() => {
            // Splice: a prefix of this input and a suffix (or middle) of another.
            let other = rng.pick(pool);
            if !other.is_empty() {
                let cut = pos(rng);
                let from = rng.below(other.len());
                let n = rng.size(other.len() - from);
                buf.truncate(cut);
                buf.extend_from_slice(&other[from..from + n]);
            }
        }
        10 if !g.nest.is_empty() => {
            // Deep nesting, balanced or not.
            let (open, close) = *rng.pick(g.nest);
            let depth = *rng.pick(&[2usize, 8, 64, 500, 3000, 20_000, 100_000]);
            let unit = open.len() + close.len();
            let depth = depth.min(max_len.saturating_sub(len) / unit.max(1)).max(1);
            let at = pos(rng);
            let mut nested = Vec::with_capacity(depth * unit + 8);
            for _ in 0..depth {
                nested.extend_from_slice(open.as_bytes());
            }
            if rng.one_in(2) {
                nested.extend_from_slice(b"x");
            }
            if !rng.one_in(4) {
                for _ in 0..depth {
                    nested.extend_from_slice(close.as_bytes());
                }
            }
            buf.splice(at..at, nested);
        }
        11 => {
            // A number replaced by an extreme one (or one inserted).
            let num = rng.pick(INTERESTING_NUMBERS).as_bytes();
            let digits: Vec<usize> = (0..len).filter(|i| buf[*i].is_ascii_digit()).collect();
            if digits.is_empty() || rng.one_in(4) {
                let at = pos(rng);
                buf.splice(at..at, num.iter().copied());
            } else {
                let mut s = *rng.pick(&digits);
                while s > 0 && buf[s - 1].is_ascii_digit() {
                    s -= 1;
                }
                let mut e = s;
                while e < len && (buf[e].is_ascii_digit() || buf[e] == b'.') {
                    e += 1;
                }
                buf.splice(s..e, num.iter().copied());
            }
        }
        12 if len > 0 => buf.truncate(rng.below(len)),
        13 => {
            let at = pos(rng);
            buf.splice(at..at, rng.pick(BAD_UTF8).iter().copied());
        }
        14 => {
            // Characters that trip up text handling, at a char boundary when possible.
            let mut at = pos(rng);
            while at < len && at > 0 && (buf[at] & 0xc0) == 0x80 {
                at -= 1;
            }
            let mut s = String::new();
            for _ in 0..rng.size(8) {
                s.push(*rng.pick(INTERESTING_CHARS));
            }
            buf.splice(at..at, s.into_bytes());
        }
        15..=17 if len > 0 => line_edit(rng, buf, max_len),
        _ => {
            let at = pos(rng);
            buf.insert(at, *rng.pick(INTERESTING_BYTES));
        }
    }
}

/// Line-level edits: duplicate (possibly many times), delete or move a line.
fn line_edit(rng: &mut Rng, buf: &mut Vec<u8>, max_len: usize) {
    let mut starts = vec![0];
    starts.extend(
        buf.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    starts.retain(|s| *s < buf.len());
    let i = rng.below(starts.len());
    let (s, e) = (starts[i], starts.get(i + 1).copied().unwrap_or(buf.len()));
    let line = buf[s..e].to_vec();
    match rng.below(3) {
        0 => {
            let room = max_len.saturating_sub(buf.len()) / line.len().max(1);
            let times = if rng.one_in(6) {
                room
            } else {
                rng.size(room.min(8))
            };
            let mut rep = Vec::with_capacity(line.len() * times);
            for _ in 0..times {
                rep.extend_from_slice(&line);
            }
            buf.splice(e..e, rep);
        }
        1 => {
            buf.drain(s..e);
        }
        _ => {
            buf.drain(s..e);
            let to = starts[rng.below(starts.len())].min(buf.len());
            buf.splice(to..to, line);
        }
    }
}

/// Mutates `buf` in place with a stack of 1 to 16 edits, keeping it at most
/// `max_len` bytes long.
pub fn mutate(g: &Grammar, rng: &mut Rng, buf: &mut Vec<u8>, pool: &[Vec<u8>], max_len: usize) {
    let n = 1 << rng.below(5);
    for _ in 0..rng.range(1, n) {
        step(g, rng, buf, pool, max_len);
        buf.truncate(max_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_is_deterministic_and_bounded() {
        let g = Grammar {
            dict: &["<div>", "</div>"],
            nest: &[("<b>", "</b>")],
            text: true,
        };
        let pool = vec![b"<p>hello</p>\nworld\n".to_vec(), b"1,2,3\n".to_vec()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut out = Vec::new();
            for _ in 0..300 {
                let mut b = pool[rng.below(2)].clone();
                mutate(&g, &mut rng, &mut b, &pool, 5000);
                assert!(b.len() <= 5000);
                out.push(b);
            }
            out
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
