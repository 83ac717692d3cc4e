//! Stop words. English: common function words. Chinese: particles and
//! question words that carry no topic; content characters such as 「鱼」 are
//! never stop words.

/// English stop words (lowercase, unstemmed).
pub const ENGLISH: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has",
    "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out",
    "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to",
    "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
];

/// Chinese stop words (Simplified).
pub const CHINESE: &[&str] = &[
    "的", "了", "吗", "呢", "吧", "啊", "呀", "嘛", "么", "是", "在", "和", "与", "及", "或", "而",
    "我", "你", "您", "他", "她", "它", "我们", "你们", "他们", "这", "那", "这个", "那个", "就",
    "都", "也", "还", "请问", "一下", "怎么", "怎样", "什么", "如何", "哪", "哪些", "哪个", "吗",
    "能", "能不能", "可以", "可不可以", "会", "要", "想", "有没有", "是不是", "呢", "之", "其",
    "被", "把", "给", "让", "对", "从", "为", "以", "着", "过", "得", "地", "个",
    // Question words: questions use them, passages rarely do.
    "谁", "多少", "几", "哪里", "哪儿", "为什么", "为何", "何时", "何地", "何种", "哪年", "哪一年",
    "什么样", "怎么样", "是否", "是由", "叫做", "称为", "哪种", "哪位", "多久", "多长",
];
