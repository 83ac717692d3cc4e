//! Bilingual text analysis for ragscope.
//!
//! One [`Analyzer`] turns Chinese, English and mixed text into search terms,
//! keeping the byte offsets of every term in the original text so hits can be
//! highlighted and cited exactly:
//!
//! 1. normalisation ([`normalize`]): Unicode NFKC (which also folds full-width
//!    forms to half-width), case folding, and Traditional→Simplified Chinese
//!    character by character, so offsets map one to one;
//! 2. splitting into runs of Han characters and runs of letters and digits;
//! 3. Han runs go to the jieba dictionary segmenter in search mode, which keeps
//!    single-character words; in index mode every character of a longer word is
//!    also emitted, so that 「虾」 finds 「鲜虾」;
//! 4. Latin runs become words, identifiers (NVDA, iPhone15, A-12, 3.5km, 16:00)
//!    stay whole, stop words are removed and plain words are stemmed (Snowball
//!    English).
//!
//! The crate is synchronous and performs no I/O.
//!
//! ```
//! use rag_text::{Analyzer, Mode};
//! let analyzer = Analyzer::new();
//! let terms: Vec<String> = analyzer
//!     .analyze("營業時間是幾點? Opening hours", Mode::Query)
//!     .into_iter()
//!     .map(|t| t.text)
//!     .collect();
//! assert!(terms.contains(&"营业".to_string()));
//! assert!(terms.contains(&"hour".to_string()));
//! ```

mod analyzer;
mod bilingual;
mod edit_distance;
mod latin;
mod normalize;
mod pinyin_key;
mod stopwords;

pub use analyzer::{detect_language, Analyzer, Mode, ANALYZER_NAME, ANALYZER_VERSION};
pub use bilingual::{Bilingual, BilingualError, Translation};
pub use edit_distance::{osa_distance_within, typo_edits_allowed};
pub use normalize::{normalize, normalize_for_match, Normalized};
pub use pinyin_key::pinyin_key;
pub use rag_core::{Language, Token, TokenKind};

/// Whether `c` is a Han (CJK ideograph) character.
pub fn is_han(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FFFF | 0x3007)
}
