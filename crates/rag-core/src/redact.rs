//! One redaction for URLs and the texts that carry them: logs, events,
//! `/system` and `check-config` all go through [`redact_url`] or
//! [`redact_text`], so a credential written into a base URL never leaves
//! the configuration.

/// Query parameters whose values are secrets (compared case-insensitively;
/// also any name ending in one of them, such as `x_api_key`).
const SECRET_PARAMS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "token",
    "access_token",
    "auth",
    "secret",
    "password",
    "passwd",
    "pwd",
    "signature",
    "sig",
    "credential",
    "credentials",
    "refresh_token",
    "id_token",
    "auth_token",
    "client_secret",
];

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// A query parameter's name with `%XX` escapes decoded (`api%5Fkey` is `api_key`).
fn decode_name(name: &str) -> String {
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_secret_param(name: &str) -> bool {
    let n = decode_name(name.trim())
        .to_ascii_lowercase()
        .replace('-', "_");
    SECRET_PARAMS
        .iter()
        .any(|s| n == *s || n.ends_with(&format!("_{s}")))
}

/// A URL without its secrets: the userinfo (`user:pass@`) becomes `***@`
/// and the values of secret query parameters (`key`, `token`, `api_key`,
/// `secret`, `password`, …) become `***`. Anything that is not a URL comes
/// back unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    {
        return url.to_owned();
    }
    // The authority ends at the first '/', '?', '#' or '\\' (a path
    // separator to browsers and the URL standard).
    let auth_end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{REDACTED}@{host}"),
        None => authority.to_owned(),
    };
    let (before_frag, frag) = match tail.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (tail, None),
    };
    let tail = match before_frag.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, v)) if !v.is_empty() && is_secret_param(k) => {
                        format!("{k}={REDACTED}")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => before_frag.to_owned(),
    };
    let frag = frag.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{scheme}://{authority}{tail}{frag}")
}

/// A text with every URL in it (`scheme://…` up to whitespace, a quote or
/// a closing bracket) passed through [`redact_url`]: error messages and
/// warnings that quote a provider's address.
pub fn redact_text(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        // The scheme: the letters just before "://".
        let start = rest[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || "+.-".contains(*c))
            .last()
            .map_or(i, |(p, _)| p);
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || "\"'<>()[]{}`,".contains(c))
            .map_or(rest.len(), |e| i + e);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_secret_parameters_are_removed() {
        assert_eq!(
            redact_url("https://user:pa:ss@llm.example/v1?api_key=abc&model=x#frag"),
            "https://***@llm.example/v1?api_key=***&model=x#frag"
        );
        assert_eq!(
            redact_url("postgres://app:s3cr@t@db:5432/r"),
            "postgres://***@db:5432/r"
        );
        assert_eq!(
            redact_url("http://h/p?Token=1&X-Api-Key=2&page=3"),
            "http://h/p?Token=***&X-Api-Key=***&page=3"
        );
        assert_eq!(redact_url("http://h:8000/v1"), "http://h:8000/v1");
        assert_eq!(redact_url("not a url"), "not a url");
        // An '@' in the path is not userinfo.
        assert_eq!(redact_url("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn urls_inside_texts_are_redacted() {
        assert_eq!(
            redact_text("error sending request for url (http://u:p@x.io/v1/chat?key=k): refused"),
            "error sending request for url (http://***@x.io/v1/chat?key=***): refused"
        );
        assert_eq!(
            redact_text("openai-compatible:m@https://a:b@h/v1 and \"https://h2/?token=t\""),
            "openai-compatible:m@https://***@h/v1 and \"https://h2/?token=***\""
        );
        assert_eq!(redact_text("plain text"), "plain text");
        assert_eq!(
            redact_text(
                "https://h/?key=k&secret=s&password=p&access_token=a&api-key=b&api%5Fkey=c"
            ),
            "https://h/?key=***&secret=***&password=***&access_token=***&api-key=***&api%5Fkey=***"
        );
        assert_eq!(redact_text("https://u:p@ss@h/"), "https://***@h/");
        for same in [
            "",
            "identity",
            "openai-compatible:gpt-4o@https://api.example.com/v1",
            "rerank:bge@http://127.0.0.1:8080",
            "https://h/p?q=1&keyword=x&monkey=2",
            "mailto:someone@example.com",
            "https://example.com\\@evil",
        ] {
            assert_eq!(redact_text(same), same);
        }
    }
}
