// Eval: a golden set (JSON Lines, pasted or loaded from a file) run under
// two retrieval settings through POST /kbs/{kb}/eval; the means side by
// side, a per-question table with the rows where A and B differ marked,
// and "adopt" buttons that save one side's settings to the knowledge base.
import { app, api, el, clear, t, fmt, table, notice, kbPath } from './core.js';
import { renderWhyNot } from './lab.js';

const PATHS = ['bm25', 'substring', 'fuzzy', 'synonym', 'fact', 'translated', 'dense', 'second_dense'];
const SIDES = ['a', 'b'];

let root;
let kbRow = null; // the knowledge base as last read
let report = null; // the last evaluation

export function mount(node) {
  root = node;
  app.listeners.add((what) => {
    if ((what === 'kb' || what === 'kbs') && !root.hidden) render();
    else if (what === 'kb' || what === 'kbs') kbRow = null;
    if (what === 'lang' && report) renderReport();
  });
  render();
}

export function shown() { if (!kbRow || kbRow.name !== app.kb) render(); }

// Parses JSON Lines into [{question, expected}]; throws with the line number.
function parseGolden(text) {
  const rows = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let v;
    try { v = JSON.parse(line); } catch (e) { throw new Error(`${t('eval.line').replace('{n}', i + 1)}: ${e.message}`); }
    const ok = v && typeof v.question === 'string' && Array.isArray(v.expected) && v.expected.every((x) => typeof x === 'string');
    if (!ok) throw new Error(`${t('eval.line').replace('{n}', i + 1)}: ${t('eval.badline')}`);
    rows.push({ question: v.question, expected: v.expected });
  });
  return rows;
}

async function render() {
  report = null;
  const golden = el('section', { id: 'eval-golden', class: 'card' });
  const sides = el('section', { id: 'eval-sides', class: 'card' });
  const results = el('section', { id: 'eval-results', class: 'card', hidden: true });
  clear(root, golden, sides, results);
  root.dataset.state = 'idle';
  if (!app.kb) return;
  const text = el('textarea', { id: 'eval-golden-text', rows: 8, spellcheck: 'false', 'aria-label': 'golden set',
    placeholder: '{"question": "怎么退款？", "expected": ["faq:…", "refund-policy.md"]}' });
  const file = el('input', { id: 'eval-file', type: 'file', accept: '.jsonl,.json,.txt,application/json' });
  const status = el('div', { id: 'eval-golden-status', class: 'hint' });
  file.addEventListener('change', async () => {
    const f = file.files && file.files[0];
    if (!f) return;
    text.value = await f.text();
    showCount(text.value, status);
  });
  text.addEventListener('input', () => showCount(text.value, status));
  golden.append(el('h2', { i18n: 'eval.golden' }), el('p', { class: 'hint', i18n: 'eval.golden.hint' }), text,
    el('div', { class: 'row' }, el('label', { class: 'row' }, el('span', { i18n: 'eval.file' }), file)), status);
  try {
    kbRow = await api('GET', kbPath(app.kb));
  } catch (e) { sides.append(notice('error', e.message)); return; }
  const retrieval = kbRow.settings.retrieval;
  const run = el('button', { id: 'eval-run', type: 'button', class: 'primary', i18n: 'eval.run' });
  const out = el('div', { id: 'eval-run-status' });
  run.addEventListener('click', () => runEval(text.value, run, out, results));
  sides.append(el('h2', {}, el('span', { i18n: 'eval.settings' }), ` · ${kbRow.name}`), el('p', { class: 'hint', i18n: 'eval.settings.hint' }),
    el('div', { class: 'two' }, SIDES.map((s) => sideForm(s, retrieval))), el('div', { class: 'row' }, run), out);
}

function showCount(text, status) {
  try {
    const n = parseGolden(text).length;
    clear(status, `${n} ${t('eval.questions')}`);
  } catch (e) { clear(status, notice('error', e.message)); }
}

