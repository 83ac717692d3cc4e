//! The answer stage: the honest-miss decision, generation (an LLM through
//! the `Generator` seam, or the extractive generator when none is configured
//! or the LLM fails), citation checking and the per-sentence support check.
//! The text work is `rag-answer`'s; this module sequences it and turns it
//! into pipeline events.

use crate::embed::CachedEmbedder;
use crate::engine::{Engine, KbIndex};
use futures::StreamExt;
use rag_answer::{
    AnswerLanguage, ExtractiveConfig, MissSignals, MissThresholds, PrecomputedEmbeddings,
    PromptTemplate, SupportConfig,
};
use rag_core::event::ContextSource;
use rag_core::{
    AnalyzedQuery, AnswerSettings, CitedSource, CoreError, FusedHit, GenEvent, GenerateRequest,
    Language, PathKind, PipelineEvent, RankedList, SentenceCheck, TokenUsage,
};
use std::sync::Arc;

/// What the answer stage produced, for the query log.
#[derive(Debug, Clone, Default)]
pub(crate) struct AnswerOutcome {
    pub text: String,
    pub generator: String,
    pub model: Option<String>,
    pub kb_miss: bool,
    pub cited: Vec<CitedSource>,
    pub usage: Option<TokenUsage>,
}

/// The answer language: the question's, with mixed questions following the
/// knowledge base.
fn language_of(q: &AnalyzedQuery, kb: Language) -> AnswerLanguage {
    match q.language {
        Language::Zh => AnswerLanguage::Zh,
        Language::En => AnswerLanguage::En,
        _ => {
            if kb == Language::Zh {
                AnswerLanguage::Zh
            } else {
                AnswerLanguage::of(&q.raw)
            }
        }
    }
}

fn template(settings: &AnswerSettings) -> PromptTemplate {
    let mut t = PromptTemplate::default();
    if let Some(s) = &settings.prompt_system {
        t.system = s.clone();
    }
    if let Some(u) = &settings.prompt_user {
        t.user = u.clone();
    }
    t
}

