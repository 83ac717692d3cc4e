//! The parameters every paginated listing reads (`limit`, `cursor`), checked
//! the same way: 400 `invalid_param` naming the parameter.

use crate::error::ApiError;
use rag_core::{CoreError, UserError, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT};

/// 400 `invalid_param` for parameter `name`.
pub(super) fn invalid(name: &'static str, reason: String) -> ApiError {
    ApiError::from(CoreError::from(UserError::InvalidParam { name, reason }))
}

/// At most 40 characters of what the client sent, for a message.
pub(super) fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

/// The page size: [`DEFAULT_PAGE_LIMIT`] when absent, else a whole number
/// from 1 to [`MAX_PAGE_LIMIT`].
pub(super) fn limit(text: Option<&str>) -> Result<usize, ApiError> {
    match text.map(str::trim) {
        None => Ok(DEFAULT_PAGE_LIMIT),
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE_LIMIT).contains(n))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!(
                        "must be a whole number from 1 to {MAX_PAGE_LIMIT}, not {:?}",
                        shown(text)
                    ),
                )
            }),
    }
}

/// Where the page starts: `None` (the first page) when absent or empty,
/// else a cursor `decode` reads.
pub(super) fn cursor<T>(
    text: Option<&str>,
    decode: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, ApiError> {
    match text.filter(|c| !c.is_empty()) {
        None => Ok(None),
        Some(text) => decode(text).map(Some).ok_or_else(|| {
            invalid(
                "cursor",
                "is not a cursor of this listing: pass the `next_cursor` of the previous page"
                    .into(),
            )
        }),
    }
}
