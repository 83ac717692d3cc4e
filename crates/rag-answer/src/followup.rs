//! Follow-up rewriting without an LLM: an elliptical follow-up such as
//! 「那海鲜呢？」 or "and on weekends?" becomes a standalone query by carrying
//! over the previous turn's question.
//!
//! A follow-up is recognised by its markers (那/那么/还有…呢, "and …",
//! "what about …", "how about …") or by being a bare phrase of one or two key
//! terms without a question word. Its content is then either
//! - a time qualifier (周末, 节假日, "on weekends", "at night"), which is
//!   added to the previous question (Chinese: in front, replacing a time word
//!   already there; English: before the question mark), or
//! - a new topic, which replaces the previous question's topic noun and
//!   keeps its question frame: in Chinese the first noun by jieba's
//!   part-of-speech tags (or a phrase of Latin words); in English the last word after a determiner or
//!   preposition ("the beef", "of the Pro"), else the last content word. When
//!   the topic is a phrase of Latin words ("Lumen Desk Pro") and the new
//!   topic one word ("Max"), only the phrase's last word is replaced.
//!
//! When the previous question has no topic to replace, the follow-up's
//! content is put in front of the previous question's key terms.

use jieba_rs::Jieba;
use rag_text::{is_han, Analyzer};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// One earlier turn of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's question as it was searched (its standalone rewrite, if it had one).
    pub query: String,
    /// The answer given, if any.
    pub answer: Option<String>,
}

/// How a follow-up was rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteMethod {
    /// The previous question's topic was replaced by the follow-up's.
    ReplaceTopic,
    /// The follow-up's time qualifier was added to the previous question.
    AddQualifier,
    /// The follow-up's content was put before the previous question's key terms.
    AppendTerms,
}

impl RewriteMethod {
    /// The method's wire name (`replace_topic`, `add_qualifier`, `append_terms`).
    pub fn as_str(self) -> &'static str {
        match self {
            RewriteMethod::ReplaceTopic => "replace_topic",
            RewriteMethod::AddQualifier => "add_qualifier",
            RewriteMethod::AppendTerms => "append_terms",
        }
    }
}

/// A standalone query made from a follow-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rewrite {
    /// The standalone query.
    pub query: String,
    /// What was done.
    pub method: RewriteMethod,
    /// The follow-up's content (new topic or qualifier).
    pub content: String,
    /// The previous question's words that were replaced, if any.
    pub replaced: Option<String>,
    /// The previous question's key terms carried over.
    pub carried: Vec<String>,
}

const ZH_PREFIXES: &[&str] = &[
    "那如果是",
    "如果是",
    "那要是",
    "要是",
    "那么",
    "还有",
    "另外",
    "换成",
    "那",
];
const ZH_QUESTION_WORDS: &[&str] = &[
    "吗",
    "怎么",
    "什么",
    "多少",
    "几",
    "如何",
    "是否",
    "能不能",
    "可不可以",
    "哪",
    "为什么",
    "谁",
];
const ZH_TIME_WORDS: &[&str] = &[
    "周末",
    "周六",
    "周日",
    "周一",
    "周二",
    "周三",
    "周四",
    "周五",
    "星期六",
    "星期天",
    "星期日",
    "工作日",
    "节假日",
    "假期",
    "假日",
    "春节",
    "国庆",
    "除夕",
    "晚上",
    "夜里",
    "夜间",
    "半夜",
    "深夜",
    "早上",
    "上午",
    "中午",
    "下午",
    "傍晚",
    "明天",
    "今天",
    "后天",
    "平时",
    "平日",
    "夜宵时段",
];
const EN_PREFIXES: &[&str] = &[
    "and what about ",
    "and how about ",
    "what about ",
    "how about ",
    "what of ",
    "same for ",
    "and also ",
    "and ",
    "or ",
    "also ",
];
const EN_QUESTION_WORDS: &[&str] = &[
    "what", "how", "when", "where", "which", "who", "why", "is", "are", "do", "does", "can",
    "could", "will", "would", "should", "did", "was",
];
const EN_TIME_WORDS: &[&str] = &[
    "weekend",
    "weekends",
    "weekday",
    "weekdays",
    "holiday",
    "holidays",
    "saturday",
    "saturdays",
    "sunday",
    "sundays",
    "monday",
    "mondays",
    "tuesday",
    "tuesdays",
    "wednesday",
    "wednesdays",
    "thursday",
    "thursdays",
    "friday",
    "fridays",
    "tonight",
    "today",
    "tomorrow",
    "morning",
    "mornings",
    "evening",
    "evenings",
    "night",
    "nights",
    "lunchtime",
    "christmas",
];
const EN_PREPOSITIONS: &[&str] = &[
    "on", "at", "in", "during", "over", "for", "of", "with", "about", "to",
];
const EN_DETERMINERS: &[&str] = &[
    "the", "a", "an", "my", "your", "our", "their", "this", "that", "these", "those", "its",
];
const EN_FUNCTION: &[&str] = &[
    "i", "you", "we", "they", "it", "me", "us", "there", "much", "many", "long", "be", "have",
    "has", "had", "get", "any", "some", "not", "and", "or",
];

