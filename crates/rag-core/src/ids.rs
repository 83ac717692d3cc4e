//! Identifier newtypes.
//!
//! Ids are assigned by the engine (UUID v7, time ordered), never by a database,
//! so that every store backend agrees on them.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub uuid::Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn generate() -> Self {
                Self(uuid::Uuid::now_v7())
            }
            /// Parses the hyphenated textual form.
            pub fn parse(s: &str) -> Option<Self> {
                uuid::Uuid::parse_str(s).ok().map(Self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

id_type!(
    /// A knowledge base.
    KbId
);
id_type!(
    /// A document (a file or URL) inside a knowledge base.
    DocId
);
id_type!(
    /// A chunk of a document.
    ChunkId
);
id_type!(
    /// An FAQ entry.
    FaqId
);
id_type!(
    /// A structured key/value fact.
    FactId
);

/// A tenant. Every store read and write is scoped by one.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct TenantId(pub String);

impl TenantId {
    /// The tenant the command-line tools act as when none is given.
    pub fn default_tenant() -> Self {
        Self("default".to_owned())
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Anything retrieval can return: a document chunk, an FAQ entry or a fact.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Debug)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum PassageId {
    /// A chunk of a document.
    Chunk(ChunkId),
    /// An FAQ entry.
    Faq(FaqId),
    /// A structured fact.
    Fact(FactId),
}

impl PassageId {
    /// Parses the textual form (`chunk:…`, `faq:…`, `fact:…`).
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, id) = s.split_once(':')?;
        match kind {
            "chunk" => ChunkId::parse(id).map(PassageId::Chunk),
            "faq" => FaqId::parse(id).map(PassageId::Faq),
            "fact" => FactId::parse(id).map(PassageId::Fact),
            _ => None,
        }
    }
}

impl fmt::Display for PassageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassageId::Chunk(id) => write!(f, "chunk:{id}"),
            PassageId::Faq(id) => write!(f, "faq:{id}"),
            PassageId::Fact(id) => write!(f, "fact:{id}"),
        }
    }
}
id_type!(
    /// A URL source: a start page and the same-site pages crawled from it.
    SourceId
);
