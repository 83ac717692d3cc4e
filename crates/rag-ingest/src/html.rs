//! HTML main text. The content root is `<main>` (or `role=main`), else the
//! largest `<article>`, else the element whose paragraphs hold the most text
//! (a readability-style score: a paragraph's text counts fully for its parent
//! and half for its grandparent). Inside the root, navigation, headers outside
//! articles, footers, asides, forms, scripts, styles, hidden elements and
//! link lists are left out. Headings are kept as heading blocks.

use std::collections::HashMap;

use ego_tree::iter::Edge;
use ego_tree::{NodeId, NodeRef};
use scraper::{node::Element, Html, Node};

use crate::doc::{collapse_ws, BlockKind, TextBuilder};

const DROP: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "nav", "aside", "form", "iframe", "button",
    "select", "textarea", "head", "canvas", "object", "dialog", "footer", "menu", "input", "label",
];
const DROP_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "menu",
    "menubar",
    "dialog",
    "alert",
];
const DROP_TOKENS: &[&str] = &[
    "nav",
    "navbar",
    "navigation",
    "breadcrumb",
    "breadcrumbs",
    "sidebar",
    "footer",
    "cookie",
    "cookies",
    "share",
    "sharing",
    "social",
    "advert",
    "advertisement",
    "ads",
    "comments",
    "skip",
    "pagination",
    "toc-sidebar",
];
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "header",
    "address",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "caption",
    "details",
    "summary",
    "body",
    "html",
    "hr",
    "center",
];

fn is_dropped(el: &Element, in_article: bool) -> bool {
    let name = el.name();
    if DROP.contains(&name) || (name == "header" && !in_article) {
        return true;
    }
    if el.attr("hidden").is_some() || el.attr("aria-hidden") == Some("true") {
        return true;
    }
    if el
        .attr("role")
        .is_some_and(|r| DROP_ROLES.contains(&r.trim().to_ascii_lowercase().as_str()))
    {
        return true;
    }
    if let Some(style) = el.attr("style") {
        let s: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if s.contains("display:none") || s.contains("visibility:hidden") {
            return true;
        }
    }
    let tokens = el.attr("class").into_iter().chain(el.attr("id"));
    tokens
        .flat_map(|v| v.split(|c: char| c.is_whitespace() || c == '-' || c == '_'))
        .any(|t| {
            let t = t.to_ascii_lowercase();
            DROP_TOKENS.contains(&t.as_str())
        })
}

/// Text length of every element's subtree and of its link text, in
/// characters, skipping dropped elements; computed once per page in one
/// pass without recursion (a page nested 100,000 deep is linear work and no
/// deeper stack).
struct TextLens(HashMap<NodeId, (usize, usize)>);

impl TextLens {
    fn new(doc: &Html) -> Self {
        let mut map = HashMap::new();
        // Sums of the children of each open node.
        let mut open: Vec<(usize, usize)> = Vec::new();
        for edge in doc.tree.root().traverse() {
            match edge {
                Edge::Open(_) => open.push((0, 0)),
                Edge::Close(node) => {
                    let (total, link) = open.pop().unwrap_or_default();
                    let v = match node.value() {
                        Node::Text(t) => (t.chars().filter(|c| !c.is_whitespace()).count(), 0),
                        Node::Element(el) if is_dropped(el, true) => (0, 0),
                        // Everything under a link is link text.
                        Node::Element(el) if el.name() == "a" => (total, total),
                        Node::Element(_) => (total, link),
                        _ => (0, 0),
                    };
                    if node.value().is_element() {
                        map.insert(node.id(), v);
                    }
                    if let Some(parent) = open.last_mut() {
                        parent.0 += v.0;
                        parent.1 += v.1;
                    }
                }
            }
        }
        TextLens(map)
    }

    /// (text, link text) of an element's subtree.
    fn of(&self, node: NodeRef<'_, Node>) -> (usize, usize) {
        self.0.get(&node.id()).copied().unwrap_or_default()
    }
}

fn element<'a>(node: NodeRef<'a, Node>) -> Option<&'a Element> {
    node.value().as_element()
}