// The form of one side, filled with the knowledge base's retrieval settings.
function sideForm(side, r) {
  const f = r.fusion;
  const id = (name) => `eval-${side}-${name}`;
  const num = (name, value, step, min, max) => el('input', { id: id(name), type: 'number', step, min, max, value: value ?? '' });
  const field = (label, input) => el('label', { class: 'field' }, el('span', { i18n: label }), input);
  const rule = el('select', { id: id('rule') }, ['convex', 'rrf'].map((v) => el('option', { value: v, text: v, selected: f.rule === v })));
  const lambda = num('lambda', f.lexical_interpolation, '0.05', 0, 1);
  lambda.dataset.i18nPlaceholder = 'lab.lambda.auto';
  lambda.placeholder = t('lab.lambda.auto');
  const paths = el('div', { class: 'row eval-paths' }, PATHS.map((p) => el('label', { class: 'check' },
    el('input', { type: 'checkbox', id: id(`path-${p}`), checked: r.paths.includes(p) }), el('span', { text: p }))));
  const weights = el('div', { class: 'row eval-weights' }, PATHS.map((p) => el('label', { class: 'slider' }, el('span', { text: p }),
    el('input', { id: id(`w-${p}`), type: 'number', step: '0.05', min: 0, max: 1000, value: f.weights[p] ?? 1, 'aria-label': `${p} weight` }))));
  const rerank = el('input', { type: 'checkbox', id: id('rerank'), checked: r.rerank });
  return el('form', { id: `eval-side-${side}`, class: 'stack eval-side', dataset: { side } },
    el('h3', { i18n: `eval.side.${side}` }),
    el('div', {}, el('span', { class: 'glabel', i18n: 'eval.paths' }), paths),
    el('div', { class: 'three' }, field('eval.topk', num('top-k', f.top_k, '1', 1, 200)), field('lab.k', num('k', f.k, '1', 1, 1000000)), field('eval.rule', rule)),
    field('lab.lambda', lambda),
    el('div', {}, el('span', { class: 'glabel', i18n: 'lab.weights' }), weights),
    el('label', { class: 'check' }, rerank, el('span', { i18n: 'eval.rerank' })));
}

// The overrides a side's form stands for (values the knowledge base has are sent too; the server validates).
function overrides(side) {
  const v = (name) => document.getElementById(`eval-${side}-${name}`);
  const weights = {};
  for (const p of PATHS) weights[p] = Number(v(`w-${p}`).value);
  const o = {
    paths: PATHS.filter((p) => v(`path-${p}`).checked),
    top_k: Number(v('top-k').value),
    k: Number(v('k').value),
    fusion_rule: v('rule').value,
    weights,
    rerank: v('rerank').checked,
  };
  if (v('lambda').value.trim() !== '') o.lexical_interpolation = Number(v('lambda').value);
  return o;
}

async function runEval(text, button, out, results) {
  let golden;
  try { golden = parseGolden(text); } catch (e) { clear(out, notice('error', e.message)); return; }
  if (!golden.length) { clear(out, notice('error', t('eval.empty'))); return; }
  const kb = app.kb;
  button.disabled = true;
  root.dataset.state = 'running';
  clear(out, el('span', { class: 'hint', i18n: 'running' }));
  try {
    report = await api('POST', `${kbPath(kb)}/eval`, { golden, a: overrides('a'), b: overrides('b') });
    report.kb = kb;
    clear(out);
    results.hidden = false;
    renderReport();
    root.dataset.state = 'done';
  } catch (e) {
    root.dataset.state = 'error';
    clear(out, notice('error', `${e.code || ''} ${e.message}`));
  } finally { button.disabled = false; }
}

const delta = (a, b) => (b === null || b === undefined ? null : b - a);
const signed = (x) => (x === null ? '–' : `${x > 0 ? '+' : ''}${fmt(x, 4)}`);
const rank = (s) => (s && s.first_rank ? String(s.first_rank) : '–');

