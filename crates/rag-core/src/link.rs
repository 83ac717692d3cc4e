//! Which stored links may come back as clickable citation links.

/// Longest link stored.
pub const MAX_LINK_BYTES: usize = 2048;

/// Whether `url` is an `http` or `https` URL with a host, without control
/// characters (URL parsers drop tabs and line breaks, so `java\tscript:` is
/// `javascript:` to a browser) and at most [`MAX_LINK_BYTES`] long. Anything
/// else (`javascript:`, `data:`, …) must not be stored as a link.
pub fn is_web_link(url: &str) -> bool {
    if url.len() > MAX_LINK_BYTES || url.chars().any(char::is_control) {
        return false;
    }
    let lower = url.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    rest.is_some_and(|r| {
        r.split(['/', '?', '#', '\\'])
            .next()
            .is_some_and(|host| !host.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_links_with_a_host() {
        assert!(is_web_link("https://x.example/p?q=1"));
        assert!(is_web_link("HTTP://x.example"));
        for bad in [
            "javascript:alert(1)",
            "java\tscript:alert(1)",
            "data:text/html,x",
            "https:///path",
            "http://",
            "ftp://x.example",
        ] {
            assert!(!is_web_link(bad), "{bad:?}");
        }
        assert!(!is_web_link(&format!(
            "https://x.example/{}",
            "a".repeat(MAX_LINK_BYTES)
        )));
    }
}
