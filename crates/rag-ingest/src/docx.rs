//! DOCX (Office Open XML): paragraphs of `word/document.xml`; a paragraph is a
//! heading when its style is a heading style (`heading N`/`Title` by name in
//! `word/styles.xml`, an outline level, or a style id `HeadingN`). Zip
//! entries are read with a cap on their decompressed size, so a zip bomb is
//! refused instead of filling memory.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::doc::{BlockKind, TextBuilder};
use crate::{IngestError, Limits};

fn read_entry(
    zip: &mut zip::ZipArchive<Cursor<&[u8]>>,
    name: &str,
    limits: &Limits,
) -> Result<Option<String>, IngestError> {
    let mut file = match zip.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(IngestError::malformed("docx", format!("{name}: {e}"))),
    };
    let limit = limits.max_decompressed_bytes;
    let too_large = |size: u64| IngestError::TooLarge {
        what: format!("{name} (decompressed)"),
        size,
        limit,
    };
    if file.size() > limit {
        return Err(too_large(file.size()));
    }
    // The declared size may lie: read at most one byte past the limit.
    let mut data = Vec::new();
    (&mut file)
        .take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| IngestError::malformed("docx", format!("{name}: {e}")))?;
    if data.len() as u64 > limit {
        return Err(too_large(data.len() as u64));
    }
    String::from_utf8(data)
        .map(Some)
        .map_err(|_| IngestError::malformed("docx", format!("{name} is not UTF-8")))
}

