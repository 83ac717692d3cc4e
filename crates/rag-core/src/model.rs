//! Knowledge-base records: documents, chunks, FAQ entries, facts, synonyms.

use crate::ids::{ChunkId, DocId, FactId, FaqId, KbId, PassageId, TenantId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// Unix time in seconds; what every record stores.
pub type Timestamp = i64;

/// Current time as a [`Timestamp`].
pub fn now() -> Timestamp {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// A knowledge base and its settings.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KnowledgeBase {
    /// Engine-assigned id.
    pub id: KbId,
    /// Owner.
    pub tenant: TenantId,
    /// Name, unique per tenant.
    pub name: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Retrieval settings of this knowledge base.
    pub settings: KbSettings,
}

impl KnowledgeBase {
    /// A new knowledge base of `tenant`: a fresh id, created now.
    pub fn new(tenant: &TenantId, name: &str, settings: KbSettings) -> Self {
        KnowledgeBase {
            id: KbId::generate(),
            tenant: tenant.clone(),
            name: name.to_owned(),
            created_at: now(),
            settings,
        }
    }
}

/// Per-knowledge-base settings. Request parameters override them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct KbSettings {
    /// Retrieval defaults.
    pub retrieval: crate::params::RetrievalParams,
    /// Answering: context budget, miss thresholds, prompt.
    #[serde(default)]
    pub answer: AnswerSettings,
    /// FAQ entries drafted by the LLM from documents.
    #[serde(default)]
    pub drafts: DraftSettings,
    /// Intent routes: questions matched to one are answered by its webhook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intents: Vec<crate::intent::Intent>,
}

impl KbSettings {
    /// Settings as stored by any version, read by this one (see
    /// [`crate::RetrievalParams::with_current_paths`]).
    pub fn upgraded(mut self) -> Self {
        self.retrieval = self.retrieval.with_current_paths();
        self
    }
}

/// How FAQ entries are drafted from documents by the configured LLM.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct DraftSettings {
    /// Review status of new drafts: `pending` (the default: a person approves
    /// them before they are searched) or `approved` (searchable at once).
    pub status: FaqStatus,
    /// Draft automatically whenever a document is ingested or replaced
    /// (a drafting failure is reported, never fails the ingest).
    pub auto: bool,
    /// At most this many question/answer pairs per document (1 to 30).
    pub max_pairs: usize,
}

/// The most pairs a knowledge base may ask for per document.
pub const MAX_DRAFT_PAIRS: usize = 30;

impl Default for DraftSettings {
    fn default() -> Self {
        DraftSettings {
            status: FaqStatus::Pending,
            auto: false,
            max_pairs: 8,
        }
    }
}

impl DraftSettings {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), crate::error::UserError> {
        if !(1..=MAX_DRAFT_PAIRS).contains(&self.max_pairs) {
            return Err(crate::error::UserError::InvalidParam {
                name: "drafts.max_pairs",
                reason: format!("must be between 1 and {MAX_DRAFT_PAIRS}"),
            });
        }
        Ok(())
    }
}

/// How a knowledge base answers.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AnswerSettings {
    /// Context packing profile: "faq" (top 3 within 800 characters),
    /// "document" (top 6 within 6,000), or "auto" (faq when the best hit is
    /// an FAQ entry or fact, else document).
    pub profile: String,
    /// Below this best normalised fused score the question is a miss.
    pub min_fused: Option<f64>,
    /// Below this best cosine (when the dense path ran) the question is a miss.
    pub min_cosine: Option<f64>,
    /// System prompt template (None: the built-in rules).
    pub prompt_system: Option<String>,
    /// User turn template (None: the built-in one).
    pub prompt_user: Option<String>,
}

