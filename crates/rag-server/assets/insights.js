// Insights: figures over the query log, the log itself (open in Ask, replay
// under the current settings with a ranking diff), and the miss queue where
// a missed question becomes an FAQ entry in one step.
import { app, api, el, clear, t, fmt, table, notice, kbPath, modal, pid } from './core.js';

let root;

export function mount(node) {
  root = node;
  app.listeners.add((what) => { if ((what === 'kb' || what === 'kbs') && !root.hidden) render(); });
  render();
}

export function shown() { render(); }

async function render() {
  if (!app.kb) return;
  const kb = app.kb;
  root.dataset.state = 'loading';
  const figures = el('section', { id: 'insights-figures', class: 'card' });
  const misses = el('section', { id: 'insights-misses', class: 'card' });
  const log = el('section', { id: 'insights-log', class: 'card' });
  clear(root, figures, misses, log);
  try {
    const [a, rows, missRows] = await Promise.all([
      api('GET', `${kbPath(kb)}/analytics`),
      api('GET', `${kbPath(kb)}/log?limit=200`),
      api('GET', `${kbPath(kb)}/log?kb_miss=true&limit=100`),
    ]);
    renderFigures(figures, a);
    renderMisses(misses, missRows);
    renderLog(log, rows);
    root.dataset.state = 'done';
  } catch (e) {
    root.dataset.state = 'error';
    root.prepend(notice('error', e.message));
  }
}

function figure(label, value, id) {
  return el('div', { class: 'figure', id }, el('div', { class: 'fig-value', text: value }), el('div', { class: 'fig-label', i18n: label }));
}

// Ten buckets over [0, 1] with the miss threshold drawn where it falls.
function histogram(id, counts, threshold) {
  const max = Math.max(1, ...counts);
  const bars = counts.map((n, i) => {
    const bar = el('div', { class: 'bar', title: `${(i / 10).toFixed(1)}–${((i + 1) / 10).toFixed(1)}: ${n}` });
    bar.style.height = `${Math.round((100 * n) / max)}%`;
    return el('div', { class: 'bar-slot' }, bar, el('span', { class: 'bar-label', text: (i / 10).toFixed(1) }));
  });
  const box = el('div', { class: 'histogram', id }, bars);
  if (typeof threshold === 'number') {
    const line = el('div', { class: 'threshold', title: `${t('ins.threshold')} ${threshold}`, dataset: { threshold: String(threshold) } },
      el('span', { text: `${t('ins.threshold')} ${threshold}` }));
    line.style.left = `${Math.min(100, Math.max(0, threshold * 100))}%`;
    box.append(line);
  }
  return box;
}

// Hits and misses per day, stacked.
function timeline(days) {
  const max = Math.max(1, ...days.map((d) => d.queries));
  return el('div', { class: 'histogram timeline', id: 'ins-by-day' }, days.map((d) => {
    const day = new Date(d.day * 1000).toISOString().slice(5, 10);
    const hit = el('div', { class: 'bar' });
    hit.style.height = `${(100 * d.hits) / max}%`;
    const miss = el('div', { class: 'bar miss' });
    miss.style.height = `${(100 * d.misses) / max}%`;
    return el('div', { class: 'bar-slot', title: `${day}: ${d.queries} · ${d.hits} / ${d.misses}`, dataset: { day: String(d.day), queries: String(d.queries) } },
      miss, hit, el('span', { class: 'bar-label', text: day }));
  }));
}

