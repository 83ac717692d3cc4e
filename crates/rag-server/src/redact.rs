//! Redaction at the edge: everything shown goes through
//! `rag_core::redact` (one function for the whole workspace); this module
//! adds the check that refuses URL sources with credentials.

/// The text with every URL in it redacted (userinfo and secret query
/// parameters): `rag_core::redact::redact_text`.
pub(crate) fn redact_url(text: &str) -> String {
    rag_core::redact::redact_text(text)
}

/// Whether a URL as given holds credentials in its userinfo
/// (`scheme://user:pass@host`). Tabs and line breaks, which URL parsers
/// drop, are dropped first.
pub(crate) fn has_userinfo(url: &str) -> bool {
    let url: String = url
        .trim()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let Some(at) = url.find("://") else {
        return false;
    };
    let after = &url[at + 3..];
    let auth_end = after.find(['/', '?', '#', '\\']).unwrap_or(after.len());
    after[..auth_end].contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_detected_as_url_parsers_read_it() {
        assert!(has_userinfo("https://user:pass@example.com/"));
        assert!(has_userinfo("https://user@example.com"));
        assert!(has_userinfo(" https://us\ter:pw@example.com/"));
        assert!(!has_userinfo("https://example.com/a@b"));
        assert!(!has_userinfo("https://example.com?x=a@b"));
        assert!(!has_userinfo("https://example.com\\@evil"));
        assert!(!has_userinfo("https://example.com"));
    }
}