impl AnswerSettings {
    /// Checks the values: a known profile, thresholds in [0, 1], templates of
    /// at most 20,000 bytes.
    pub fn validate(&self) -> Result<(), crate::error::UserError> {
        let bad = |name: &'static str, reason: String| {
            Err(crate::error::UserError::InvalidParam { name, reason })
        };
        if !matches!(self.profile.as_str(), "auto" | "faq" | "document") {
            return bad(
                "answer.profile",
                format!("{:?} is not auto, faq or document", self.profile),
            );
        }
        for (name, v) in [
            ("answer.min_fused", self.min_fused),
            ("answer.min_cosine", self.min_cosine),
        ] {
            if v.is_some_and(|x| !(0.0..=1.0).contains(&x)) {
                return bad(name, "a threshold is between 0 and 1".into());
            }
        }
        for (name, v) in [
            ("answer.prompt_system", &self.prompt_system),
            ("answer.prompt_user", &self.prompt_user),
        ] {
            if v.as_ref().is_some_and(|t| t.len() > 20_000) {
                return bad(name, "a template has at most 20,000 bytes".into());
            }
        }
        Ok(())
    }
}

impl Default for AnswerSettings {
    fn default() -> Self {
        AnswerSettings {
            profile: "auto".into(),
            min_fused: Some(0.05),
            min_cosine: Some(0.80),
            prompt_system: None,
            prompt_user: None,
        }
    }
}

/// Review status of an FAQ entry. Only approved entries are searched.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum FaqStatus {
    /// Searchable.
    #[default]
    Approved,
    /// Waiting for review; not searchable.
    Pending,
    /// Switched off; not searchable.
    Disabled,
}

impl FaqStatus {
    /// The stored text form.
    pub fn as_str(self) -> &'static str {
        match self {
            FaqStatus::Approved => "approved",
            FaqStatus::Pending => "pending",
            FaqStatus::Disabled => "disabled",
        }
    }
    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "approved" => Some(FaqStatus::Approved),
            "pending" => Some(FaqStatus::Pending),
            "disabled" => Some(FaqStatus::Disabled),
            _ => None,
        }
    }
}

/// A question and its answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaqEntry {
    /// Engine-assigned id.
    pub id: FaqId,
    /// The knowledge base it belongs to.
    pub kb: KbId,
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Review status.
    pub status: FaqStatus,
    /// Whether a human edited it after creation.
    pub edited: bool,
    /// Where it came from.
    pub source_url: Option<String>,
    /// Free-form tags used by filters.
    pub tags: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Not searchable before this time, when set.
    pub valid_from: Option<Timestamp>,
    /// Not searchable after this time, when set; flagged for review instead.
    pub valid_until: Option<Timestamp>,
    /// The document an LLM drafted this entry from (None: written or
    /// imported by people). Re-syncing that document deletes its drafts
    /// that nobody edited; edited ones are kept and follow the new version.
    #[serde(default)]
    pub source_doc: Option<DocId>,
}

/// A document: a file or URL, split into chunks.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Document {
    /// Engine-assigned id.
    pub id: DocId,
    /// The knowledge base it belongs to.
    pub kb: KbId,
    /// Title (first heading or file name).
    pub title: String,
    /// Where it came from (path or URL).
    pub source: String,
    /// sha256 of the source bytes, hex; the same content is not ingested twice.
    pub content_hash: String,
    /// Tags used by filters.
    pub tags: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// The full extracted text; chunk offsets point into it.
    pub text: String,
    /// The owner the document is restricted to (None: every caller of the tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A contiguous piece of a document's extracted text.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Chunk {
    /// Engine-assigned id.
    pub id: ChunkId,
    /// Its document.
    pub doc: DocId,
    /// Position in the document, from 0.
    pub ordinal: u32,
    /// Headings above the chunk, outermost first.
    pub heading_path: Vec<String>,
    /// The chunk's text (a slice of the document's text).
    pub text: String,
    /// Byte offset of the chunk in the document's text.
    pub start: usize,
    /// Byte offset one past the chunk's end.
    pub end: usize,
}

