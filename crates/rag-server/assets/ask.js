// Ask: a question, the pipeline timeline as its events stream in, the answer
// with [n] citations, and each stage's details on click.
import { app, api, el, clear, t, fmt, ms, table, rawDetails, notice, streamPost, kbPath, openPassage, highlighted, pid } from './core.js';

let root;
let run = null; // the current run's state
let controller = null;
let live = false;

export function mount(node) {
  root = node;
  const q = el('input', { id: 'ask-q', type: 'search', i18nPlaceholder: 'ask.placeholder', autocomplete: 'off', 'aria-label': 'question' });
  const form = el('form', { id: 'ask-form', class: 'askbar' },
    q, el('button', { id: 'ask-submit', type: 'submit', i18n: 'ask.submit' }),
    el('span', { id: 'ask-mode', class: 'badge', dataset: { mode: 'none' } }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = q.value.trim();
    if (!text || !app.kb) return;
    live = true;
    start(text, 'live');
  });
  const timeline = el('ol', { id: 'timeline', class: 'timeline', 'aria-live': 'polite' });
  const left = el('div', { class: 'col' },
    el('h2', { i18n: 'ask.timeline' }), timeline, el('div', { id: 'ask-warnings' }),
    el('h2', { i18n: 'ask.details' }), el('div', { id: 'stage-detail', class: 'detail' }, el('p', { class: 'hint', i18n: 'ask.details.hint' })));
  const right = el('div', { class: 'col' },
    el('h2', { i18n: 'ask.answer' }),
    el('div', { id: 'answer', class: 'answer', dataset: { state: 'idle' } }, el('div', { id: 'answer-text', class: 'answer-text' }), el('div', { id: 'answer-note' })),
    el('h2', { i18n: 'ask.sources' }), el('ol', { id: 'sources', class: 'sources' }));
  clear(root, form, el('div', { class: 'two' }, left, right));
  app.listeners.add((what) => {
    if (what !== 'lang') return;
    // Stage names follow the language too.
    for (const li of document.querySelectorAll('#timeline .stage')) {
      const name = li.querySelector('.name');
      if (name) name.textContent = stageName(li.dataset.type) + (li.dataset.path ? ` · ${li.dataset.path}` : '');
    }
  });
  if (takePending()) {
    markReady();
  } else if (app.kbs.some((k) => k.name === 'demo')) {
    app.kb = 'demo';
    document.getElementById('kb').value = 'demo';
    start(t('ask.demo.query'), 'demo');
  } else {
    markReady();
  }
}

// The first screen is complete: `data-ready` (and when, for the browser test's report).
function markReady() {
  if (document.body.dataset.ready === '1') return;
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = '1';
}

function setMode(mode) {
  const badge = document.getElementById('ask-mode');
  badge.dataset.mode = mode;
  badge.dataset.i18n = `mode.${mode}`;
  badge.textContent = t(`mode.${mode}`);
}

async function start(query, mode) {
  if (controller) controller.abort();
  controller = new AbortController();
  const kb = app.kb;
  setMode(mode);
  document.getElementById('ask-q').value = query;
  run = { kb, query, queryId: null, answered: null, started: performance.now(), events: [], passages: new Map(), sources: [], answer: '', tokens: 0, answerNode: null, finished: false };
  const current = run;
  clear(document.getElementById('timeline'));
  clear(document.getElementById('ask-warnings'));
  clear(document.getElementById('stage-detail'), el('p', { class: 'hint', i18n: 'ask.details.hint' }));
  clear(document.getElementById('answer-text'));
  clear(document.getElementById('answer-note'), el('span', { class: 'hint', i18n: 'running' }));
  clear(document.getElementById('sources'));
  document.getElementById('answer').dataset.state = 'streaming';
  try {
    await streamPost(`${kbPath(kb)}/query`, { query }, (type, data) => { if (run === current) onEvent(type, data); }, controller.signal);
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (run === current) onEvent('error', { type: 'error', code: e.code || 'request_failed', message: e.message });
  }
  if (run === current) finish();
}

function finish() {
  if (run.finished) return;
  run.finished = true;
  document.getElementById('answer').dataset.state = 'done';
  const note = document.getElementById('answer-note');
  clear(note);
  const a = run.answered;
  if (a && a.kb_miss) {
    note.append(el('div', { id: 'kb-miss', class: 'notice warning loud', role: 'status' }, el('span', { i18n: 'ask.miss' }), (a.miss_reasons || []).length ? `: ${a.miss_reasons.join('; ')}` : ''));
  }
  if (a && (a.removed_citations || []).length) note.append(notice('warning', `${t('ask.removed')}: ${a.removed_citations.map((n) => `[${n}]`).join(' ')}`));
  if (a) note.append(el('div', { class: 'hint gen' }, `${a.generator}${a.model ? ` · ${a.model}` : ''}`));
  if (!run.answer && run.sources.length) note.append(notice('info', t('ask.noanswer')));
  if (run.queryId && (run.answer || run.sources.length)) note.append(feedback(run.queryId));
  markReady();
}