function renderReport() {
  const results = document.getElementById('eval-results');
  if (!results || !report) return;
  const { a, b } = report;
  const metric = (key, label) => ({ label, a: a.means[key], b: b ? b.means[key] : null });
  const means = [metric('ndcg10', 'nDCG@10'), metric('recall10', 'Recall@10'), metric('mrr10', 'MRR@10')];
  const meanTable = table([
    { i18n: 'eval.metric', cell: (m) => m.label },
    { i18n: 'eval.side.a', class: 'num mean-a', cell: (m) => fmt(m.a, 4) },
    { i18n: 'eval.side.b', class: 'num mean-b', cell: (m) => fmt(m.b, 4) },
    { i18n: 'eval.diff', class: 'num', cell: (m) => signed(delta(m.a, m.b)) },
  ], means, { class: 'grid small', rowAttrs: (m) => ({ dataset: { metric: m.label } }) });
  meanTable.id = 'eval-means';
  const differs = (q) => q.b && (Math.abs(q.a.ndcg10 - q.b.ndcg10) > 1e-12 || q.a.first_rank !== q.b.first_rank);
  const perQuery = table([
    { i18n: 'col.question', cell: (q) => q.question },
    { i18n: 'eval.expected', cell: (q) => el('span', { class: 'hint', text: q.expected.join(', ') }) },
    { i18n: 'eval.andcg', class: 'num q-a-ndcg', cell: (q) => fmt(q.a.ndcg10, 4) },
    { i18n: 'eval.arank', class: 'num q-a-rank', cell: (q) => rank(q.a) },
    { i18n: 'eval.bndcg', class: 'num q-b-ndcg', cell: (q) => (q.b ? fmt(q.b.ndcg10, 4) : '–') },
    { i18n: 'eval.brank', class: 'num q-b-rank', cell: (q) => rank(q.b) },
    { i18n: 'eval.diff', class: 'num q-diff', cell: (q) => {
      const d = q.b ? delta(q.a.ndcg10, q.b.ndcg10) : null;
      return el('span', { class: d > 0 ? 'delta delta-up' : d < 0 ? 'delta delta-down' : 'delta delta-same', text: signed(d) });
    } },
    { label: '', cell: (q) => {
      const entry = q.expected.find((x) => /^(faq|chunk|fact):/.test(x));
      // The side that missed the entry at rank 1 (A first).
      const side = q.a.first_rank !== 1 ? 'a' : q.b && q.b.first_rank !== 1 ? 'b' : null;
      return entry && side
        ? el('button', { type: 'button', class: 'small eval-whynot', dataset: { side }, i18n: 'lab.whynot.ask', onclick: () => whyNot(q.question, entry, side) })
        : null;
    } },
  ], report.queries, { class: 'grid small', rowAttrs: (q) => ({ class: differs(q) ? 'eval-row differs' : 'eval-row', dataset: { differs: differs(q) ? '1' : '0' } }) });
  perQuery.id = 'eval-queries';
  const adoptOut = el('div', { id: 'eval-adopt-result' });
  const adopt = app.session.can_write
    ? el('div', { class: 'row' }, SIDES.filter((s) => report[s]).map((s) => el('button', { type: 'button', id: `eval-adopt-${s}`, i18n: `eval.adopt.${s}`, onclick: () => adoptSide(s, adoptOut) })), adoptOut)
    : null;
  const changed = report.queries.filter(differs).length;
  clear(results, el('h2', { i18n: 'eval.results' }), meanTable, adopt,
    el('h3', {}, el('span', { i18n: 'eval.perquery' }), b ? ` · ${changed} ${t('eval.changed')}` : ''), perQuery,
    el('section', { id: 'eval-whynot', class: 'whynot' }, el('h2', { i18n: 'lab.whynot' }), el('div', { id: 'eval-whynot-out' })));
}

// Explains, under one side's settings, where a question's expected entry fell.
async function whyNot(question, entry, side) {
  const panel = document.getElementById('eval-whynot');
  const out = document.getElementById('eval-whynot-out');
  const a = overrides(side);
  const body = { query: question, entry_id: entry, paths: a.paths, top_k: a.top_k, k: a.k, weights: a.weights, rerank: a.rerank };
  if (a.lexical_interpolation !== undefined) body.lexical_interpolation = a.lexical_interpolation;
  panel.dataset.state = 'running';
  clear(out, el('span', { class: 'hint', i18n: 'running' }));
  try {
    clear(out, renderWhyNot(await api('POST', `${kbPath(report.kb)}/why-not`, body)));
    panel.dataset.state = 'done';
  } catch (e) {
    clear(out, notice('error', `${e.code || ''} ${e.message}`));
    panel.dataset.state = 'error';
  }
  panel.scrollIntoView({ block: 'nearest' });
}

// Saves one side's retrieval settings (as the server resolved them) to the knowledge base.
async function adoptSide(side, out) {
  const kb = report.kb;
  try {
    const row = await api('GET', kbPath(kb));
    const next = structuredClone(row.settings);
    next.retrieval = structuredClone(report[side].settings);
    kbRow = await api('PUT', `${kbPath(kb)}/settings`, next);
    out.dataset.adopted = side;
    clear(out, notice('info', `${t(`eval.adopted.${side}`)} · ${kb}`));
  } catch (e) { clear(out, notice('error', `${e.code || ''} ${e.message}`)); }
}
