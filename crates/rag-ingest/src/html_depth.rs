//! A bound on how deeply an HTML page nests, applied before the tree is
//! built.
//!
//! The HTML tree-building algorithm walks the stack of open elements for
//! many start tags ("is there a `p` in button scope?"), so a page that opens
//! an element n times without closing it costs O(n²): a megabyte of `<div>`
//! takes minutes. Real pages nest a few dozen levels. So a page that may nest
//! deeper than [`MAX_DEPTH`] is first run through the tokenizer alone (linear
//! time), which measures the depth; only when it is really too deep is the
//! page written out again from its tokens with the start tags beyond the
//! bound (and their end tags) left out. Text, and every element at or above
//! the bound, stay as they were.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// The deepest nesting of elements handed to the tree builder.
pub(crate) const MAX_DEPTH: usize = 512;

/// Elements without content, elements whose content is raw text
/// (`<script>`, `<title>`, …), and elements whose end tag the parser implies
/// when a sibling starts (`<p>`, `<li>`, `<td>`, …) or that it closes on a
/// second start (`<a>`, `<button>`, `<form>`): none makes the stack grow
/// without bound, so none counts towards the depth (and none is left out).
const NOT_COUNTED: &[&str] = &[
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
    "param",
    "keygen",
    "p",
    "li",
    "dt",
    "dd",
    "option",
    "optgroup",
    "tr",
    "td",
    "th",
    "thead",
    "tbody",
    "tfoot",
    "colgroup",
    "caption",
    "rb",
    "rt",
    "rtc",
    "rp",
    "html",
    "head",
    "body",
    "a",
    "button",
    "form",
    "nobr",
    "frameset",
    "frame",
    "image",
    "script",
    "style",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "title",
    "textarea",
    "plaintext",
];

/// The page, or the page rewritten with its nesting bounded when it nests
/// deeper than [`MAX_DEPTH`].
pub(crate) fn bounded(src: &str) -> Cow<'_, str> {
    // A page with fewer start tags than the bound cannot nest deeper.
    let opens = start_tag_bound(src.as_bytes());
    if opens <= MAX_DEPTH {
        return Cow::Borrowed(src);
    }
    if run(src, Sink::measure()).max_depth.get() <= MAX_DEPTH {
        return Cow::Borrowed(src);
    }
    let sink = run(src, Sink::rewrite(src.len()));
    Cow::Owned(sink.out.into_inner())
}

/// `<` followed by an ASCII letter: an upper bound on the start tags.
fn start_tag_bound(bytes: &[u8]) -> usize {
    bytes
        .windows(2)
        .filter(|w| w[0] == b'<' && w[1].is_ascii_alphabetic())
        .count()
}

fn run(src: &str, sink: Sink) -> Sink {
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(src));
    // The sink never asks the tokenizer to stop for a script.
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink
}

struct Sink {
    /// Write the page out again (else only measure).
    rewrite: bool,
    depth: Cell<usize>,
    max_depth: Cell<usize>,
    /// Start tags left out, by name, whose end tags are left out too.
    dropped: RefCell<HashMap<String, usize>>,
    out: RefCell<String>,
}

impl Sink {
    fn measure() -> Sink {
        Sink {
            rewrite: false,
            depth: Cell::new(0),
            max_depth: Cell::new(0),
            dropped: RefCell::new(HashMap::new()),
            out: RefCell::new(String::new()),
        }
    }

    fn rewrite(capacity: usize) -> Sink {
        Sink {
            rewrite: true,
            out: RefCell::new(String::with_capacity(capacity)),
            ..Sink::measure()
        }
    }