/// The elements below `node` (not itself) that match, in document order.
/// Only elements are searched through (not, say, a template's contents),
/// without recursion.
fn find_all<'a>(
    node: NodeRef<'a, Node>,
    pred: &dyn Fn(&Element) -> bool,
    out: &mut Vec<NodeRef<'a, Node>>,
) {
    let mut skip: Option<NodeId> = None;
    for edge in node.traverse() {
        match edge {
            Edge::Open(d) if skip.is_none() && d.id() != node.id() => match element(d) {
                Some(el) => {
                    if pred(el) {
                        out.push(d);
                    }
                }
                None => skip = Some(d.id()),
            },
            Edge::Close(d) if skip == Some(d.id()) => skip = None,
            _ => {}
        }
    }
}

fn content_root<'a>(doc: &'a Html, lens: &TextLens) -> NodeRef<'a, Node> {
    let root = doc.tree.root();
    let mut mains = Vec::new();
    find_all(
        root,
        &|e| e.name() == "main" || e.attr("role") == Some("main"),
        &mut mains,
    );
    if let Some(m) = mains.into_iter().max_by_key(|m| lens.of(*m).0) {
        if lens.of(m).0 > 0 {
            return m;
        }
    }
    let mut articles = Vec::new();
    find_all(root, &|e| e.name() == "article", &mut articles);
    if let Some(a) = articles.into_iter().max_by_key(|a| lens.of(*a).0) {
        if lens.of(a).0 > 0 {
            return a;
        }
    }
    // Readability-style: paragraphs vote for their parent and grandparent.
    let mut paragraphs = Vec::new();
    find_all(
        root,
        &|e| matches!(e.name(), "p" | "pre" | "td" | "blockquote"),
        &mut paragraphs,
    );
    let mut scores: HashMap<NodeId, f64> = HashMap::new();
    let mut add = |id: NodeId, s: f64| *scores.entry(id).or_default() += s;
    for p in paragraphs {
        let (len, link) = lens.of(p);
        if len < 20 {
            continue;
        }
        let score = (len - link) as f64;
        if let Some(parent) = p.parent() {
            add(parent.id(), score);
            if let Some(gp) = parent.parent() {
                add(gp.id(), score / 2.0);
            }
        }
    }
    let best = scores
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .and_then(|(id, _)| doc.tree.get(id));
    let body = {
        let mut bodies = Vec::new();
        find_all(root, &|e| e.name() == "body", &mut bodies);
        bodies.into_iter().next().unwrap_or(root)
    };
    best.unwrap_or(body)
}

struct Walker<'l> {
    out: TextBuilder,
    buf: String,
    kind: BlockKind,
    pre: usize,
    in_article: bool,
    lens: &'l TextLens,
}

/// What closing an element does (the walk keeps one per open element).
enum OnClose {
    Nothing,
    Flush,
    /// Flush, then leave a `<pre>`.
    Pre,
    /// Flush if the block was opened, then restore `in_article`.
    Article {
        flush: bool,
        was: bool,
    },
}

