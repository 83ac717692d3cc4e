// Retrieval lab: one query as vector only, lexical only and hybrid + rerank,
// side by side; sliders re-fuse the cached candidate lists via /refuse.
import { app, api, el, clear, t, fmt, table, notice, kbPath, highlighted, pid, rawDetails, openPassage } from './core.js';

const LEXICAL = ['bm25', 'substring', 'fuzzy', 'synonym', 'fact', 'translated'];
const ALL = [...LEXICAL, 'dense', 'second_dense'];
const COLUMNS = [
  { id: 'vector', i18n: 'lab.vector', body: { paths: ['dense'], rerank: false } },
  { id: 'lexical', i18n: 'lab.lexical', body: { paths: LEXICAL, rerank: false } },
  { id: 'hybrid', i18n: 'lab.hybrid', body: { rerank: true } },
];

let root;
let state = null; // {kb, query, columns: {id: {candidates_id, baseline: Map, passages, result}}}
let settings = null; // the knowledge base's fusion settings
let timer = null;
let seq = 0;

export function mount(node) {
  root = node;
  const q = el('input', { id: 'lab-q', type: 'search', i18nPlaceholder: 'ask.placeholder', autocomplete: 'off', 'aria-label': 'query' });
  const form = el('form', { id: 'lab-form', class: 'askbar' }, q, el('button', { id: 'lab-run', type: 'submit', i18n: 'lab.run' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (q.value.trim() && app.kb) runLab(q.value.trim());
  });
  const cols = el('div', { class: 'three' }, COLUMNS.map((c) => el('section', { id: `lab-${c.id}`, class: 'lab-col', dataset: { column: c.id } },
    el('h2', { i18n: c.i18n }), el('div', { class: 'col-status' }), el('ol', { class: 'hits' }), el('div', { class: 'col-foot' }))));
  clear(root, form, el('div', { id: 'lab-tokens', class: 'tokens' }), el('div', { id: 'lab-controls', class: 'controls' }), cols, whyNotPanel());
  app.listeners.add((what) => { if (what === 'kb') { settings = null; state = null; } });
  const last = document.getElementById('ask-q');
  if (last && last.value) q.value = last.value;
}

export function shown() {
  const q = document.getElementById('lab-q');
  const last = document.getElementById('ask-q');
  if (!q.value && last && last.value) q.value = last.value;
}

async function loadSettings(kb) {
  const row = await api('GET', kbPath(kb));
  settings = structuredClone(row.settings.retrieval.fusion);
  renderControls();
}

function slider(id, label, min, max, step, value, i18n) {
  const out = el('output', { id: `${id}-value`, text: fmt(value, 2) });
  const input = el('input', { id, type: 'range', min, max, step, value: String(value), 'aria-label': label });
  input.addEventListener('input', () => { out.textContent = fmt(Number(input.value), 2); changed(); });
  return el('label', { class: 'slider' }, i18n ? el('span', { i18n }) : el('span', { text: label }), input, out);
}

function renderControls() {
  const box = document.getElementById('lab-controls');
  const lam = settings.lexical_interpolation;
  const auto = el('input', { id: 'lab-lambda-auto', type: 'checkbox', checked: lam === null || lam === undefined });
  auto.addEventListener('change', changed);
  clear(box,
    el('div', { class: 'group' },
      slider('lab-lambda', 'lambda', 0, 1, 0.05, lam ?? 0.5, 'lab.lambda'),
      el('label', { class: 'check' }, auto, el('span', { i18n: 'lab.lambda.auto' })),
      slider('lab-k', 'k', 1, 200, 1, settings.k, 'lab.k')),
    el('div', { class: 'group weights' }, el('span', { class: 'glabel', i18n: 'lab.weights' }),
      ALL.map((p) => slider(`lab-w-${p}`, p, 0, 2, 0.05, settings.weights[p] ?? 1))));
}

function currentFusion() {
  const weights = {};
  for (const p of ALL) weights[p] = Number(document.getElementById(`lab-w-${p}`).value);
  const auto = document.getElementById('lab-lambda-auto').checked;
  return {
    k: Number(document.getElementById('lab-k').value),
    weights,
    lexical_interpolation: auto ? undefined : Number(document.getElementById('lab-lambda').value),
    top_k: settings.top_k,
  };
}

async function runLab(query) {
  const kb = app.kb;
  const my = ++seq;
  if (!settings) await loadSettings(kb);
  state = { kb, query, columns: {} };
  root.dataset.state = 'running';
  clear(document.getElementById('lab-tokens'));
  await Promise.all(COLUMNS.map(async (c) => {
    const col = document.getElementById(`lab-${c.id}`);
    col.dataset.state = 'running';
    delete col.dataset.refuseCount;
    clear(col.querySelector('.col-status'), el('span', { class: 'hint', i18n: 'running' }));
    clear(col.querySelector('.hits'));
    clear(col.querySelector('.col-foot'));
    try {
      const r = await api('POST', `${kbPath(kb)}/retrieve`, { query, ...c.body });
      if (my !== seq) return;
      state.columns[c.id] = analyse(r);
      renderColumn(c.id, false);
      if (c.id === 'hybrid') renderTokens(state.columns[c.id]);
    } catch (e) {
      if (my !== seq) return;
      col.dataset.state = 'error';
      clear(col.querySelector('.col-status'), notice('error', `${e.code || ''} ${e.message}`));
    }
  }));
  if (my === seq) root.dataset.state = 'done';
}

function analyse(r) {
  const ev = (type) => r.events.filter((e) => e.type === type);
  const passages = new Map();
  const matched = new Map();
  for (const rec of ev('recall')) {
    for (const p of rec.passages || []) {
      const key = pid(p.id);
      const prev = passages.get(key);
      passages.set(key, prev ? { ...prev, highlights: [...prev.highlights, ...p.highlights] } : { ...p });
    }
    for (const h of rec.list.hits || []) {
      const key = pid(h.id);
      if (!matched.has(key)) matched.set(key, []);
      matched.get(key).push({ path: rec.list.path, terms: h.matched || [] });
    }
  }
  for (const ctx of ev('context_assembled')) for (const s of ctx.sources || []) if (!passages.has(pid(s.passage.id))) passages.set(pid(s.passage.id), s.passage);
  const fused = ev('fused')[0];
  const reranked = ev('reranked')[0];
  const baseline = new Map((fused ? fused.hits : []).map((h) => [pid(h.id), h.rank]));
  return {
    candidates_id: r.candidates_id,
    recalls: ev('recall').map((x) => x.list),
    failed: ev('recall_failed'),
    analyzed: ev('query_analyzed')[0],
    fused,
    reranked,
    baseline,
    passages,
    matched,
    events: r.events,
    refused: null,
  };
}

function renderTokens(c) {
  const box = document.getElementById('lab-tokens');
  if (!c.analyzed) return;
  clear(box, el('span', { class: 'glabel', i18n: 'lab.tokens' }),
    (c.analyzed.tokens || []).map((tok) => el('span', { class: `token tok-${tok.kind}`, title: `${tok.kind} · ${tok.start}–${tok.end}`, text: tok.text })),
    el('span', { class: 'hint', text: ` λ≈${fmt(c.analyzed.suggested_lexical_interpolation, 2)} (${c.analyzed.suggestion_reason})` }));
}

function renderColumn(id, refused) {
  const c = state.columns[id];
  const col = document.getElementById(`lab-${id}`);
  const status = col.querySelector('.col-status');
  clear(status);
  for (const f of c.failed) status.append(notice('warning', `${f.path}: ${f.message}`));
  if (id === 'lexical' && c.recalls.length && c.recalls.every((l) => !(l.hits || []).length)) {
    status.append(el('div', { id: 'lab-emptylex', class: 'notice error loud', role: 'alert', i18n: 'lab.emptylex' }));
  }
  status.append(el('div', { class: 'paths' }, c.recalls.map((l) => el('span', { class: `pathcount${(l.hits || []).length ? '' : ' empty'}`, title: (l.notes || []).join('\n'), text: `${l.path} ${(l.hits || []).length}` }))));
  // What each path made of the query (patterns, expansions, corrections, or why it found nothing).
  const notes = c.recalls.filter((l) => (l.notes || []).length);
  if (notes.length) status.append(el('ul', { class: 'path-notes' }, notes.map((l) => el('li', {}, el('b', { text: l.path }), ' ', l.notes.join(' · ')))));
  if (refused) status.append(el('div', { class: 'hint refused', i18n: 'lab.refused' }));
  let hits;
  let moves = null;
  if (refused) hits = c.refused.hits;
  else if (id === 'hybrid' && c.reranked) {
    hits = c.reranked.hits;
    moves = new Map((c.fused ? c.fused.hits : []).map((h) => [pid(h.id), h.rank]));
  } else hits = c.fused ? c.fused.hits : [];
  const list = col.querySelector('.hits');
  clear(list, hits.length ? hits.map((h, i) => hitItem(c, h, i + 1, refused ? c.baseline : null, moves)) : el('li', { class: 'hint', i18n: 'lab.nohits' }));
  const dropped = refused ? c.refused.dropped : c.fused ? c.fused.dropped : [];
  const foot = col.querySelector('.col-foot');
  clear(foot);
  if (dropped && dropped.length) {
    foot.append(el('details', { class: 'dropped' }, el('summary', {}, el('span', { i18n: 'lab.dropped' }), ` (${dropped.length})`),
      table([
        { i18n: 'col.title', cell: (d) => title(c, d.id) },
        { i18n: 'col.score', cell: (d) => fmt(d.score, 5) },
        { i18n: 'col.reason', cell: (d) => (typeof d.reason === 'string' ? d.reason : JSON.stringify(d.reason)) },
      ], dropped, { class: 'grid small' })));
  }
  foot.append(rawDetails(refused ? c.refused : c.events));
  col.dataset.state = 'done';
}

function title(c, id) {
  const p = c.passages.get(pid(id));
  return p ? p.title : `${id.kind}:${id.id.slice(-8)}`;
}

function hitItem(c, h, rank, baseline, moves) {
  const key = pid(h.id);
  const p = c.passages.get(key);
  let delta = null;
  let deltaText = '';
  if (baseline) {
    const before = baseline.get(key);
    if (before === undefined) { delta = 'new'; deltaText = 'new'; }
    else if (before === rank) { delta = 'same'; deltaText = '='; }
    else if (before > rank) { delta = 'up'; deltaText = `▲${before - rank}`; }
    else { delta = 'down'; deltaText = `▼${rank - before}`; }
  } else if (moves) {
    const before = moves.get(key);
    if (before !== undefined && before !== rank) {
      delta = before > rank ? 'up' : 'down';
      deltaText = `${t('lab.rerankmove')} ${before}→${rank}`;
    }
  }
  const explain = el('details', { class: 'explain' },
    el('summary', {},
      el('span', { class: 'rank', text: String(rank) }),
      delta ? el('span', { class: `delta delta-${delta}${moves ? ' rerank-move' : ''}`, dataset: { delta }, text: deltaText }) : null,
      el('span', { class: 'title', text: p ? p.title : title(c, h.id) }),
      el('span', { class: 'score', text: fmt(h.score, 5) })),
    el('div', { class: 'why' },
      contributionTable(h),
      el('ul', { class: 'matched' }, (c.matched.get(key) || []).map((m) => el('li', {}, el('b', { text: m.path }), ' ', m.terms.join(' ')))),
      p ? el('a', { href: '#lab', class: 'plink', onclick: (e) => { e.preventDefault(); openPassage(state.kb, p); } }, p.source || p.title) : null));
  const ask = el('button', { type: 'button', class: 'small whynot-ask', i18n: 'lab.whynot.ask', onclick: () => whyNot(key) });
  return el('li', { class: 'hit', dataset: { id: key, rank: String(rank), ...(delta ? { delta } : {}) } },
    explain,
    ask,
    p ? el('div', { class: 'snippet' }, highlighted(p.body, p.highlights)) : null);
}

function contributionTable(h) {
  const rows = h.contributions || [];
  const sum = rows.reduce((s, x) => s + (x.rrf || 0), 0);
  return table([
    { i18n: 'col.path', cell: (x) => x.path },
    { i18n: 'col.rank', cell: (x) => x.rank },
    { i18n: 'col.pathscore', cell: (x) => fmt(x.path_score, 4) },
    { i18n: 'col.weight', cell: (x) => fmt(x.weight, 2) },
    { i18n: 'col.rrf', cell: (x) => fmt(x.rrf, 5) },
  ], rows, { class: 'grid small contributions' }).appendChild(el('tfoot', {}, el('tr', {}, el('td', { colspan: 4, text: 'Σ' }), el('td', { text: fmt(sum, 5) })))).parentNode;
}

function changed() {
  clearTimeout(timer);
  timer = setTimeout(refuseAll, 60);
}

async function refuseAll() {
  if (!state) return;
  const body = currentFusion();
  const my = seq;
  await Promise.all(Object.entries(state.columns).map(async ([id, c]) => {
    try {
      const r = await api('POST', `${kbPath(state.kb)}/refuse`, { candidates_id: c.candidates_id, ...body });
      if (my !== seq) return;
      c.refused = r.fused;
      renderColumn(id, true);
      const col = document.getElementById(`lab-${id}`);
      col.dataset.refuseCount = String(Number(col.dataset.refuseCount || 0) + 1);
    } catch (e) {
      const col = document.getElementById(`lab-${id}`);
      col.querySelector('.col-status').append(notice('error', e.message));
    }
  }));
}

// ---------------------------------------------------------------- why not

function whyNotPanel() {
  const id = el('input', { id: 'lab-whynot-id', type: 'text', i18nPlaceholder: 'lab.whynot.id', autocomplete: 'off', 'aria-label': 'entry id' });
  const form = el('form', { id: 'lab-whynot-form', class: 'askbar' }, id, el('button', { id: 'lab-whynot-run', type: 'submit', i18n: 'lab.whynot.run' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (id.value.trim()) whyNot(id.value.trim());
  });
  return el('section', { id: 'lab-whynot', class: 'whynot' }, el('h2', { i18n: 'lab.whynot' }), form, el('div', { id: 'lab-whynot-out' }));
}

// Explains where the entry fell for the lab's query, with the hybrid
// column's paths and the sliders' fusion settings.
async function whyNot(entryId) {
  const panel = document.getElementById('lab-whynot');
  const out = document.getElementById('lab-whynot-out');
  document.getElementById('lab-whynot-id').value = entryId;
  if (!state) {
    clear(out, notice('warning', t('lab.whynot.needquery')));
    return;
  }
  panel.dataset.state = 'running';
  clear(out, el('span', { class: 'hint', i18n: 'running' }));
  const fusion = settings ? currentFusion() : {};
  const body = { query: state.query, entry_id: entryId, rerank: true, k: fusion.k, weights: fusion.weights, lexical_interpolation: fusion.lexical_interpolation };
  try {
    const w = await api('POST', `${kbPath(state.kb)}/why-not`, body);
    clear(out, renderWhyNot(w));
    panel.dataset.state = 'done';
  } catch (e) {
    clear(out, notice('error', `${e.code || ''} ${e.message}`));
    panel.dataset.state = 'error';
  }
  panel.scrollIntoView({ block: 'nearest' });
}

export function renderWhyNot(w) {
  const verdicts = table([
    { i18n: 'col.path', cell: (v) => v.path },
    { i18n: 'col.status', cell: (v) => el('span', { class: `verdict verdict-${v.status}`, dataset: { status: v.status }, text: t(`why.${v.status}`) }) },
    { i18n: 'col.rank', cell: (v) => fmt(v.rank) },
    { i18n: 'col.score', cell: (v) => fmt(v.score, 4) },
    { i18n: 'col.k', cell: (v) => fmt(v.k) },
    { i18n: 'col.reason', cell: (v) => v.reason },
  ], w.paths || [], { class: 'grid small verdicts', rowAttrs: (v) => ({ dataset: { path: v.path } }) });
  const facts = [];
  if (w.fused_rank) facts.push(el('li', { dataset: { fact: 'fused' } }, el('b', { i18n: 'lab.whynot.fused' }), ` ${w.fused_rank} (${fmt(w.fused_score, 4)}${w.fusion_rule ? `, ${w.fusion_rule}` : ''})`));
  else facts.push(el('li', { dataset: { fact: 'fused' } }, el('b', { i18n: 'lab.whynot.notfused' }), w.fusion_dropped ? ` — ${w.fusion_dropped}` : ''));
  if (w.reranked_rank) facts.push(el('li', { dataset: { fact: 'reranked' } }, el('b', { i18n: 'lab.whynot.reranked' }), ` ${w.reranked_rank}`));
  else if (w.rerank_dropped) facts.push(el('li', { dataset: { fact: 'reranked' } }, el('b', { i18n: 'lab.whynot.rerankdropped' })));
  if (w.context_source) facts.push(el('li', { dataset: { fact: 'context' } }, el('b', { i18n: 'lab.whynot.context' }), ` [${w.context_source}]`));
  else if (w.fused_rank) facts.push(el('li', { dataset: { fact: 'context' } }, el('b', { i18n: 'lab.whynot.notpacked' }), w.context_dropped ? ` — ${w.context_dropped}` : ''));
  return el('div', { class: 'whynot-result', dataset: { id: pid(w.id) } },
    el('h3', { class: 'title', text: w.title }),
    verdicts,
    w.contributions && w.contributions.length ? contributionTable(w) : null,
    el('ul', { class: 'whynot-facts' }, facts),
    rawDetails(w));
}