impl Engine {
    /// Runs the answer stage over the packed sources, emitting answer tokens
    /// and the `answered` event.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn answer(
        &self,
        question: &str,
        analyzed: &AnalyzedQuery,
        index: &Arc<KbIndex>,
        fetched: &crate::passages::Fetched,
        reranked: &[FusedHit],
        lists: &[RankedList],
        sources: &[ContextSource],
        settings: &AnswerSettings,
        warnings: &mut Vec<String>,
        emit: &mut crate::emit::EventSink<'_>,
    ) -> Result<AnswerOutcome, CoreError> {
        let started = std::time::Instant::now();
        let language = language_of(analyzed, index.lexical.language());
        let top1_cosine = lists
            .iter()
            .find(|l| l.path == PathKind::Dense)
            .and_then(|l| l.hits.first())
            .map(|h| h.score);
        let signals = MissSignals {
            hits: sources.len(),
            best_fused: reranked.first().map(|h| h.normalized),
            best_cosine: top1_cosine.map(|c| c as f32),
        };
        let thresholds = MissThresholds {
            min_fused: settings.min_fused,
            min_cosine: settings.min_cosine.map(|c| c as f32),
        };
        let mut miss = rag_answer::decide_miss(&signals, &thresholds);
        let mut out = AnswerOutcome::default();
        let mut miss_reasons: Vec<String> = miss
            .reasons
            .iter()
            .map(|r| serde_json::to_string(r).unwrap_or_default())
            .collect();
        // A Chinese question whose best passage (also Chinese) contains fewer
        // than half of its key terms is a miss even when one common word
        // matched well: 「火星的大气层由什么组成」 is not answered by a passage
        // that only shares 组成. Surface containment is reliable for Chinese;
        // English questions (inflection) and questions across languages keep
        // the score thresholds only.
        // Words of two or more characters only: single characters (由, 是) match anything.
        let words: Vec<&String> = analyzed
            .key_terms
            .iter()
            .filter(|k| k.chars().count() >= 2)
            .collect();
        if !miss.kb_miss && analyzed.language == Language::Zh && words.len() >= 2 {
            if let Some(top) = sources.first() {
                let text = rag_text::normalize_for_match(&format!(
                    "{}\n{}",
                    top.passage.title, top.passage.body
                ));
                if AnswerLanguage::of_source(&top.passage.body) != Some(AnswerLanguage::En) {
                    let covered = words.iter().filter(|k| text.contains(k.as_str())).count();
                    if covered * 2 < words.len() {
                        miss.kb_miss = true;
                        let listed: Vec<&str> = words.iter().map(|w| w.as_str()).collect();
                        miss_reasons.push(format!(
                            "the best passage contains {covered} of the question's {} key words ({})",
                            words.len(),
                            listed.join(", ")
                        ));
                    }
                }
            }
        }

        let (text, sources_used): (String, &[ContextSource]) = if miss.kb_miss {
            // Nothing from the knowledge base goes into the answer.
            out.generator = "miss".into();
            out.kb_miss = true;
            let reply = rag_answer::miss_reply(language).to_owned();
            emit.emit(PipelineEvent::AnswerToken {
                text: reply.clone(),
            })
            .await;
            (reply, &[])
        } else {
            miss_reasons.clear();
            let generated = match self.inner.components.generator.clone() {
                Some(generator) => match self
                    .llm_answer(
                        generator.as_ref(),
                        question,
                        language,
                        sources,
                        settings,
                        emit,
                    )
                    .await
                {
                    Ok((text, model, usage)) => {
                        out.generator = generator.name().to_owned();
                        out.model = model;
                        out.usage = usage;
                        Some(text)
                    }
                    Err(e) => {
                        warnings.push(format!(
                            "generator {} failed, extractive answer instead: {e}",
                            generator.name()
                        ));
                        None
                    }
                },
                None => None,
            };
            let text = match generated {
                Some(t) => t,
                None => {
                    let (engine, question, srcs) =
                        (self.clone(), question.to_owned(), sources.to_vec());
                    let ans = tokio::task::spawn_blocking(move || {
                        rag_answer::extractive_answer(
                            &engine.inner.analyzer,
                            &question,
                            &srcs,
                            None,
                            &ExtractiveConfig::default(),
                        )
                    })
                    .await
                    .map_err(|e| CoreError::Component {
                        component: "extractive generator".into(),
                        message: e.to_string(),
                    })?;
                    out.generator = rag_answer::EXTRACTIVE_NAME.into();
                    for ev in ans.events() {
                        if let GenEvent::Delta(t) = ev {
                            emit.emit(PipelineEvent::AnswerToken { text: t }).await;
                        }
                    }
                    ans.text
                }
            };
            (text, sources)
        };

        // Citations: markers outside the packed range are removed and reported.
        let checked = rag_answer::check_citations(&text, sources_used);
        out.cited = checked
            .cited
            .iter()
            .map(|c| {
                let p = fetched.get(&c.id);
                CitedSource {
                    n: c.n,
                    id: c.id,
                    title: c.title.clone(),
                    doc: p.and_then(|p| p.doc),
                    span: p.and_then(|p| p.span),
                    source: c.source.clone(),
                }
            })
            .collect();
        out.text = checked.text.clone();

        // Support: every cited sentence against the sources it cites.
        let support = if out.kb_miss || sources_used.is_empty() {
            Vec::new()
        } else {
            self.support(&checked.text, sources_used, warnings).await?
        };
        emit.emit(PipelineEvent::Answered {
            text: out.text.clone(),
            generator: out.generator.clone(),
            model: out.model.clone(),
            language: match language {
                AnswerLanguage::Zh => "zh".into(),
                AnswerLanguage::En => "en".into(),
            },
            kb_miss: out.kb_miss,
            miss_reasons,
            removed_citations: checked.removed.iter().map(|r| r.n).collect(),
            cited: out.cited.clone(),
            support,
            usage: out.usage,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
        .await;
        Ok(out)
    }

    async fn llm_answer(
        &self,
        generator: &dyn rag_core::Generator,
        question: &str,
        language: AnswerLanguage,
        sources: &[ContextSource],
        settings: &AnswerSettings,
        emit: &mut crate::emit::EventSink<'_>,
    ) -> Result<(String, Option<String>, Option<TokenUsage>), CoreError> {
        let messages = template(settings)
            .messages(question, language, sources)
            .map_err(|e| CoreError::Component {
                component: "prompt".into(),
                message: e.to_string(),
            })?;
        let request = GenerateRequest {
            question: question.to_owned(),
            sources: sources.to_vec(),
            messages,
            json: false,
        };
        let mut stream = generator.generate(request).await?;
        let (mut text, mut model, mut usage) = (String::new(), None, None);
        while let Some(ev) = stream.next().await {
            match ev? {
                GenEvent::Delta(t) => {
                    text.push_str(&t);
                    emit.emit(PipelineEvent::AnswerToken { text: t }).await;
                }
                GenEvent::Usage {
                    model: m,
                    prompt,
                    completion,
                } => {
                    model = Some(m);
                    usage = Some(TokenUsage { prompt, completion });
                }
                GenEvent::Done => break,
            }
        }
        Ok((text, model, usage))
    }

    async fn support(
        &self,
        answer: &str,
        sources: &[ContextSource],
        warnings: &mut Vec<String>,
    ) -> Result<Vec<SentenceCheck>, CoreError> {
        let mut pre = None;
        // Embeddings are needed where words cannot match: an answer sentence
        // in another language than a source it cites. Same-language support
        // is judged by term overlap, which costs no model calls.
        let answer_lang = AnswerLanguage::of_source(answer);
        let across = sources.iter().any(|s| {
            let l = AnswerLanguage::of_source(&s.passage.body);
            l.is_some() && answer_lang.is_some() && l != answer_lang
        }) || answer_lang.is_none();
        if !across {
            // Term overlap only (the report notes there was no embedder).
        } else if let Some(embedder) = self.embedder() {
            match embed_all(&embedder, rag_answer::support_texts(answer, sources)).await {
                Ok(p) => pre = Some(p),
                Err(e) => warnings.push(format!("support check without embeddings: {e}")),
            }
        }
        let (engine, answer, sources) = (self.clone(), answer.to_owned(), sources.to_vec());
        let report = tokio::task::spawn_blocking(move || {
            let emb = pre.as_ref().map(|p| p as &dyn rag_answer::SentenceEmbedder);
            rag_answer::check_support(
                &engine.inner.analyzer,
                &answer,
                &sources,
                emb,
                &SupportConfig::default(),
            )
        })
        .await
        .map_err(|e| CoreError::Component {
            component: "support check".into(),
            message: e.to_string(),
        })?;
        Ok(report
            .sentences
            .into_iter()
            .map(|s| {
                let (verdict, m) = match s.verdict {
                    rag_answer::Verdict::Supported { support, .. } => ("supported", Some(support)),
                    rag_answer::Verdict::Unsupported { closest } => ("unsupported", closest),
                    rag_answer::Verdict::Uncited => ("uncited", None),
                };
                SentenceCheck {
                    text: s.text,
                    cites: s.cites,
                    verdict: verdict.into(),
                    n: m.as_ref().map(|m| m.n),
                    passage: m.as_ref().map(|m| m.id),
                    span: m.as_ref().map(|m| m.span),
                    overlap: m.as_ref().map(|m| m.overlap),
                    cosine: m.as_ref().and_then(|m| m.cosine),
                }
            })
            .collect())
    }
}

async fn embed_all(
    embedder: &CachedEmbedder,
    texts: Vec<String>,
) -> Result<PrecomputedEmbeddings, CoreError> {
    let mut pre = PrecomputedEmbeddings::new();
    for t in texts {
        let v = embedder.embed_query(&t).await?;
        pre.insert(t, v);
    }
    Ok(pre)
}

/// Asks the LLM to turn a follow-up into a standalone search query, given the
/// conversation's earlier turns. `None` when it answers nothing usable (the
/// caller then uses the heuristic).
pub(crate) async fn llm_rewrite(
    generator: &dyn rag_core::Generator,
    turns: &[rag_answer::Turn],
    followup: &str,
) -> Result<Option<String>, CoreError> {
    let mut history = String::new();
    for t in turns {
        history.push_str("User: ");
        history.push_str(&rag_answer::escape_data(&t.query));
        history.push('\n');
        if let Some(a) = &t.answer {
            let short: String = a.chars().take(300).collect();
            history.push_str("Assistant: ");
            history.push_str(&rag_answer::escape_data(&short));
            history.push('\n');
        }
    }
    let messages = vec![
        rag_core::ChatMessage::system(
            "Rewrite the user's last message into one standalone search query, in the same language as that message, \
             using the earlier turns only to resolve what it refers to. Reply with the query alone, no quotes, no explanation.",
        ),
        rag_core::ChatMessage::user(format!("<conversation>\n{history}</conversation>\nLast message: {}", rag_answer::escape_data(followup))),
    ];
    let request = GenerateRequest {
        question: followup.to_owned(),
        sources: Vec::new(),
        messages,
        json: false,
    };
    let mut stream = generator.generate(request).await?;
    let mut text = String::new();
    while let Some(ev) = stream.next().await {
        match ev? {
            GenEvent::Delta(t) => text.push_str(&t),
            GenEvent::Done => break,
            GenEvent::Usage { .. } => {}
        }
    }
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .trim_matches(['"', '「', '」', '“', '”'])
        .trim();
    if line.is_empty() || line.chars().count() > 300 {
        return Ok(None);
    }
    Ok(Some(line.to_owned()))
}