const TITLES = {
  query_received: ['收到查询', 'query received'],
  query_analyzed: ['查询分析', 'query analysed'],
  recall: ['召回', 'recall'],
  recall_failed: ['召回失败', 'recall failed'],
  fused: ['融合', 'fused'],
  reranked: ['重排', 'reranked'],
  context_assembled: ['上下文组装', 'context assembled'],
  answer_token: ['回答', 'answer'],
  answered: ['回答完成', 'answered'],
  done: ['完成', 'done'],
  error: ['错误', 'error'],
};

function stageName(type) {
  const e = TITLES[type];
  return e ? (app.lang === 'en' ? e[1] : e[0]) : type;
}

function onEvent(type, data) {
  const ev = data && typeof data === 'object' ? data : { type, value: data };
  const kind = ev.type || type;
  const at = performance.now() - run.started;
  run.events.push(ev);
  if (kind === 'answer_token') return onToken(ev, at);
  if (kind === 'query_received') run.queryId = ev.query_id || null;
  if (kind === 'answered') {
    run.answered = ev;
    if (!run.answer && ev.text) { run.answer = ev.text; renderAnswer(); }
  }
  if (kind === 'recall') for (const p of ev.passages || []) run.passages.set(pid(p.id), p);
  if (kind === 'context_assembled') {
    run.sources = ev.sources || [];
    for (const s of run.sources) run.passages.set(pid(s.passage.id), s.passage);
    renderSources();
    renderAnswer();
  }
  const summary = summarize(kind, ev);
  const li = el('li', {
    class: `stage${summary.state ? ` ${summary.state}` : ''}`,
    dataset: { type: kind, state: summary.state || 'done', ...(summary.path ? { path: summary.path } : {}) },
    tabindex: 0, role: 'button',
  },
  el('span', { class: 'dot' }),
  el('span', { class: 'name', text: stageName(kind) + (summary.path ? ` · ${summary.path}` : '') }),
  el('span', { class: 'facts' }, summary.facts.map((f) => el('span', { class: 'fact', text: f }))),
  el('span', { class: 'time', text: summary.time || '' }),
  el('span', { class: 'at', text: `+${at.toFixed(0)} ms` }));
  const show = () => {
    for (const x of document.querySelectorAll('#timeline .stage.selected')) x.classList.remove('selected');
    li.classList.add('selected');
    clear(document.getElementById('stage-detail'), details(kind, ev));
  };
  li.addEventListener('click', show);
  li.addEventListener('keydown', (k) => { if (k.key === 'Enter' || k.key === ' ') { k.preventDefault(); show(); } });
  document.getElementById('timeline').append(li);
  if (kind === 'recall_failed') {
    document.getElementById('ask-warnings').append(notice('warning', `${t('warning')}: ${ev.path}: ${ev.message}`));
  }
  if (kind === 'error') {
    document.getElementById('ask-warnings').append(notice('error', `${t('error')}: ${ev.code}: ${ev.message}`));
    finish();
  }
  if (kind === 'done') {
    for (const w of ev.warnings || []) {
      if (!/dense path failed|path failed/.test(w) || !run.events.some((e) => e.type === 'recall_failed')) {
        document.getElementById('ask-warnings').append(notice('warning', w));
      }
    }
    finish();
  }
}

