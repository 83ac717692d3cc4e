//! HTML main text. The content root is `<main>` (or `role=main`), else the
//! largest `<article>`, else the element whose paragraphs hold the most text
//! (a readability-style score: a paragraph's text counts fully for its parent
//! and half for its grandparent). Inside the root, navigation, headers outside
//! articles, footers, asides, forms, scripts, styles, hidden elements and
//! link lists are left out. Headings are kept as heading blocks.

use ego_tree::NodeRef;
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

/// Text length of a subtree and of its link text, in characters, skipping
/// dropped elements.
fn text_lens(node: NodeRef<'_, Node>, in_link: bool) -> (usize, usize) {
    match node.value() {
        Node::Text(t) => {
            let n = t.chars().filter(|c| !c.is_whitespace()).count();
            (n, if in_link { n } else { 0 })
        }
        Node::Element(el) if is_dropped(el, true) => (0, 0),
        Node::Element(el) => {
            let link = in_link || el.name() == "a";
            node.children()
                .map(|c| text_lens(c, link))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        }
        _ => (0, 0),
    }
}

fn element<'a>(node: NodeRef<'a, Node>) -> Option<&'a Element> {
    node.value().as_element()
}

fn find_all<'a>(
    node: NodeRef<'a, Node>,
    pred: &dyn Fn(&Element) -> bool,
    out: &mut Vec<NodeRef<'a, Node>>,
) {
    for c in node.children() {
        if let Some(el) = element(c) {
            if pred(el) {
                out.push(c);
            }
            find_all(c, pred, out);
        }
    }
}

fn content_root(doc: &Html) -> NodeRef<'_, Node> {
    let root = doc.tree.root();
    let mut mains = Vec::new();
    find_all(
        root,
        &|e| e.name() == "main" || e.attr("role") == Some("main"),
        &mut mains,
    );
    if let Some(m) = mains.into_iter().max_by_key(|m| text_lens(*m, false).0) {
        if text_lens(m, false).0 > 0 {
            return m;
        }
    }
    let mut articles = Vec::new();
    find_all(root, &|e| e.name() == "article", &mut articles);
    if let Some(a) = articles.into_iter().max_by_key(|a| text_lens(*a, false).0) {
        if text_lens(a, false).0 > 0 {
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
    let mut scores: std::collections::HashMap<ego_tree::NodeId, f64> =
        std::collections::HashMap::new();
    let mut add = |id: ego_tree::NodeId, s: f64| *scores.entry(id).or_default() += s;
    for p in paragraphs {
        let (len, link) = text_lens(p, false);
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

struct Walker {
    out: TextBuilder,
    buf: String,
    kind: BlockKind,
    pre: usize,
    in_article: bool,
}

impl Walker {
    fn flush(&mut self) {
        self.out.push(self.kind, &self.buf);
        self.buf.clear();
        self.kind = BlockKind::Paragraph;
    }

    fn block(&mut self, node: NodeRef<'_, Node>, kind: BlockKind) {
        // `<li><p>text</p></li>`: the paragraph continues the list item.
        if self.kind == BlockKind::ListItem
            && self.buf.trim() == "-"
            && kind == BlockKind::Paragraph
        {
            self.children(node);
            return;
        }
        self.flush();
        self.kind = kind;
        self.children(node);
        // Text after a nested block inside this one is emitted as a paragraph.
        self.flush();
    }

    fn children(&mut self, node: NodeRef<'_, Node>) {
        for c in node.children() {
            self.walk(c);
        }
    }

    fn walk(&mut self, node: NodeRef<'_, Node>) {
        match node.value() {
            Node::Text(t) => {
                if self.pre > 0 {
                    self.buf.push_str(t);
                } else {
                    collapse_ws(t, &mut self.buf);
                }
            }
            Node::Element(el) => {
                if is_dropped(el, self.in_article) {
                    return;
                }
                let name = el.name();
                match name {
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                        let level = name.as_bytes()[1] - b'0';
                        self.block(node, BlockKind::Heading { level });
                    }
                    "li" => {
                        self.flush();
                        self.kind = BlockKind::ListItem;
                        self.buf.push_str("- ");
                        self.children(node);
                        self.flush();
                    }
                    "ul" | "ol" => {
                        // A list that is nearly all links is navigation.
                        let (len, link) = text_lens(node, false);
                        if len > 0
                            && link * 10 >= len * 8
                            && node.children().filter(|c| element(*c).is_some()).count() >= 3
                        {
                            return;
                        }
                        self.block(node, BlockKind::Paragraph);
                    }
                    "pre" => {
                        self.pre += 1;
                        self.block(node, BlockKind::Code);
                        self.pre -= 1;
                    }
                    "tr" => self.block(node, BlockKind::TableRow),
                    "td" | "th" => {
                        if self.kind == BlockKind::TableRow && !self.buf.trim().is_empty() {
                            self.buf.push_str(" | ");
                        }
                        self.children(node);
                    }
                    "br" => self.buf.push('\n'),
                    "img" => {}
                    "article" => {
                        let was = self.in_article;
                        self.in_article = true;
                        self.block(node, BlockKind::Paragraph);
                        self.in_article = was;
                    }
                    "blockquote" => self.block(node, BlockKind::Paragraph),
                    _ if BLOCKS.contains(&name) => self.block(node, BlockKind::Paragraph),
                    _ => self.children(node),
                }
            }
            _ => {}
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
/// (the first `<h1>` of the main text, else `<title>`).
pub(crate) fn extract(src: &str) -> (TextBuilder, Option<String>) {
    let doc = Html::parse_document(src);
    let root = content_root(&doc);
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

/// The `href`s of a page's links, in document order, without duplicates,
/// fragments, or `javascript:`, `mailto:`, `tel:` and `data:` links; relative
/// links are returned as written (the crawler resolves them against the page
/// URL and keeps same-site ones). Also `<base href>` if present, first.
pub fn links(src: &str) -> Vec<String> {
    let doc = Html::parse_document(src);
    let mut anchors = Vec::new();
    find_all(
        doc.tree.root(),
        &|e| matches!(e.name(), "a" | "area" | "base") && e.attr("href").is_some(),
        &mut anchors,
    );
    let mut out: Vec<String> = Vec::new();
    let mut base = None;
    for a in anchors {
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
        if !out.iter().any(|o| o == href) {
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