function renderFigures(box, a) {
  const usefulness = a.usefulness === null || a.usefulness === undefined ? '–' : `${(100 * a.usefulness).toFixed(0)}%`;
  clear(box,
    el('h2', {}, el('span', { i18n: 'ins.figures' }), ` · ${a.days} `, el('span', { i18n: 'ins.days' })),
    el('div', { class: 'figures' },
      figure('ins.queries', String(a.queries), 'fig-queries'),
      figure('ins.hitrate', `${(100 * a.hit_rate).toFixed(1)}%`, 'fig-hitrate'),
      figure('ins.misses', String(a.misses), 'fig-misses'),
      figure('ins.useful', `${a.useful} / ${a.not_useful} (${usefulness})`, 'fig-feedback'),
      figure('ins.never', String(a.never_retrieved.length), 'fig-never'),
      figure('ins.unreviewed', String(a.unreviewed.length), 'fig-unreviewed'),
      figure('ins.deadsyn', String(a.synonyms_never_fired.length), 'fig-deadsyn')),
    el('h3', { i18n: 'ins.overtime' }), timeline(a.by_day),
    el('div', { class: 'two' },
      el('div', {}, el('h3', { i18n: 'ins.hist' }), histogram('ins-fused-hist', a.top_score_histogram, a.min_fused)),
      el('div', {}, el('h3', { i18n: 'ins.cosinehist' }), histogram('ins-cosine-hist', a.top_cosine_histogram, a.min_cosine))),
    el('h3', { i18n: 'ins.top' }),
    table([
      { i18n: 'col.question', cell: (r) => r.query },
      { i18n: 'ins.count', cell: (r) => r.count },
      { i18n: 'ins.misses', cell: (r) => (r.misses ? el('span', { class: 'stage-badge st-failed', text: r.misses }) : '0') },
    ], a.top_queries, { rowAttrs: (r) => ({ dataset: { query: r.query } }) }),
    el('details', { id: 'ins-never' }, el('summary', {}, el('span', { i18n: 'ins.never' }), ` (${a.never_retrieved.length})`),
      el('ul', {}, a.never_retrieved.slice(0, 100).map((p) => el('li', { text: p.title })))),
    el('details', { id: 'ins-unreviewed' }, el('summary', {}, el('span', { i18n: 'ins.unreviewed' }), ` (${a.unreviewed.length}, > ${a.review_days} `, el('span', { i18n: 'ins.days' }), ')'),
      el('ul', {}, a.unreviewed.slice(0, 100).map((u) => el('li', { text: `${u.question} — ${new Date(u.updated_at * 1000).toLocaleDateString()}` })))),
    el('details', { id: 'ins-deadsyn' }, el('summary', {}, el('span', { i18n: 'ins.deadsyn' }), ` (${a.synonyms_never_fired.length})`),
      el('ul', {}, a.synonyms_never_fired.slice(0, 100).map((g) => el('li', { text: g.join(' = ') })))));
}

function renderMisses(box, rows) {
  clear(box, el('h2', { i18n: 'ins.missqueue' }));
  if (!rows.length) { box.append(el('p', { class: 'hint', i18n: 'ins.nomiss' })); return; }
  box.append(table([
    { i18n: 'col.created', cell: (r) => new Date(r.created_at * 1000).toLocaleString() },
    { i18n: 'col.question', cell: (r) => r.query },
    ...(app.session.can_write ? [{ i18n: 'col.actions', cell: (r) => el('button', { type: 'button', class: 'to-faq', i18n: 'ins.tofaq', onclick: () => toFaq(r) }) }] : []),
  ], rows, { rowAttrs: (r) => ({ dataset: { log: r.id } }) }));
}