fn jieba() -> &'static Jieba {
    static J: OnceLock<Jieba> = OnceLock::new();
    J.get_or_init(Jieba::new)
}

/// Rewrites `followup` into a standalone query using the last turn of
/// `history`; `None` when it is not an elliptical follow-up (or there is no
/// history), in which case the follow-up is searched as it is.
pub fn rewrite_followup(analyzer: &Analyzer, history: &[Turn], followup: &str) -> Option<Rewrite> {
    let previous = history.last()?.query.trim();
    if previous.is_empty() {
        return None;
    }
    let f = followup.trim();
    if f.chars().any(is_han) {
        rewrite_zh(analyzer, previous, f)
    } else {
        rewrite_en(analyzer, previous, f)
    }
}

fn trim_end_punct(s: &str) -> &str {
    s.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '?' | '？' | '。' | '.' | '!' | '！' | '~' | '～' | '…')
    })
}

fn question_end(s: &str) -> (&str, &str) {
    let body = trim_end_punct(s);
    (body, &s[body.len()..])
}

fn rewrite_zh(analyzer: &Analyzer, previous: &str, f: &str) -> Option<Rewrite> {
    let mut content = trim_end_punct(f);
    let mut marked = false;
    if let Some(c) = content.strip_suffix('呢') {
        content = c;
        marked = true;
    }
    for p in ZH_PREFIXES {
        if let Some(c) = content.strip_prefix(p) {
            content = c;
            marked = true;
            break;
        }
    }
    let content = content
        .trim()
        .trim_end_matches('的')
        .trim_start_matches(['，', ','])
        .trim();
    if content.is_empty() || ZH_QUESTION_WORDS.iter().any(|w| content.contains(w)) {
        return None;
    }
    let keys = analyzer.key_terms(content);
    if keys.len() > 2 || !(marked || content.chars().count() <= 4) {
        return None;
    }
    let is_time = ZH_TIME_WORDS.contains(&content) || {
        let tags = jieba().tag(content, true);
        !tags.is_empty()
            && tags
                .iter()
                .all(|t| t.tag == "t" || t.word.trim().is_empty())
    };
    let carried_from = |replaced: Option<&str>| -> Vec<String> {
        let gone: Vec<String> = replaced.map(|r| analyzer.key_terms(r)).unwrap_or_default();
        analyzer
            .key_terms(previous)
            .into_iter()
            .filter(|k| !gone.contains(k))
            .collect()
    };
    if is_time {
        let existing = ZH_TIME_WORDS
            .iter()
            .filter(|w| previous.contains(*w))
            .max_by_key(|w| w.len());
        let (query, replaced) = match existing {
            Some(w) => (previous.replacen(w, content, 1), Some(w.to_string())),
            None => (format!("{content}{previous}"), None),
        };
        let carried = carried_from(replaced.as_deref());
        return Some(Rewrite {
            query,
            method: RewriteMethod::AddQualifier,
            content: content.into(),
            replaced,
            carried,
        });
    }
    match zh_topic(previous) {
        Some((start, end)) => {
            let (start, end) = narrow_latin_phrase(previous, start, end, content);
            let replaced = previous[start..end].to_string();
            let query = format!("{}{}{}", &previous[..start], content, &previous[end..]);
            let carried = carried_from(Some(&replaced));
            Some(Rewrite {
                query,
                method: RewriteMethod::ReplaceTopic,
                content: content.into(),
                replaced: Some(replaced),
                carried,
            })
        }
        None => Some(append_terms(analyzer, previous, content)),
    }
}