/// The title field of a chunk: its document's title and the headings above
/// it, outermost first, joined with " › " (headings the title already
/// contains are left out).
pub fn chunk_title(doc_title: &str, headings: &[String]) -> String {
    let mut title = doc_title.to_owned();
    for h in headings.iter().filter(|h| !h.is_empty()) {
        if !title.contains(h.as_str()) {
            title.push_str(" › ");
            title.push_str(h);
        }
    }
    title
}

/// A structured key/value fact, such as 营业时间 → 16:00–次日02:00.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact {
    /// Engine-assigned id.
    pub id: FactId,
    /// The knowledge base it belongs to.
    pub kb: KbId,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Other ways of asking for the key.
    pub key_synonyms: Vec<String>,
}

/// A group of interchangeable terms; the first is canonical.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SynonymGroup {
    /// The terms.
    pub terms: Vec<String>,
}

/// A word for the Chinese segmenter of one knowledge base.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UserWord {
    /// The word.
    pub word: String,
    /// Optional frequency; higher keeps the word together more strongly.
    pub freq: Option<u32>,
}

/// What kind of passage a searchable unit is.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PassageKind {
    /// A document chunk.
    Chunk,
    /// An FAQ entry.
    Faq,
    /// A structured fact.
    Fact,
}

/// The searchable view of a chunk, FAQ entry or fact, as the indexes see it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Passage {
    /// Its id.
    pub id: PassageId,
    /// Title field: document title plus heading path, the FAQ question, or the fact key.
    pub title: String,
    /// Body field: chunk text, FAQ answer, or fact value.
    pub body: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Other names of the title: a fact's key synonyms (empty for other kinds).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The document a chunk belongs to.
    pub doc: Option<DocId>,
    /// Where it came from (document source or FAQ source URL).
    pub source: Option<String>,
    /// Byte range of a chunk inside its document's text.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<u64>>))]
    pub span: Option<(usize, usize)>,
    /// Creation time (filters on time ranges use it).
    pub created_at: Timestamp,
    /// Validity window start.
    pub valid_from: Option<Timestamp>,
    /// Validity window end.
    pub valid_until: Option<Timestamp>,
    /// Whether it may be searched at all (FAQ status approved).
    pub searchable: bool,
    /// The owner its document is restricted to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl From<FaqEntry> for Passage {
    /// The searchable view of an FAQ entry: searchable only when approved.
    fn from(f: FaqEntry) -> Self {
        Passage {
            id: PassageId::Faq(f.id),
            title: f.question,
            body: f.answer,
            tags: f.tags,
            aliases: Vec::new(),
            doc: None,
            source: f.source_url,
            span: None,
            created_at: f.created_at,
            valid_from: f.valid_from,
            valid_until: f.valid_until,
            searchable: f.status == FaqStatus::Approved,
            owner: None,
        }
    }
}

impl From<Fact> for Passage {
    /// The searchable view of a fact: its key (with the key's synonyms as
    /// aliases) and value.
    fn from(f: Fact) -> Self {
        Passage {
            id: PassageId::Fact(f.id),
            title: f.key,
            body: f.value,
            tags: Vec::new(),
            aliases: f.key_synonyms,
            doc: None,
            source: None,
            span: None,
            created_at: 0,
            valid_from: None,
            valid_until: None,
            searchable: true,
            owner: None,
        }
    }
}

impl Passage {
    /// The text a dense model embeds for this passage: for FAQ entries
    /// "question: answer" (as the seeds' Captain does), for chunks the title
    /// path and the text, for facts "key: value".
    pub fn embedding_text(&self) -> String {
        match self.id {
            PassageId::Chunk(_) if !self.title.is_empty() => {
                format!("{}\n{}", self.title, self.body)
            }
            PassageId::Chunk(_) => self.body.clone(),
            PassageId::Faq(_) | PassageId::Fact(_) => format!("{}: {}", self.title, self.body),
        }
    }

