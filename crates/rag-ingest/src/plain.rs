//! Plain text: paragraphs are separated by blank lines; lines inside a
//! paragraph are kept as they are.

use crate::doc::{BlockKind, TextBuilder};

pub(crate) fn extract(text: &str) -> TextBuilder {
    let mut out = TextBuilder::default();
    let mut para = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            out.push(BlockKind::Paragraph, &para);
            para.clear();
        } else {
            if !para.is_empty() {
                para.push('\n');
            }
            para.push_str(line.trim_end());
        }
    }
    out
}