/// Byte range of the first noun phrase of a Chinese question.
fn zh_topic(previous: &str) -> Option<(usize, usize)> {
    let tags = jieba().tag(previous, true);
    let nounish = |tag: &str, word: &str| {
        (tag.starts_with('n') || tag == "vn" || tag == "eng")
            && !ZH_TIME_WORDS.contains(&word)
            && word.trim().chars().any(|c| c.is_alphanumeric())
    };
    let mut offset = 0usize;
    let mut range: Option<(usize, usize, bool)> = None;
    for t in &tags {
        let (start, end) = (offset, offset + t.word.len());
        offset = end;
        match range {
            None if nounish(t.tag, t.word) => range = Some((start, end, t.tag == "eng")),
            None => {}
            // Latin words of one name, separated by spaces ("Lumen Desk Pro"), form one
            // phrase; a Chinese topic is one dictionary word (POS tags of neighbours are
            // too noisy to join: 新鲜 can come out as a place name).
            Some((s, _, true)) if t.tag == "eng" || t.word == " " => range = Some((s, end, true)),
            Some(_) => break,
        }
    }
    let (s, e, _) = range?;
    let trimmed = previous[s..e].trim_end();
    Some((s, s + trimmed.len()))
}

/// When the topic is several Latin words and the new topic one Latin word, the range of the last word only.
fn narrow_latin_phrase(text: &str, start: usize, end: usize, content: &str) -> (usize, usize) {
    let phrase = &text[start..end];
    let latin_word =
        |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if latin_word(content) && phrase.split(' ').count() > 1 && phrase.split(' ').all(latin_word) {
        let last = phrase.rfind(' ').map(|p| p + 1).unwrap_or(0);
        return (start + last, end);
    }
    (start, end)
}

fn append_terms(analyzer: &Analyzer, previous: &str, content: &str) -> Rewrite {
    let carried = analyzer.key_terms(previous);
    let query = format!("{content} {}", carried.join(" "));
    Rewrite {
        query: query.trim().to_string(),
        method: RewriteMethod::AppendTerms,
        content: content.into(),
        replaced: None,
        carried,
    }
}

/// Words of `s` with their byte ranges (punctuation at the ends trimmed).
fn words(s: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for raw in s.split(' ') {
        let start =
            offset + (raw.len() - raw.trim_start_matches(|c: char| !c.is_alphanumeric()).len());
        let trimmed = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
        if !trimmed.is_empty() {
            out.push((start, start + trimmed.len(), trimmed.to_lowercase()));
        }
        offset += raw.len() + 1;
    }
    out
}

