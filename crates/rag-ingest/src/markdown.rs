//! Markdown: headings become heading blocks; text of paragraphs, list items,
//! code blocks and table rows is kept; link targets, HTML, images' URLs and
//! emphasis markers are dropped.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::doc::{BlockKind, TextBuilder};

fn level(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

struct State {
    out: TextBuilder,
    kind: BlockKind,
    buf: String,
    /// Next number of each open list (`None`: bulleted).
    lists: Vec<Option<u64>>,
    /// Inside front matter or an HTML block: text is dropped.
    skip: usize,
    /// Bytes of `buf` that are only a list marker.
    marker_len: usize,
}

impl State {
    fn flush(&mut self) {
        if self.buf.len() > self.marker_len {
            self.out.push(self.kind, &self.buf);
        }
        self.buf.clear();
        self.marker_len = 0;
        self.kind = BlockKind::Paragraph;
    }

    fn start(&mut self, kind: BlockKind) {
        self.flush();
        self.kind = kind;
    }
}

/// Extracts text and blocks from Markdown source. Returns the builder and the
/// first level-1 heading.
pub(crate) fn extract(src: &str) -> (TextBuilder, Option<String>) {
    let opts = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_PLUSES_DELIMITED_METADATA_BLOCKS;
    let mut st = State {
        out: TextBuilder::default(),
        kind: BlockKind::Paragraph,
        buf: String::new(),
        lists: vec![],
        skip: 0,
        marker_len: 0,
    };
    for ev in Parser::new_ext(src, opts) {
        match ev {
            Event::Start(Tag::MetadataBlock(_)) | Event::Start(Tag::HtmlBlock) => st.skip += 1,
            Event::End(TagEnd::MetadataBlock(_)) | Event::End(TagEnd::HtmlBlock) => {
                st.skip = st.skip.saturating_sub(1)
            }
            _ if st.skip > 0 => {}
            Event::Start(Tag::Heading { level: l, .. }) => {
                st.start(BlockKind::Heading { level: level(l) })
            }
            // The first paragraph of a list item continues the item.
            Event::Start(Tag::Paragraph)
                if st.kind == BlockKind::ListItem && st.buf.len() == st.marker_len => {}
            Event::Start(Tag::Paragraph) => st.start(BlockKind::Paragraph),
            Event::Start(Tag::List(first)) => {
                st.flush();
                st.lists.push(first);
            }
            Event::End(TagEnd::List(_)) => {
                st.flush();
                st.lists.pop();
            }
            Event::Start(Tag::Item) => {
                st.start(BlockKind::ListItem);
                let depth = st.lists.len().saturating_sub(1);
                st.buf.push_str(&"  ".repeat(depth));
                match st.lists.last_mut() {
                    Some(Some(n)) => {
                        st.buf.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => st.buf.push_str("- "),
                }
                st.marker_len = st.buf.len();
            }
            Event::Start(Tag::CodeBlock(_)) => st.start(BlockKind::Code),
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                st.start(BlockKind::TableRow)
            }
            Event::Start(Tag::TableCell) if !st.buf.is_empty() => st.buf.push_str(" | "),
            Event::Start(Tag::FootnoteDefinition(label)) => {
                st.start(BlockKind::Paragraph);
                st.buf.push_str(&format!("[^{label}]: "));
                st.marker_len = st.buf.len();
            }
            Event::Start(Tag::BlockQuote(_))
            | Event::End(TagEnd::BlockQuote(_))
            | Event::Start(Tag::Table(_))
            | Event::End(TagEnd::Table) => st.flush(),
            Event::End(TagEnd::Heading(_))
            | Event::End(TagEnd::Item)
            | Event::End(TagEnd::CodeBlock)
            | Event::End(TagEnd::TableHead)
            | Event::End(TagEnd::TableRow)
            | Event::End(TagEnd::FootnoteDefinition) => st.flush(),
            Event::End(TagEnd::Paragraph) if st.kind == BlockKind::Paragraph => st.flush(),
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                st.buf.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => st.buf.push('\n'),
            Event::TaskListMarker(done) => st.buf.push_str(if done { "[x] " } else { "[ ] " }),
            Event::Rule => st.flush(),
            // Link targets, inline HTML, emphasis and the like: markup, not text.
            _ => {}
        }
    }
    st.flush();
    let title = st.out.first_heading(1);
    (st.out, title)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str) -> String {
        let (b, _) = extract(src);
        b.blocks
            .iter()
            .map(|bl| format!("{:?}: {}", bl.kind, &b.text[bl.start..bl.end]))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn drops_markup_keeps_text() {
        let src = "---\ntitle: x\n---\n# 保修 *政策*\n\nSee [the guide](http://x.y/z) and `cfg`.<br>\n\n- one\n- two\n  1. deep\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode  here\n```\n";
        assert_eq!(
            render(src),
            "Heading { level: 1 }: 保修 政策\nParagraph: See the guide and cfg.\nListItem: - one\nListItem: - two\nListItem: 1. deep\nTableRow: a | b\nTableRow: 1 | 2\nCode: code  here"
        );
    }
}