function summarize(kind, ev) {
  const top = (hits) => (hits && hits.length ? `top ${fmt(hits[0].score, 4)}` : null);
  switch (kind) {
    case 'query_received':
      return { facts: [`${(ev.paths || []).length} paths`] };
    case 'query_analyzed':
      return { facts: [`${(ev.tokens || []).length} tokens`, ev.language, `λ≈${fmt(ev.suggested_lexical_interpolation, 2)}`], time: ms(ev.elapsed_ms) };
    case 'recall': {
      const hits = ev.list.hits || [];
      return { path: ev.list.path, facts: [`${hits.length} hits`, top(hits)].filter(Boolean), time: ms(ev.elapsed_ms), state: hits.length ? null : 'empty' };
    }
    case 'recall_failed':
      return { path: ev.path, facts: [ev.message], state: 'warn' };
    case 'fused':
      return { facts: [`${ev.hits.length} hits`, `${(ev.dropped || []).length} dropped`, top(ev.hits), `k=${fmt(ev.k)}`,
        typeof ev.lexical_interpolation === 'number' ? `λ=${fmt(ev.lexical_interpolation, 2)}` : null].filter(Boolean), time: ms(ev.elapsed_ms) };
    case 'reranked':
      return { facts: [ev.reranker, `${ev.hits.length} hits`], time: ms(ev.elapsed_ms) };
    case 'routed':
      return { facts: [ev.intent, `${fmt(ev.score, 3)} ≥ ${fmt(ev.threshold, 2)}`, ev.answered ? 'webhook' : ev.error].filter(Boolean), time: ms(ev.webhook_ms), state: ev.answered ? null : 'warn' };
    case 'context_assembled':
      return { facts: [`${(ev.sources || []).length} sources`], time: ms(ev.elapsed_ms) };
    case 'done':
      return { facts: [`${(ev.warnings || []).length} warnings`], time: ms(ev.total_ms) };
    case 'error':
      return { facts: [ev.code, ev.message], state: 'error' };
    case 'answered':
      return { facts: [ev.generator, ev.kb_miss ? 'kb_miss' : `${(ev.cited || []).length} cited`], time: ms(ev.elapsed_ms), state: ev.kb_miss ? 'warn' : null };
    default: {
      const facts = Object.entries(ev).filter(([k, v]) => k !== 'type' && (typeof v !== 'object' || v === null)).slice(0, 3).map(([k, v]) => { const x = `${k}: ${v}`; return x.length > 90 ? `${x.slice(0, 90)}…` : x; });
      return { facts, time: ms(ev.elapsed_ms) };
    }
  }
}

function passageTitle(id) {
  const p = run.passages.get(pid(id));
  return p ? p.title : `${id.kind}:${id.id.slice(-8)}`;
}

function titleCell(id) {
  const p = run.passages.get(pid(id));
  if (!p) return passageTitle(id);
  return el('a', { href: '#ask', class: 'plink', onclick: (e) => { e.preventDefault(); openPassage(run.kb, p); } }, p.title);
}

export function contributions(hit) {
  return table([
    { i18n: 'col.path', cell: (c) => c.path },
    { i18n: 'col.rank', cell: (c) => c.rank },
    { i18n: 'col.pathscore', cell: (c) => fmt(c.path_score, 4) },
    { i18n: 'col.weight', cell: (c) => fmt(c.weight, 2) },
    { i18n: 'col.rrf', cell: (c) => fmt(c.rrf, 5) },
  ], hit.contributions || [], { class: 'grid small contributions' });
}

function hitsTable(hits) {
  return table([
    { i18n: 'col.rank', cell: (h) => h.rank },
    { i18n: 'col.title', cell: (h) => titleCell(h.id) },
    { i18n: 'col.kind', cell: (h) => h.id.kind },
    { i18n: 'col.score', cell: (h) => fmt(h.score, 5) },
    { i18n: 'col.normalized', cell: (h) => fmt(h.normalized, 3) },
    { i18n: 'col.rrf', cell: (h) => contributions(h) },
  ], hits);
}

function details(kind, ev) {
  const parts = [];
  switch (kind) {
    case 'query_analyzed':
      parts.push(el('p', {}, `${ev.normalized} · ${ev.language} · λ ${fmt(ev.suggested_lexical_interpolation, 2)} (${ev.suggestion_reason})`));
      parts.push(table([
        { i18n: 'col.token', cell: (x) => x.text },
        { i18n: 'col.kind', cell: (x) => x.kind },
        { i18n: 'col.bytes', cell: (x) => `${x.start}–${x.end}` },
      ], ev.tokens || []));
      break;
    case 'recall':
      for (const n of ev.list.notes || []) parts.push(notice('info', n));
      parts.push(table([
        { i18n: 'col.rank', cell: (h) => h.rank },
        { i18n: 'col.title', cell: (h) => titleCell(h.id) },
        { i18n: 'col.kind', cell: (h) => h.id.kind },
        { i18n: 'col.score', cell: (h) => fmt(h.score, 4) },
        { i18n: 'col.matched', cell: (h) => (h.matched || []).join(' ') },
      ], ev.list.hits || []));
      break;
    case 'fused':
      if (typeof ev.lexical_interpolation === 'number') {
        parts.push(el('p', { class: 'lambda-applied' }, `λ ${fmt(ev.lexical_interpolation, 2)}${ev.interpolation_reason ? ` (${ev.interpolation_reason})` : ''}`));
      }
      parts.push(hitsTable(ev.hits));
      if ((ev.dropped || []).length) {
        parts.push(el('h4', { i18n: 'lab.dropped' }), table([
          { i18n: 'col.title', cell: (d) => passageTitle(d.id) },
          { i18n: 'col.score', cell: (d) => fmt(d.score, 5) },
          { i18n: 'col.reason', cell: (d) => (typeof d.reason === 'string' ? d.reason : JSON.stringify(d.reason)) },
        ], ev.dropped));
      }
      break;
    case 'reranked':
      parts.push(hitsTable(ev.hits));
      break;
    case 'context_assembled':
      parts.push(table([
        { label: 'n', cell: (s) => `[${s.n}]` },
        { i18n: 'col.title', cell: (s) => titleCell(s.passage.id) },
        { i18n: 'col.source', cell: (s) => s.passage.source || '' },
      ], ev.sources || []));
      break;
    case 'done':
      parts.push(table([{ i18n: 'col.stage', cell: (x) => x.stage }, { i18n: 'col.ms', cell: (x) => fmt(x.ms, 3) }], [...(ev.timings || []), ...(ev.paths || [])]));
      for (const w of ev.warnings || []) parts.push(notice('warning', w));
      break;
    default:
      break;
  }
  parts.push(rawDetails(ev));
  return el('div', { class: 'stage-detail', dataset: { type: kind } }, parts);
}