fn rewrite_en(analyzer: &Analyzer, previous: &str, f: &str) -> Option<Rewrite> {
    let body = trim_end_punct(f);
    let lower = body.to_lowercase();
    let mut content = body;
    let mut marked = false;
    for p in EN_PREFIXES {
        if lower.starts_with(p) {
            content = body[p.len()..].trim();
            marked = true;
            break;
        }
    }
    let ws = words(content);
    if ws.is_empty()
        || ws.len() > 4
        || EN_QUESTION_WORDS.contains(&ws[0].2.as_str())
        || !(marked || ws.len() <= 2)
    {
        return None;
    }
    let (prev_body, end) = question_end(previous);
    let end = if end.trim().is_empty() {
        "?"
    } else {
        end.trim()
    };
    let time_word = ws.iter().any(|w| EN_TIME_WORDS.contains(&w.2.as_str()));
    let starts_with_prep = EN_PREPOSITIONS.contains(&ws[0].2.as_str());
    if time_word && ws.len() <= 3 {
        let qualifier = if starts_with_prep
            || ws.iter().all(|w| {
                !matches!(
                    w.2.as_str(),
                    "weekend" | "weekends" | "weekday" | "weekdays" | "holiday" | "holidays"
                ) && !w.2.ends_with("day")
                    && !w.2.ends_with("days")
            }) {
            content.to_string()
        } else {
            format!("on {content}")
        };
        let query = format!("{prev_body} {qualifier}{end}");
        let carried = analyzer.key_terms(previous);
        return Some(Rewrite {
            query,
            method: RewriteMethod::AddQualifier,
            content: qualifier,
            replaced: None,
            carried,
        });
    }
    // The new topic without its determiner.
    let topic = match ws.first() {
        Some((_, e, w)) if EN_DETERMINERS.contains(&w.as_str()) && ws.len() > 1 => {
            content[*e..].trim()
        }
        _ => content,
    };
    let pw = words(prev_body);
    let is_content = |w: &str| {
        !EN_QUESTION_WORDS.contains(&w)
            && !EN_FUNCTION.contains(&w)
            && !EN_DETERMINERS.contains(&w)
            && !EN_PREPOSITIONS.contains(&w)
    };
    let after_det = (1..pw.len()).rev().find(|&i| {
        let before = pw[i - 1].2.as_str();
        (EN_DETERMINERS.contains(&before) || EN_PREPOSITIONS.contains(&before))
            && is_content(&pw[i].2)
    });
    let index = after_det.or_else(|| (0..pw.len()).rev().find(|&i| is_content(&pw[i].2)))?;
    let (start, end_b, _) = pw[index];
    let replaced = prev_body[start..end_b].to_string();
    let query = format!(
        "{}{}{}{}",
        &prev_body[..start],
        topic,
        &prev_body[end_b..],
        end
    );
    let gone = analyzer.key_terms(&replaced);
    let carried = analyzer
        .key_terms(previous)
        .into_iter()
        .filter(|k| !gone.contains(k))
        .collect();
    Some(Rewrite {
        query,
        method: RewriteMethod::ReplaceTopic,
        content: topic.to_string(),
        replaced: Some(replaced),
        carried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_are_the_wire_names() {
        for m in [
            RewriteMethod::ReplaceTopic,
            RewriteMethod::AddQualifier,
            RewriteMethod::AppendTerms,
        ] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
    }

    fn rw(previous: &str, followup: &str) -> Option<Rewrite> {
        rewrite_followup(
            &Analyzer::new(),
            &[Turn {
                query: previous.into(),
                answer: None,
            }],
            followup,
        )
    }

    fn q(previous: &str, followup: &str) -> String {
        rw(previous, followup)
            .map(|r| r.query)
            .unwrap_or_else(|| "<none>".into())
    }

    #[test]
    fn chinese_topic_is_replaced_and_frame_kept() {
        let r = rw("牛肉新鲜吗？", "那海鲜呢？").unwrap();
        assert_eq!(r.query, "海鲜新鲜吗？");
        assert_eq!(r.method, RewriteMethod::ReplaceTopic);
        assert_eq!(r.replaced.as_deref(), Some("牛肉"));
        assert!(r.carried.contains(&"新鲜".to_string()), "{:?}", r.carried);
        assert_eq!(
            q("Lumen Desk Pro 的承重是多少？", "那 Max 呢？"),
            "Lumen Desk Max 的承重是多少？"
        );
    }

    #[test]
    fn chinese_time_follow_up_qualifies_the_question() {
        let r = rw("你们的营业时间是几点到几点？", "那周末呢？").unwrap();
        assert_eq!(r.method, RewriteMethod::AddQualifier);
        assert_eq!(r.query, "周末你们的营业时间是几点到几点？");
        assert_eq!(q("周末几点开门？", "那节假日呢？"), "节假日几点开门？");
    }

    #[test]
    fn english_follow_ups() {
        assert_eq!(
            q("What time do you open?", "and on weekends?"),
            "What time do you open on weekends?"
        );
        assert_eq!(
            q("What time do you open?", "and weekends?"),
            "What time do you open on weekends?"
        );
        assert_eq!(
            q("Is the beef fresh?", "and the seafood?"),
            "Is the seafood fresh?"
        );
        assert_eq!(
            q(
                "What is the weight capacity of the Pro?",
                "what about the Max?"
            ),
            "What is the weight capacity of the Max?"
        );
        assert_eq!(
            q("Do you deliver beef?", "how about chicken?"),
            "Do you deliver chicken?"
        );
    }

    #[test]
    fn standalone_questions_are_left_alone() {
        assert_eq!(q("牛肉新鲜吗？", "配送费怎么收？"), "<none>");
        assert_eq!(
            q(
                "牛肉新鲜吗？",
                "你们的店在哪里，周末营业到几点，可以开发票吗"
            ),
            "<none>"
        );
        assert_eq!(
            q(
                "Is the beef fresh?",
                "How long is the warranty on the motor?"
            ),
            "<none>"
        );
        assert!(rewrite_followup(&Analyzer::new(), &[], "那海鲜呢？").is_none());
    }
}
