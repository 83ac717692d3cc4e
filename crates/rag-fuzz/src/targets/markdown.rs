//! Markdown through [`rag_ingest::extract`] (pulldown-cmark with tables).

use rag_ingest::{extract, Limits};

use super::{check, Sig};
use crate::mutate::Grammar;

/// Tokens of Markdown.
pub const GRAMMAR: Grammar = Grammar {
    dict: &[
        "# ",
        "## ",
        "###### ",
        "####### ",
        "\n===\n",
        "\n---\n",
        "> ",
        "- ",
        "* ",
        "1. ",
        "9999999999. ",
        "- [ ] ",
        "```\n",
        "```rust\n",
        "~~~\n",
        "    ",
        "\t",
        "| a | b |\n",
        "|---|:-:|\n",
        "| 中 | 文 |\n",
        "[link](https://example.org)",
        "![img](x.png)",
        "[ref]: /url \"title\"\n",
        "[^1]",
        "[^1]: note\n",
        "**",
        "__",
        "*",
        "`",
        "<div>",
        "</div>",
        "<!--",
        "-->",
        "&amp;",
        "&#0;",
        "\\",
        "\n\n",
        "  \n",
        "中文句子。",
    ],
    nest: &[
        ("> ", ""),
        ("- ", ""),
        ("1. ", ""),
        ("[", "](u)"),
        ("*", "*"),
        ("**", "**"),
        ("`", "`"),
        ("<div>", "</div>"),
        ("> - ", "\n"),
        ("  - ", "\n"),
    ],
    text: true,
};

/// Runs one input.
pub fn run(bytes: &[u8]) -> u64 {
    let mut sig = Sig::new();
    let r = extract("notes.md", Some("text/markdown"), bytes, &Limits::default());
    check::extraction(&r, &mut sig);
    sig.finish()
}
