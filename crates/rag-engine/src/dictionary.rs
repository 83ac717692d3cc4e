//! The bilingual dictionary of the translated path, read from its file
//! once, on first use or by a thread started with the process (so the
//! first question does not wait for it).

use rag_text::{Analyzer, Bilingual};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A CC-CEDICT file and, once read, the dictionary.
#[derive(Debug)]
pub struct Dictionary {
    source: Source,
    cell: OnceLock<Result<Arc<Bilingual>, String>>,
}

#[derive(Debug)]
enum Source {
    File(PathBuf),
    Text(String),
}

impl Dictionary {
    /// The dictionary in `path` (read when first needed).
    pub fn at(path: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Dictionary {
            source: Source::File(path.into()),
            cell: OnceLock::new(),
        })
    }

    /// A dictionary from CC-CEDICT text (tests, small dictionaries).
    pub fn from_text(text: impl Into<String>) -> Arc<Self> {
        Arc::new(Dictionary {
            source: Source::Text(text.into()),
            cell: OnceLock::new(),
        })
    }

    /// Reads it on a thread of its own now, so that the first question
    /// finds it ready.
    pub fn load_in_background(self: &Arc<Self>) {
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("dictionary".into())
            .spawn(move || {
                if let Err(e) = me.get() {
                    tracing::warn!(error = %e, "the bilingual dictionary could not be read; the translated path returns nothing");
                }
            });
    }

    /// The dictionary, read on the first call (callers meanwhile wait for
    /// it), or why it could not be read. Blocking: call off the async runtime.
    pub fn get(&self) -> Result<&Arc<Bilingual>, &str> {
        self.cell
            .get_or_init(|| {
                let started = std::time::Instant::now();
                let text = match &self.source {
                    Source::File(p) => {
                        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?
                    }
                    Source::Text(t) => t.clone(),
                };
                let dict = Bilingual::parse(&text, &Analyzer::new()).map_err(|e| e.to_string())?;
                let (zh, en) = dict.sizes();
                tracing::info!(
                    entries = dict.entries(),
                    chinese_words = zh,
                    english_words = en,
                    ms = started.elapsed().as_millis() as u64,
                    "bilingual dictionary read"
                );
                Ok(Arc::new(dict))
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }
}