function toFaq(r) {
  const q = el('textarea', { id: 'miss-question', rows: 2, 'aria-label': 'question' });
  q.value = r.query;
  const a = el('textarea', { id: 'miss-answer', rows: 5, 'aria-label': 'answer', required: true });
  const approved = el('input', { id: 'miss-approve', type: 'checkbox', checked: true });
  const err = el('div');
  const form = el('form', { id: 'miss-form', class: 'stack' },
    el('label', {}, el('span', { i18n: 'col.question' }), q),
    el('label', {}, el('span', { i18n: 'col.answer' }), a),
    el('label', { class: 'check' }, approved, el('span', { i18n: 'corpus.approve' })),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'miss-save', i18n: 'corpus.create' })), err);
  const dlg = modal(t('ins.tofaq'), form);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const created = await api('POST', `${kbPath(app.kb)}/faqs`, { question: q.value.trim(), answer: a.value.trim(), status: approved.checked ? 'approved' : 'pending' });
      dlg.close();
      const row = document.querySelector(`#insights-misses tr[data-log="${CSS.escape(r.id)}"]`);
      if (row) {
        row.dataset.faq = created.id;
        const cell = row.querySelector('.to-faq');
        if (cell) cell.replaceWith(el('span', { class: 'done-faq', i18n: 'ins.faqmade' }));
      }
    } catch (e) { clear(err, notice('error', e.message)); }
  });
}

function renderLog(box, rows) {
  clear(box, el('h2', { i18n: 'ins.log' }), table([
    { i18n: 'col.created', cell: (r) => new Date(r.created_at * 1000).toLocaleString() },
    { i18n: 'col.question', cell: (r) => r.query },
    { i18n: 'col.score', cell: (r) => fmt(r.top_fused_score, 3) },
    { label: 'miss', cell: (r) => (r.kb_miss ? '✗' : '') },
    { i18n: 'ins.feedback', cell: (r) => (r.feedback === 'useful' ? '▲' : r.feedback === 'not_useful' ? '▼' : '') },
    { i18n: 'col.actions', cell: (r) => el('span', { class: 'actions' },
      el('button', { type: 'button', class: 'open-ask', i18n: 'ins.open', onclick: () => openInAsk(r) }),
      el('button', { type: 'button', class: 'replay', i18n: 'ins.replay', onclick: () => replay(r) })) },
  ], rows, { rowAttrs: (r) => ({ dataset: { log: r.id } }) }));
}

function openInAsk(r) {
  sessionStorage.setItem('ragscope.ask', r.query);
  location.hash = '#ask';
}

// Replays the logged question under the knowledge base's current settings
// and shows how its ranking moved.
async function replay(r) {
  const body = el('div', { class: 'replay-body' }, el('span', { class: 'hint', i18n: 'running' }));
  const dlg = modal(`${t('ins.replay')}: ${r.query}`, body);
  dlg.classList.add('replay-dialog');
  try {
    const res = await api('POST', `/log/${encodeURIComponent(r.id)}/replay`, {});
    const fused = res.events.find((e) => e.type === 'fused');
    const titles = new Map();
    for (const e of res.events) if (e.type === 'recall') for (const p of e.passages || []) titles.set(pid(p.id), p.title);
    const before = new Map(r.fused.map((h) => [pid(h.id), h]));
    const now = fused ? fused.hits : [];
    const nowIds = new Set(now.map((h) => pid(h.id)));
    const rows = now.map((h) => {
      const old = before.get(pid(h.id));
      const move = !old ? 'new' : old.rank === h.rank ? 'same' : old.rank > h.rank ? 'up' : 'down';
      return { title: titles.get(pid(h.id)) || (old && old.title) || pid(h.id), was: old ? old.rank : '–', now: h.rank, move };
    });
    for (const old of r.fused) if (!nowIds.has(pid(old.id))) rows.push({ title: old.title, was: old.rank, now: '–', move: 'gone' });
    clear(body, table([
      { i18n: 'col.title', cell: (x) => x.title },
      { i18n: 'ins.was', cell: (x) => x.was },
      { i18n: 'ins.now', cell: (x) => x.now },
      { label: '', cell: (x) => el('span', { class: `delta delta-${x.move === 'gone' ? 'down' : x.move}`, dataset: { delta: x.move }, text: x.move }) },
    ], rows, { rowAttrs: (x) => ({ dataset: { move: x.move } }) }));
    dlg.dataset.state = 'done';
  } catch (e) {
    clear(body, notice('error', e.message));
  }
}