    fn tag(&self, tag: &Tag) {
        let name: &str = &tag.name;
        let counted = !NOT_COUNTED.contains(&name) && !tag.self_closing;
        match tag.kind {
            TagKind::StartTag => {
                if counted {
                    if self.depth.get() >= MAX_DEPTH {
                        if self.rewrite {
                            *self
                                .dropped
                                .borrow_mut()
                                .entry(name.to_owned())
                                .or_default() += 1;
                        }
                        self.max_depth.set(self.depth.get() + 1);
                        return;
                    }
                    self.depth.set(self.depth.get() + 1);
                    self.max_depth
                        .set(self.max_depth.get().max(self.depth.get()));
                }
                if self.rewrite {
                    write_start(&mut self.out.borrow_mut(), tag);
                }
            }
            TagKind::EndTag => {
                if counted {
                    if self.rewrite {
                        let mut dropped = self.dropped.borrow_mut();
                        if let Some(n) = dropped.get_mut(name).filter(|n| **n > 0) {
                            *n -= 1;
                            return;
                        }
                    }
                    self.depth.set(self.depth.get().saturating_sub(1));
                }
                if self.rewrite {
                    let mut out = self.out.borrow_mut();
                    out.push_str("</");
                    out.push_str(name);
                    out.push('>');
                }
            }
        }
    }
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        match token {
            Token::TagToken(tag) => {
                self.tag(&tag);
                if tag.kind == TagKind::StartTag && !tag.self_closing {
                    // The tokenizer states the tree builder would switch to.
                    match &*tag.name {
                        "script" => return TokenSinkResult::RawData(RawKind::ScriptData),
                        "style" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => {
                            return TokenSinkResult::RawData(RawKind::Rawtext)
                        }
                        "title" | "textarea" => return TokenSinkResult::RawData(RawKind::Rcdata),
                        "plaintext" => return TokenSinkResult::Plaintext,
                        _ => {}
                    }
                }
            }
            Token::CharacterTokens(text) if self.rewrite => {
                escape_into(&mut self.out.borrow_mut(), &text, false);
            }
            Token::DoctypeToken(d) if self.rewrite && d.name.is_some() => {
                self.out.borrow_mut().push_str("<!DOCTYPE html>");
            }
            // Comments, NULs and parse errors carry no text.
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn write_start(out: &mut String, tag: &Tag) {
    out.push('<');
    out.push_str(&tag.name);
    for a in &tag.attrs {
        let name: &str = &a.name.local;
        if name.is_empty()
            || name
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '>' | '/' | '=' | '<'))
        {
            continue;
        }
        out.push(' ');
        out.push_str(name);
        out.push_str("=\"");
        escape_into(out, &a.value, true);
        out.push('"');
    }
    out.push('>');
}

fn escape_into(out: &mut String, text: &str, attribute: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_pages_are_left_alone() {
        let page = format!(
            "<html><body>{}</body></html>",
            "<div><p>words <b>bold</b> &amp; more<br></div>".repeat(2_000)
        );
        assert!(matches!(bounded(&page), Cow::Borrowed(_)));
        // Many unclosed implied-end elements do not count as depth.
        let list = format!("<ul>{}</ul>", "<li>item <p>para".repeat(3_000));
        assert!(matches!(bounded(&list), Cow::Borrowed(_)));
    }

    #[test]
    fn deep_pages_are_cut_at_the_bound_keeping_text_and_attributes() {
        let depth = 5_000;
        let page = format!(
            "<html><body><main title=\"a&quot;b\">{}<p>deep &lt;words&gt;</p>{}</main></body></html>",
            "<div class=x>".repeat(depth),
            "</div>".repeat(depth)
        );
        let out = bounded(&page);
        assert!(matches!(out, Cow::Owned(_)));
        assert_eq!(
            out.matches("<div").count(),
            MAX_DEPTH - 1,
            "main counts as one level"
        );
        assert_eq!(out.matches("</div>").count(), MAX_DEPTH - 1);
        assert!(
            out.contains("<p>deep &lt;words&gt;</p>"),
            "{}",
            &out[out.len() - 200..]
        );
        assert!(out.contains("<main title=\"a&quot;b\">"));
        // The rewritten page measures within the bound.
        assert!(run(&out, Sink::measure()).max_depth.get() <= MAX_DEPTH);
    }

    #[test]
    fn raw_text_elements_keep_their_content_out_of_the_markup() {
        let page = format!(
            "{}<script>if (a < b) {{ document.write('<div>') }}</script><style>p > b {{}}</style>text",
            "<span>".repeat(MAX_DEPTH + 10)
        );
        let out = bounded(&page);
        assert!(
            out.contains("<script>if (a &lt; b)"),
            "script text stays text"
        );
        assert!(out.ends_with("text"));
        assert_eq!(out.matches("<span").count(), MAX_DEPTH);
    }
}