impl Walker<'_> {
    fn flush(&mut self) {
        self.out.push(self.kind, &self.buf);
        self.buf.clear();
        self.kind = BlockKind::Paragraph;
    }

    /// Starts a block; returns whether closing it flushes.
    fn open_block(&mut self, kind: BlockKind) -> bool {
        // `<li><p>text</p></li>`: the paragraph continues the list item.
        if self.kind == BlockKind::ListItem
            && self.buf.trim() == "-"
            && kind == BlockKind::Paragraph
        {
            return false;
        }
        self.flush();
        self.kind = kind;
        // Text after a nested block inside this one is emitted as a paragraph.
        true
    }

    fn flush_if(b: bool) -> OnClose {
        if b {
            OnClose::Flush
        } else {
            OnClose::Nothing
        }
    }

    /// Opens an element: what to do when it closes, or `None` to skip its
    /// subtree.
    fn open(&mut self, node: NodeRef<'_, Node>, el: &Element) -> Option<OnClose> {
        if is_dropped(el, self.in_article) {
            return None;
        }
        let name = el.name();
        Some(match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = name.as_bytes()[1] - b'0';
                Self::flush_if(self.open_block(BlockKind::Heading { level }))
            }
            "li" => {
                self.flush();
                self.kind = BlockKind::ListItem;
                self.buf.push_str("- ");
                OnClose::Flush
            }
            "ul" | "ol" => {
                // A list that is nearly all links is navigation.
                let (len, link) = self.lens.of(node);
                if len > 0
                    && link * 10 >= len * 8
                    && node.children().filter(|c| element(*c).is_some()).count() >= 3
                {
                    return None;
                }
                Self::flush_if(self.open_block(BlockKind::Paragraph))
            }
            "pre" => {
                self.pre += 1;
                self.open_block(BlockKind::Code);
                OnClose::Pre
            }
            "tr" => Self::flush_if(self.open_block(BlockKind::TableRow)),
            "td" | "th" => {
                if self.kind == BlockKind::TableRow && !self.buf.trim().is_empty() {
                    self.buf.push_str(" | ");
                }
                OnClose::Nothing
            }
            "br" => {
                self.buf.push('\n');
                return None;
            }
            "img" => return None,
            "article" => {
                let was = self.in_article;
                self.in_article = true;
                let flush = self.open_block(BlockKind::Paragraph);
                OnClose::Article { flush, was }
            }
            "blockquote" => Self::flush_if(self.open_block(BlockKind::Paragraph)),
            _ if BLOCKS.contains(&name) => Self::flush_if(self.open_block(BlockKind::Paragraph)),
            _ => OnClose::Nothing,
        })
    }

    fn close(&mut self, action: OnClose) {
        match action {
            OnClose::Nothing => {}
            OnClose::Flush => self.flush(),
            OnClose::Pre => {
                self.flush();
                self.pre -= 1;
            }
            OnClose::Article { flush, was } => {
                if flush {
                    self.flush();
                }
                self.in_article = was;
            }
        }
    }

    /// Walks the subtree of `root` in document order, without recursion.
    fn walk(&mut self, root: NodeRef<'_, Node>) {
        let mut skip: Option<NodeId> = None;
        let mut pending: Vec<OnClose> = Vec::new();
        for edge in root.traverse() {
            match edge {
                Edge::Open(node) => {
                    if skip.is_some() {
                        continue;
                    }
                    match node.value() {
                        Node::Text(t) => {
                            if self.pre > 0 {
                                self.buf.push_str(t);
                            } else {
                                collapse_ws(t, &mut self.buf);
                            }
                        }
                        Node::Element(el) => match self.open(node, el) {
                            Some(action) => pending.push(action),
                            None => skip = Some(node.id()),
                        },
                        _ => skip = Some(node.id()),
                    }
                }
                Edge::Close(node) => {
                    if skip.is_some() {
                        if skip == Some(node.id()) {
                            skip = None;
                        }
                        continue;
                    }
                    if node.value().is_element() {
                        if let Some(action) = pending.pop() {
                            self.close(action);
                        }
                    }
                }
            }
        }
    }
}

fn text_of(node: NodeRef<'_, Node>) -> String {
    let mut s = String::new();
    for d in node.descendants() {
        if let Node::Text(t) = d.value() {
            collapse_ws(t, &mut s);
        }
    }
    s.trim().to_owned()
}

/// Extracts the main text of an HTML page. Returns the builder and a title
/// (the first `<h1>` of the main text, else `<title>`). Nesting deeper than
/// [`crate::html_depth::MAX_DEPTH`] is cut first, so the time is linear in
/// the page's size whatever its shape.
pub(crate) fn extract(src: &str) -> (TextBuilder, Option<String>) {
    let doc = Html::parse_document(&crate::html_depth::bounded(src));
    let lens = TextLens::new(&doc);
    let root = content_root(&doc, &lens);
    let in_article = root
        .ancestors()
        .chain(std::iter::once(root))
        .any(|a| element(a).is_some_and(|e| e.name() == "article"));
    let mut w = Walker {
        out: TextBuilder::default(),
        buf: String::new(),
        kind: BlockKind::Paragraph,
        pre: 0,
        in_article,
        lens: &lens,
    };
    w.walk(root);
    w.flush();
    let title = w.out.first_heading(1).or_else(|| {
        let mut titles = Vec::new();
        find_all(doc.tree.root(), &|e| e.name() == "title", &mut titles);
        titles
            .first()
            .map(|t| text_of(*t))
            .filter(|t| !t.is_empty())
    });
    (w.out, title)
}

