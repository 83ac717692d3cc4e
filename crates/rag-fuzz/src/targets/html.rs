//! HTML: extraction of a page's main text (in the extract worker) and the
//! crawler's link list (in the server process).

use std::collections::HashSet;

use rag_ingest::{extract, html_links, Limits};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of HTML.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "<!DOCTYPE html>",
        "<html>",
        "</html>",
        "<head>",
        "<title>",
        "</title>",
        "<body>",
        "</body>",
        "<main>",
        "</main>",
        "<div role=\"main\">",
        "<article>",
        "</article>",
        "<nav>",
        "<div class=\"sidebar footer\">",
        "</div>",
        "<p>",
        "</p>",
        "<h1>",
        "</h1>",
        "<h3>",
        "<ul>",
        "<ol>",
        "<li>",
        "</li>",
        "</ul>",
        "<pre>",
        "</pre>",
        "<table>",
        "<tr>",
        "<td>",
        "<th>",
        "</table>",
        "<br>",
        "<img src=x>",
        "<a href=\"/next\">",
        "<a href=\"https://example.org/a#frag\">",
        "<a href=\"javascript:x()\">",
        "<a rel=\"nofollow\" href=\"/x\">",
        "<area href=\"/map\">",
        "<base href=\"/root/\">",
        "</a>",
        "<script>",
        "</script>",
        "<style>",
        "<template>",
        "<svg>",
        "<math>",
        "<select>",
        "<textarea>",
        "<noscript>",
        "<frameset>",
        "<![CDATA[",
        "<!--",
        "-->",
        "&nbsp;",
        "&amp;",
        "&#x10FFFF;",
        "&#0;",
        "&#x110000;",
        "<meta charset=\"gbk\">",
        "\u{3000}",
        "中文段落。",
    ],
    nest: &[
        ("<div>", "</div>"),
        ("<ul><li>", "</li></ul>"),
        ("<table><tr><td>", "</td></tr></table>"),
        ("<b>", "</b>"),
        ("<a href=\"/n\">", "</a>"),
        ("<article>", "</article>"),
        ("<blockquote>", "</blockquote>"),
        ("<pre>", "</pre>"),
        ("<span>", "</span>"),
        ("<p>", ""),
        ("<li>", ""),
        ("<font>", ""),
    ],
    text: true,
};

/// Extraction, as the worker runs it.
pub fn run_extract(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let r = extract("page.html", Some("text/html"), bytes, &Limits::default());
    check::extraction(&r, &mut sig);
    sig.finish()
}

/// The crawler's links: no fragments, no `javascript:`/`mailto:`/`tel:`/
/// `data:` links, no empty or repeated ones (the first entry may be the
/// page's `<base href>`, which is kept as written).
pub fn run_links(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let page = String::from_utf8_lossy(bytes);
    let links = html_links(&page);
    let mut seen = HashSet::new();
    for (i, l) in links.iter().enumerate() {
        ensure!(!l.contains('#'), "link {l:?} has a fragment");
        if i == 0 {
            continue;
        }
        let lower = l.to_ascii_lowercase();
        ensure!(
            !l.is_empty()
                && !["javascript:", "mailto:", "tel:", "data:"]
                    .iter()
                    .any(|p| lower.starts_with(p)),
            "link {l:?} should have been dropped"
        );
        ensure!(seen.insert(l.as_str()), "link {l:?} twice");
        sig.add(l.starts_with('/')).add(l.contains("://"));
    }
    sig.magnitude(links.len()).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_of_a_page() {
        run_links(b"<base href=/r/><a href=/a#x>a</a><a href=/a>b</a><a href='javascript:1'>c</a>");
        run_extract(b"<main><h1>T</h1><p>text</p></main>");
    }
}
