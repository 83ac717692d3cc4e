//! Toneless pinyin keys for homophone matching.

use pinyin::ToPinyin;

/// The toneless pinyin of a Han word, syllables separated by spaces
/// (「退款」 → "tui kuan"). `None` when a character has no reading.
pub fn pinyin_key(word: &str) -> Option<String> {
    let mut key = String::with_capacity(word.len() * 2);
    for p in word.to_pinyin() {
        let p = p?;
        if !key.is_empty() {
            key.push(' ');
        }
        key.push_str(p.plain());
    }
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn homophones_share_a_key() {
        assert_eq!(super::pinyin_key("退款"), super::pinyin_key("退宽"));
        assert_eq!(super::pinyin_key("配送"), super::pinyin_key("陪送"));
        assert_eq!(super::pinyin_key("退款").as_deref(), Some("tui kuan"));
        assert_eq!(super::pinyin_key("abc"), None);
    }
}