/// The most links [`links`] returns for one page: a crawler follows a few
/// hundred at most, and a hostile page may hold millions.
pub const MAX_PAGE_LINKS: usize = 10_000;

/// The `href`s of a page's links, in document order, without duplicates,
/// fragments, or `javascript:`, `mailto:`, `tel:` and `data:` links; relative
/// links are returned as written (the crawler resolves them against the page
/// URL and keeps same-site ones). Also `<base href>` if present, first.
/// At most [`MAX_PAGE_LINKS`] (the first ones).
pub fn links(src: &str) -> Vec<String> {
    let doc = Html::parse_document(&crate::html_depth::bounded(src));
    let mut anchors = Vec::new();
    find_all(
        doc.tree.root(),
        &|e| matches!(e.name(), "a" | "area" | "base") && e.attr("href").is_some(),
        &mut anchors,
    );
    let mut out: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut base = None;
    for a in anchors {
        if out.len() >= MAX_PAGE_LINKS {
            break;
        }
        let Some(el) = element(a) else { continue };
        let href = el.attr("href").unwrap_or_default().trim();
        let href = href.split('#').next().unwrap_or_default();
        if el.name() == "base" {
            base.get_or_insert_with(|| href.to_owned());
            continue;
        }
        let lower = href.to_ascii_lowercase();
        if href.is_empty()
            || ["javascript:", "mailto:", "tel:", "data:"]
                .iter()
                .any(|p| lower.starts_with(p))
        {
            continue;
        }
        if el.attr("rel").is_some_and(|r| {
            r.split_whitespace()
                .any(|t| t.eq_ignore_ascii_case("nofollow"))
        }) {
            continue;
        }
        if seen.insert(href.to_owned()) {
            out.push(href.to_owned());
        }
    }
    if let Some(b) = base {
        out.insert(0, b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links_for_the_crawler() {
        let src = r##"<nav><a href="/faq">FAQ</a><a href="/faq#top">top</a></nav><a href="mailto:x@y.z">m</a>
            <a href="javascript:void(0)">j</a><a href="#">self</a><a href="guide.html?p=2#s">guide</a>
            <a rel="nofollow" href="/login">login</a><a href="https://other.example/">other</a>"##;
        assert_eq!(
            links(src),
            ["/faq", "guide.html?p=2", "https://other.example/"]
        );
    }

    #[test]
    fn a_page_nested_thirty_thousand_deep_is_read() {
        let depth = 30_000;
        let page = format!(
            "<html><body>{}<p>deep words</p>{}</body></html>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        // Run on a thread with the default 2 MiB stack: no recursion per level.
        let text = std::thread::spawn(move || extract(&page).0.text)
            .join()
            .unwrap();
        assert!(text.contains("deep words"), "{text:?}");
    }

    #[test]
    fn list_items_with_paragraphs_and_nested_lists() {
        let (b, _) = extract("<main><ul><li><p>First <b>item</b></p></li><li>Second<ul><li>deep</li></ul></li></ul></main>");
        let rendered: Vec<String> = b
            .blocks
            .iter()
            .map(|bl| format!("{:?}={}", bl.kind, &b.text[bl.start..bl.end]))
            .collect();
        assert_eq!(
            rendered,
            [
                "ListItem=- First item",
                "ListItem=- Second",
                "ListItem=- deep"
            ]
        );
    }

    #[test]
    fn readability_fallback_picks_the_text_block() {
        let src = r#"<html><body><div class="top"><a href="/">Home</a> <a href="/a">About</a></div>
            <div id="content"><h2>Returns</h2><p>You can return the desk within thirty days of delivery for a full refund.</p>
            <p>Keep the original packaging; the courier collects it from your door at no cost.</p></div>
            <div class="links"><p><a href="/x">Privacy policy and terms of service</a></p></div></body></html>"#;
        let (b, _) = extract(src);
        assert_eq!(
            b.text,
            "Returns\n\nYou can return the desk within thirty days of delivery for a full refund.\n\nKeep the original packaging; the courier collects it from your door at no cost."
        );
        assert_eq!(b.blocks[0].kind, BlockKind::Heading { level: 2 });
    }
}
