//! Browser login sessions, held in memory by the application state: a
//! restart logs everyone out. The cookie and CSRF rules are in [`crate::auth`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A session ends after this long without a request.
pub(crate) const SESSION_IDLE: Duration = Duration::from_secs(8 * 3600);
/// A session ends this long after login, used or not.
pub(crate) const SESSION_MAX: Duration = Duration::from_secs(24 * 3600);
/// Most live sessions; the least recently used goes first.
const SESSIONS_MAX: usize = 10_000;

/// A browser session: the hash of the key it logged in with (resolved again on
/// every request, so revoking the key ends the session) and its CSRF token.
struct Session {
    key_hash: String,
    csrf: String,
    created: Instant,
    last_seen: Instant,
}

impl Session {
    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.created) < SESSION_MAX
            && now.duration_since(self.last_seen) < SESSION_IDLE
    }
}

/// Sessions by id. They hold key hashes, never keys; a session id is only
/// honoured by the server that started it, and only while its key store
/// knows that hash.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

/// 244 random bits, hex.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a session for a key (already checked); returns (session id, CSRF token).
    pub(crate) fn start(&self, key_hash: String) -> (String, String) {
        let now = Instant::now();
        let (id, csrf) = (random_token(), random_token());
        let mut map = self.lock();
        map.retain(|_, s| s.live(now));
        if map.len() >= SESSIONS_MAX {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            id.clone(),
            Session {
                key_hash,
                csrf: csrf.clone(),
                created: now,
                last_seen: now,
            },
        );
        (id, csrf)
    }

    /// Ends a session.
    pub(crate) fn end(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The CSRF token of a live session.
    pub(crate) fn csrf(&self, id: &str) -> Option<String> {
        let map = self.lock();
        map.get(id)
            .filter(|s| s.live(Instant::now()))
            .map(|s| s.csrf.clone())
    }

    /// Marks a live session as used now and returns its (key hash, CSRF
    /// token); forgets it when it has expired.
    pub(crate) fn touch(&self, id: &str) -> Option<(String, String)> {
        let now = Instant::now();
        let mut map = self.lock();
        match map.get_mut(id) {
            Some(s) if s.live(now) => {
                s.last_seen = now;
                Some((s.key_hash.clone(), s.csrf.clone()))
            }
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(age: Duration, idle: Duration) -> Option<(Session, Instant)> {
        let now = Instant::now();
        let created = now.checked_sub(age)?;
        let last_seen = now.checked_sub(idle)?;
        Some((
            Session {
                key_hash: String::new(),
                csrf: String::new(),
                created,
                last_seen,
            },
            now,
        ))
    }

    #[test]
    fn sessions_expire_when_idle_or_old() {
        let cases = [
            (Duration::from_secs(60), Duration::from_secs(1), true),
            (
                SESSION_MAX - Duration::from_secs(60),
                Duration::from_secs(60),
                true,
            ),
            (
                SESSION_MAX + Duration::from_secs(1),
                Duration::from_secs(1),
                false,
            ),
            (
                Duration::from_secs(9 * 3600),
                SESSION_IDLE + Duration::from_secs(1),
                false,
            ),
        ];
        for (age, idle, live) in cases {
            // Skip cases the machine's uptime cannot represent as an Instant in the past.
            let Some((s, now)) = session(age, idle) else {
                continue;
            };
            assert_eq!(s.live(now), live, "age {age:?}, idle {idle:?}");
        }
    }
}
