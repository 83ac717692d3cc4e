//! A knowledge base's language, judged by the Han characters and ASCII
//! letters of its searchable text.

/// The language of text with `han` Han characters and `latin` ASCII letters
/// (a Chinese character weighs about as much as four letters).
pub fn language_of_script(han: u64, latin: u64) -> rag_core::Language {
    let latin = latin / 4;
    match (han, latin) {
        (0, 0) => rag_core::Language::Unknown,
        _ if han >= 4 * latin => rag_core::Language::Zh,
        _ if latin >= 4 * han => rag_core::Language::En,
        _ => rag_core::Language::Mixed,
    }
}

/// The Han characters and ASCII letters of a passage's match text
/// ([`PassageTerms::match_text`]), as the index counts them for the
/// knowledge base's language.
pub fn script_of(match_text: &str) -> (u32, u32) {
    let s = crate::segment::Script::of(match_text);
    (s.han, s.latin)
}
