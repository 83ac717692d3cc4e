//! One retry policy for every outbound model call (chat, embeddings,
//! rerank): which statuses are worth another try, how long to wait between
//! tries, and `Retry-After` in both its forms (seconds, or an HTTP date). A
//! server that asks for a longer wait than the policy allows ends the call
//! at once with its error, rather than holding the request for minutes.

use std::time::{Duration, SystemTime};

/// What a response's status means for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusClass {
    /// 2xx.
    Success,
    /// 401 or 403: the key is wrong; retrying cannot help.
    Unauthorized,
    /// 408, 425, 429 and 5xx: another try may succeed.
    Retryable,
    /// Any other status: the request itself is wrong.
    Fatal,
}

/// Classifies an HTTP status.
pub(crate) fn classify(status: u16) -> StatusClass {
    match status {
        200..=299 => StatusClass::Success,
        401 | 403 => StatusClass::Unauthorized,
        408 | 425 | 429 | 500..=599 => StatusClass::Retryable,
        _ => StatusClass::Fatal,
    }
}

/// The wait a `Retry-After` header asks for: delay-seconds, or an HTTP date
/// (then the time from `now` until it; a date in the past is no wait).
pub(crate) fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    parse_retry_after(v, now)
}

fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let date =
        time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc2822).ok()?;
    let at = SystemTime::from(date);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// How often and how long a client retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff, in milliseconds; doubles with every retry.
    pub backoff_ms: u64,
    /// Largest backoff, in milliseconds.
    pub max_backoff_ms: u64,
    /// Longest `Retry-After` honoured, in milliseconds; a longer one ends the call.
    pub max_wait_ms: u64,
}

/// What to do after a retryable failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Wait this long, then try again.
    Wait(Duration),
    /// Give up: the error stands.
    GiveUp,
}

impl RetryPolicy {
    /// After the `attempt`-th attempt (from 1) failed in a retryable way,
    /// with the server's `Retry-After` if it sent one.
    pub(crate) fn decide(&self, attempt: u32, retry_after: Option<Duration>) -> Decision {
        if attempt > self.max_retries {
            return Decision::GiveUp;
        }
        match retry_after {
            Some(wait) if wait.as_millis() > u128::from(self.max_wait_ms) => Decision::GiveUp,
            Some(wait) => Decision::Wait(wait),
            None => Decision::Wait(Duration::from_millis(
                self.backoff_ms
                    .saturating_mul(1 << (attempt.saturating_sub(1)).min(16))
                    .min(self.max_backoff_ms),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_once() {
        assert_eq!(classify(200), StatusClass::Success);
        assert_eq!(classify(401), StatusClass::Unauthorized);
        assert_eq!(classify(403), StatusClass::Unauthorized);
        for s in [408, 425, 429, 500, 502, 503, 504] {
            assert_eq!(classify(s), StatusClass::Retryable, "{s}");
        }
        for s in [400, 404, 413, 422] {
            assert_eq!(classify(s), StatusClass::Fatal, "{s}");
        }
    }

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00 UTC
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn waits_back_off_and_long_waits_end_the_call() {
        let p = RetryPolicy {
            max_retries: 3,
            backoff_ms: 100,
            max_backoff_ms: 250,
            max_wait_ms: 1_000,
        };
        assert_eq!(
            p.decide(1, None),
            Decision::Wait(Duration::from_millis(100))
        );
        assert_eq!(
            p.decide(2, None),
            Decision::Wait(Duration::from_millis(200))
        );
        assert_eq!(
            p.decide(3, None),
            Decision::Wait(Duration::from_millis(250))
        );
        assert_eq!(p.decide(4, None), Decision::GiveUp);
        assert_eq!(
            p.decide(1, Some(Duration::from_millis(900))),
            Decision::Wait(Duration::from_millis(900))
        );
        assert_eq!(p.decide(1, Some(Duration::from_secs(5))), Decision::GiveUp);
    }
}