function onToken(ev, at) {
  run.answer += ev.text || '';
  run.tokens += 1;
  let li = document.querySelector('#timeline .stage[data-type="answer_token"]');
  if (!li) {
    li = el('li', { class: 'stage', dataset: { type: 'answer_token', state: 'streaming' } },
      el('span', { class: 'dot' }), el('span', { class: 'name', text: stageName('answer_token') }),
      el('span', { class: 'facts' }, el('span', { class: 'fact tokens' })), el('span', { class: 'time' }), el('span', { class: 'at', text: `+${at.toFixed(0)} ms` }));
    li.addEventListener('click', () => clear(document.getElementById('stage-detail'), el('pre', { class: 'json', text: run.answer })));
    document.getElementById('timeline').append(li);
  }
  li.querySelector('.tokens').textContent = `${run.tokens} tokens`;
  renderAnswer();
}

// The answer text with [n] turned into buttons for the sources that exist.
function renderAnswer() {
  const node = document.getElementById('answer-text');
  const parts = [];
  const re = /\[(\d+)\]/g;
  let last = 0;
  let m;
  while ((m = re.exec(run.answer))) {
    const n = Number(m[1]);
    const src = run.sources.find((s) => s.n === n);
    if (!src) continue;
    parts.push(run.answer.slice(last, m.index));
    parts.push(el('button', { type: 'button', class: 'cite', dataset: { n: String(n) }, title: src.passage.title, onclick: () => openPassage(run.kb, src.passage, `[${n}] ${src.passage.title}`) }, `[${n}]`));
    last = m.index + m[0].length;
  }
  parts.push(run.answer.slice(last));
  clear(node, parts);
}

// Thumbs up / down on this answer, stored in the query log.
function feedback(id) {
  const box = el('div', { id: 'feedback', class: 'feedback', dataset: { state: 'open', queryId: id } }, el('span', { class: 'hint', i18n: 'ask.feedback' }));
  const send = async (value) => {
    try {
      await api('POST', `/log/${encodeURIComponent(id)}/feedback`, { feedback: value });
      box.dataset.state = value;
      for (const b of box.querySelectorAll('button')) b.disabled = true;
      box.append(el('span', { class: 'hint thanks', i18n: 'ask.thanks' }));
    } catch (e) { box.append(notice('error', e.message)); }
  };
  box.append(
    el('button', { type: 'button', class: 'fb-up', onclick: () => send('useful') }, '▲ ', el('span', { i18n: 'ask.useful' })),
    el('button', { type: 'button', class: 'fb-down', onclick: () => send('not_useful') }, '▼ ', el('span', { i18n: 'ask.notuseful' })));
  return box;
}

function renderSources() {
  clear(document.getElementById('sources'), run.sources.map((s) => el('li', {},
    el('button', { type: 'button', class: 'cite source', dataset: { n: String(s.n) }, onclick: () => openPassage(run.kb, s.passage, `[${s.n}] ${s.passage.title}`) }, `[${s.n}]`),
    ' ', el('span', { class: 'src-title', text: s.passage.title }),
    el('div', { class: 'snippet' }, highlighted(s.passage.body.length > 240 ? s.passage.body : s.passage.body, s.passage.highlights)))));
}

export function shown() { takePending(); }

// A question handed over by another page (the query log's "open in Ask"): run it live.
function takePending() {
  const q = sessionStorage.getItem('ragscope.ask');
  if (!q || !app.kb) return false;
  sessionStorage.removeItem('ragscope.ask');
  live = true;
  start(q, 'live');
  return true;
}
export const isLive = () => live;