    /// The passage kind.
    pub fn kind(&self) -> PassageKind {
        match self.id {
            PassageId::Chunk(_) => PassageKind::Chunk,
            PassageId::Faq(_) => PassageKind::Faq,
            PassageId::Fact(_) => PassageKind::Fact,
        }
    }

    /// Whether it is valid at `at` (inside its validity window).
    pub fn valid_at(&self, at: Timestamp) -> bool {
        self.valid_from.is_none_or(|f| at >= f) && self.valid_until.is_none_or(|u| at <= u)
    }

    /// Whether it has expired by `at` and should be reviewed.
    pub fn expired_at(&self, at: Timestamp) -> bool {
        self.valid_until.is_some_and(|u| at > u)
    }
}

/// Which embedding model a knowledge base's vectors come from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingSpace {
    /// The embedder's model id.
    pub model_id: String,
    /// Vector length.
    pub dims: usize,
}

/// A stored vector of a passage.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageVector {
    /// The passage.
    pub id: PassageId,
    /// sha256 (hex) of the text that was embedded; a different text means the vector is stale.
    pub text_hash: String,
    /// The vector.
    pub vector: Vec<f32>,
}

/// Everything a knowledge base's indexes are built from, at one commit.
#[derive(Debug, Clone, Default)]
pub struct KbSnapshot {
    /// The commit sequence number of the knowledge base this snapshot reflects.
    pub seq: u64,
    /// All passages (including unsearchable ones; the index filters).
    pub passages: Vec<Passage>,
    /// Synonym groups.
    pub synonyms: Vec<SynonymGroup>,
    /// User dictionary for the segmenter.
    pub user_words: Vec<UserWord>,
    /// The embedding space of the stored vectors, when any were stored.
    pub space: Option<EmbeddingSpace>,
    /// Stored vectors.
    pub vectors: Vec<PassageVector>,
}

/// A snapshot sent in parts, so that a large knowledge base's text is never
/// held whole ([`crate::StoreRead::index_snapshot_streamed`]): first the
/// snapshot without its text passages, then those in batches, then `End`.
/// A stream that stops before `End` is incomplete and must not be used.
#[derive(Debug)]
pub enum SnapshotPart {
    /// The snapshot with its facts, dictionary, synonyms and vectors, and
    /// none of its text passages.
    Head(KbSnapshot),
    /// Text passages (chunks and FAQ entries) of the same commit.
    Passages(Vec<Passage>),
    /// Every passage was sent.
    End,
}

/// What changed in a knowledge base after a given commit: enough to bring
/// indexes built at that commit up to [`KbChanges::seq`] by touching only
/// what the writes touched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KbChanges {
    /// The commit these changes lead to.
    pub seq: u64,
    /// Passages written since (inserted or replaced), as a snapshot at
    /// `seq` holds them, unsearchable ones included; sorted by id.
    pub upserted: Vec<Passage>,
    /// Passages that existed at the earlier commit and are gone now; sorted.
    pub removed: Vec<PassageId>,
    /// Vectors of passages written since (of `upserted` passages, and of
    /// passages whose vector alone changed); empty for a store that
    /// searches vectors itself.
    pub vectors: Vec<PassageVector>,
    /// Passages whose vector was written without a change to their text.
    pub revectored: Vec<PassageId>,
    /// The whole synonym list, when it changed.
    pub synonyms: Option<Vec<SynonymGroup>>,
    /// The whole user dictionary, when it changed.
    pub user_words: Option<Vec<UserWord>>,
    /// Every vector was cleared or the embedding space changed: dense
    /// indexes are rebuilt.
    pub vectors_reset: bool,
    /// The embedding space at `seq`.
    pub space: Option<EmbeddingSpace>,
}

/// sha256 (lowercase hex) of a text: the key of its vector in the embedding
/// cache and the stores, which compare it with the passage's current
/// [`Passage::embedding_text`] to tell a stale vector.
pub fn text_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