fn attr(e: &BytesStart<'_>, local: &str) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == local)
        .and_then(|a| {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
}

fn xml_err(name: &str, e: impl std::fmt::Display) -> IngestError {
    IngestError::malformed("docx", format!("{name}: {e}"))
}

/// Heading level from a style's name (`heading 2`, `Title`).
fn level_from_name(name: &str) -> Option<u8> {
    let n = name.trim().to_ascii_lowercase();
    if n == "title" {
        return Some(1);
    }
    let rest = n.strip_prefix("heading")?.trim();
    rest.parse::<u8>().ok().filter(|l| (1..=9).contains(l))
}

/// Style id → heading level, from `word/styles.xml`.
fn heading_styles(xml: &str) -> Result<HashMap<String, u8>, IngestError> {
    let mut map = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut cur: Option<String> = None;
    loop {
        match reader
            .read_event()
            .map_err(|e| xml_err("word/styles.xml", e))?
        {
            Event::Start(e) | Event::Empty(e) => match e.local_name().as_ref() {
                "style" => cur = attr(&e, "styleId"),
                "name" => {
                    if let (Some(id), Some(level)) =
                        (&cur, attr(&e, "val").as_deref().and_then(level_from_name))
                    {
                        map.insert(id.clone(), level);
                    }
                }
                "outlineLvl" => {
                    if let (Some(id), Some(l)) =
                        (&cur, attr(&e, "val").and_then(|v| v.parse::<u8>().ok()))
                    {
                        if l < 9 {
                            map.entry(id.clone()).or_insert(l + 1);
                        }
                    }
                }
                _ => {}
            },
            Event::End(e) if e.local_name().as_ref() == "style" => cur = None,
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(map)
}

fn level_from_id(id: &str) -> Option<u8> {
    level_from_name(id).or_else(|| {
        let lower = id.to_ascii_lowercase();
        lower
            .strip_prefix("heading")
            .and_then(|d| d.parse::<u8>().ok())
            .filter(|l| (1..=9).contains(l))
    })
}

fn resolve_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => return None,
    })
}

/// Text and blocks of a DOCX file, and its title (the `Title` paragraph or
/// the first level-1 heading).
pub(crate) fn extract(
    bytes: &[u8],
    limits: &Limits,
) -> Result<(TextBuilder, Option<String>), IngestError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| IngestError::malformed("docx", format!("not a zip archive: {e}")))?;
    if zip.len() > 10_000 {
        return Err(IngestError::malformed(
            "docx",
            format!("{} zip entries", zip.len()),
        ));
    }
    let doc = read_entry(&mut zip, "word/document.xml", limits)?.ok_or_else(|| {
        IngestError::malformed("docx", "no word/document.xml (not a Word document)")
    })?;
    let styles = match read_entry(&mut zip, "word/styles.xml", limits)? {
        Some(xml) => heading_styles(&xml)?,
        None => HashMap::new(),
    };

    let mut out = TextBuilder::default();
    let mut title = None;
    let mut reader = Reader::from_str(&doc);
    let mut buf = String::new();
    let mut level: Option<u8> = None;
    let mut list = false;
    let mut in_text = false;
    let mut in_ppr = false;
    let mut in_p = false;
    let mut outer: Vec<(String, Option<u8>, bool)> = Vec::new();
    // Inside `mc:Fallback`: a copy of the `mc:Choice` content (text boxes), skipped.
    let mut fallback = 0usize;
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| xml_err("word/document.xml", e))?;
        match &ev {
            Event::Start(e) if e.local_name().as_ref() == "Fallback" => fallback += 1,
            Event::End(e) if e.local_name().as_ref() == "Fallback" => {
                fallback = fallback.saturating_sub(1)
            }
            _ => {}
        }
        if fallback > 0 && !matches!(ev, Event::Eof) {
            continue;
        }
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                match e.local_name().as_ref() {
                    "p" if !empty => {
                        // A paragraph inside a paragraph (a text box): finish the outer one later.
                        if in_p {
                            outer.push((std::mem::take(&mut buf), level, list));
                        }
                        in_p = true;
                        buf.clear();
                        level = None;
                        list = false;
                    }
                    "pPr" if !empty => in_ppr = true,
                    "pStyle" if in_ppr => {
                        if let Some(id) = attr(e, "val") {
                            level = styles.get(&id).copied().or_else(|| level_from_id(&id));
                            if level_from_name(&id) == Some(1) && id.eq_ignore_ascii_case("title") {
                                title = Some(String::new());
                            }
                        }
                    }
                    "outlineLvl" if in_ppr => {
                        if let Some(l) = attr(e, "val")
                            .and_then(|v| v.parse::<u8>().ok())
                            .filter(|l| *l < 9)
                        {
                            level = Some(l + 1);
                        }
                    }
                    "numPr" if in_ppr => list = true,
                    "t" if !empty => in_text = true,
                    "tab" if !in_ppr => buf.push('\t'),
                    "br" | "cr" => buf.push('\n'),
                    "noBreakHyphen" => buf.push('-'),
                    _ => {}
                }
            }
            Event::End(ref e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "pPr" => in_ppr = false,
                "p" => {
                    let kind = match (level, list) {
                        (Some(l), _) => BlockKind::Heading { level: l },
                        (None, true) => BlockKind::ListItem,
                        (None, false) => BlockKind::Paragraph,
                    };
                    let text = if kind == BlockKind::ListItem {
                        format!("- {}", buf.trim())
                    } else {
                        buf.clone()
                    };
                    if matches!(title.as_deref(), Some("")) {
                        title = Some(buf.trim().to_owned());
                    }
                    if !buf.trim().is_empty() {
                        out.push(kind, &text);
                    }
                    buf.clear();
                    match outer.pop() {
                        Some((b, l, li)) => (buf, level, list) = (b, l, li),
                        None => in_p = false,
                    }
                }
                _ => {}
            },
            Event::Text(t) if in_text => buf.push_str(&t.xml10_content()),
            Event::CData(t) if in_text => buf.push_str(&t),
            Event::GeneralRef(r) if in_text => {
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c),
                    _ => resolve_entity(&r),
                };
                if let Some(c) = c {
                    buf.push(c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let title = title
        .filter(|t| !t.is_empty())
        .or_else(|| out.first_heading(1));
    Ok((out, title))
}
