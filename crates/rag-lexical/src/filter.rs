//! Which passages a query may see.

use rag_core::{Filters, Language, Passage, Timestamp, Viewer};

/// A compiled filter: status, validity window, tags, creation time and owner.
#[derive(Debug, Clone)]
pub struct Filter {
    viewer: Viewer,
    tags: Vec<String>,
    created_after: Option<Timestamp>,
    created_before: Option<Timestamp>,
    now: Option<Timestamp>,
    /// Only passages written in this language pass (the translated
    /// path's: it finds text in the other language).
    only_in: Option<Language>,
}

impl Filter {
    /// From request filters, evaluating validity windows at `now` (or `as_of`),
    /// for a caller who sees what `viewer` sees.
    pub fn new(filters: &Filters, now: Timestamp, viewer: &Viewer) -> Self {
        Filter {
            viewer: viewer.clone(),
            tags: filters
                .tags
                .iter()
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
            created_after: filters.created_after,
            created_before: filters.created_before,
            now: Some(filters.as_of.unwrap_or(now)),
            only_in: None,
        }
    }

    /// Every searchable passage, whatever its validity window (for tests and evaluation).
    pub fn everything() -> Self {
        Filter {
            viewer: Viewer::Everything,
            tags: Vec::new(),
            created_after: None,
            created_before: None,
            now: None,
            only_in: None,
        }
    }

    /// This filter, also keeping only passages written in `language`
    /// (Chinese or English, judged by their Han characters and ASCII
    /// letters as the knowledge base's language is; mixed passages do not
    /// pass). Any other language: no change.
    pub fn only_in(mut self, language: Language) -> Self {
        self.only_in = matches!(language, Language::Zh | Language::En).then_some(language);
        self
    }

    /// Whether [`Filter::only_in`] applies (the script is read only then).
    pub(crate) fn judges_language(&self) -> bool {
        self.only_in.is_some()
    }

    /// Whether a passage of this script passes [`Filter::only_in`].
    pub(crate) fn allows_script(&self, s: crate::segment::Script) -> bool {
        self.only_in
            .is_none_or(|l| crate::language::language_of_script(s.han.into(), s.latin.into()) == l)
    }

    /// Whether the viewer sees every owner's passages.
    pub fn sees_everything(&self) -> bool {
        matches!(self.viewer, Viewer::Everything)
    }

    /// Whether the viewer may see the passage's owner (whatever the other filters).
    pub fn sees_owner_of(&self, p: &Passage) -> bool {
        self.viewer.sees(p.owner.as_deref())
    }

    /// Whether the passage passes.
    pub fn allows(&self, p: &Passage) -> bool {
        if !p.searchable || !self.viewer.sees(p.owner.as_deref()) {
            return false;
        }
        if let Some(now) = self.now {
            if !p.valid_at(now) {
                return false;
            }
        }
        if self.created_after.is_some_and(|t| p.created_at < t)
            || self.created_before.is_some_and(|t| p.created_at > t)
        {
            return false;
        }
        self.tags
            .iter()
            .all(|want| p.tags.iter().any(|have| have.to_lowercase() == *want))
    }
}

impl crate::index::LexicalIndex {
    /// Whether the passage at `r` passes `filter` (its record, and its
    /// script for a filter that keeps one language only).
    pub(crate) fn admits(&self, filter: &Filter, r: crate::index::Ref) -> bool {
        filter.allows(self.meta_at(r))
            && (!filter.judges_language()
                || filter.allows_script(self.segments[r.seg as usize].scripts[r.ord as usize]))
    }
}
