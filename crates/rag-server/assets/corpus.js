// Corpus: knowledge bases, documents, FAQ entries, synonyms and dictionary.
// Editing controls exist only for keys that may write.
import { app, api, el, clear, t, table, notice, kbPath, confirmDialog, modal, documentView } from './core.js';

let root;
let tab = 'faqs';
// Documents and FAQ entries are read from the server a page at a time (its
// cursors: the start of page i is cursors[i]); the FAQ status and text
// filters run there too.
const DOC_PAGE_SIZE = 50;
const FAQ_PAGE_SIZE = 20;
const view = {
  docs: { kb: null, filter: '', page: 0, cursors: [null], rows: [], total: 0, next: null },
  faqs: { kb: null, filter: '', status: '', page: 0, cursors: [null], rows: [], total: 0, next: null, seq: 0 },
};

const canWrite = () => !!(app.session && app.session.can_write);

export function mount(node) {
  root = node;
  app.listeners.add((what) => { if ((what === 'kb' || what === 'kbs') && !root.hidden) render(); });
  render();
}

export function shown() { render(); }

async function render() {
  const kbs = el('section', { id: 'corpus-kbs', class: 'card' });
  const tabs = el('div', { class: 'tabs', role: 'tablist' }, ['faqs', 'docs', 'lexicon'].map((id) => el('button', {
    type: 'button', role: 'tab', class: 'tab', id: `corpus-tab-${id}`, 'aria-selected': tab === id ? 'true' : 'false',
    i18n: id === 'faqs' ? 'corpus.faqs' : id === 'docs' ? 'corpus.docs' : 'corpus.lexicon',
    onclick: () => { tab = id; render(); },
  })));
  const body = el('section', { id: 'corpus-body', class: 'card' });
  clear(root, kbs, tabs, body);
  renderKbs(kbs);
  if (!app.kb) return;
  try {
    if (tab === 'docs') await renderDocs(body);
    else if (tab === 'faqs') await renderFaqs(body);
    else await renderLexicon(body);
  } catch (e) {
    body.append(notice('error', e.message));
  }
}

function renderKbs(box) {
  const rows = table([
    { i18n: 'col.name', cell: (k) => el('a', { href: '#corpus', class: k.name === app.kb ? 'current' : '', onclick: (e) => { e.preventDefault(); select(k.name); } }, k.name) },
    { i18n: 'col.created', cell: (k) => new Date(k.created_at * 1000).toLocaleString() },
    ...(canWrite() ? [{ i18n: 'col.actions', cell: (k) => el('button', { type: 'button', class: 'danger del-kb', dataset: { kb: k.name }, i18n: 'corpus.delete', onclick: () => deleteKb(k.name) }) }] : []),
  ], app.kbs, { rowAttrs: (k) => ({ dataset: { kb: k.name } }) });
  box.append(el('h2', { i18n: 'corpus.kbs' }), rows);
  if (canWrite()) {
    const name = el('input', { id: 'new-kb', type: 'text', required: true, pattern: '[A-Za-z0-9_\\-]{1,64}', 'aria-label': 'name' });
    const form = el('form', { class: 'inline' }, el('span', { i18n: 'corpus.newkb' }), name, el('button', { type: 'submit', i18n: 'corpus.create' }));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        await api('POST', '/kbs', { name: name.value.trim() });
        await app.refreshKbs(name.value.trim());
        render();
      } catch (e) { form.append(notice('error', e.message)); }
    });
    box.append(form);
  }
}

function select(name) {
  app.kb = name;
  document.getElementById('kb').value = name;
  for (const f of app.listeners) f('kb');
}

async function deleteKb(name) {
  if (!(await confirmDialog(`${t('corpus.confirm.kb')} ${name}`, name))) return;
  try {
    await api('DELETE', kbPath(name));
    await app.refreshKbs();
    render();
  } catch (e) { root.prepend(notice('error', e.message)); }
}

// ---------------------------------------------------------------- documents

// Reads page v.page of a listing into v; `key` names the rows in the
// response. Only the latest request of a view is kept (typing in a filter
// sends one per pause).
async function loadPage(v, path, key, size, params = {}) {
  const q = new URLSearchParams({ limit: String(size), ...params });
  const cursor = v.cursors[v.page];
  if (cursor) q.set('cursor', cursor);
  const seq = (v.seq = (v.seq || 0) + 1);
  const r = await api('GET', `${kbPath(app.kb)}/${path}?${q}`);
  if (seq !== v.seq) return false;
  v.rows = r[key];
  v.total = r.total;
  v.next = r.next_cursor;
  if (v.next) v.cursors[v.page + 1] = v.next;
  else v.cursors.length = v.page + 1;
  return true;
}

const loadDocs = (v) => loadPage(v, 'documents', 'documents', DOC_PAGE_SIZE);

// Previous / next over the server's pages. The count is the knowledge
// base's (of the status asked, for FAQ entries); a filter applied on the
// server makes the number of pages unknown.
function serverPager(v, go, size, filtered = false) {
  const pages = Math.max(v.page + 1, Math.ceil(v.total / size));
  const info = filtered ? `${v.page + 1} · ${v.total}` : `${v.page + 1} / ${pages} · ${v.total}`;
  return el('div', { class: 'pager' },
    el('button', { type: 'button', class: 'prev', i18n: 'corpus.prev', disabled: v.page === 0, onclick: () => go(-1) }),
    el('span', { class: 'pageinfo', text: info }),
    el('button', { type: 'button', class: 'next', i18n: 'corpus.next', disabled: !v.next, onclick: () => go(1) }));
}

async function renderDocs(box) {
  const v = view.docs;
  if (v.kb !== app.kb) Object.assign(v, { kb: app.kb, filter: '', page: 0, cursors: [null] });
  await loadDocs(v);
  // A page emptied by deletes: step back to one that has documents.
  while (!v.rows.length && v.page > 0) {
    v.page--;
    await loadDocs(v);
  }
  const list = el('div', { class: 'list' });
  const draw = () => {
    const f = v.filter.toLowerCase();
    const rows = v.rows.filter((d) => !f || d.title.toLowerCase().includes(f) || d.source.toLowerCase().includes(f));
    clear(list, table([
      { i18n: 'col.title', cell: (d) => d.title },
      { i18n: 'col.source', cell: (d) => d.source },
      { i18n: 'col.chunks', cell: (d) => d.chunks },
      { i18n: 'col.actions', cell: (d) => el('span', { class: 'actions' },
        el('button', { type: 'button', class: 'view-doc', i18n: 'corpus.view', onclick: () => showDoc(d) }),
        canWrite() ? el('button', { type: 'button', class: 'draft-doc', i18n: 'corpus.draft', onclick: () => draftFaqs(d) }) : null,
        canWrite() ? el('button', { type: 'button', class: 'danger del-doc', i18n: 'corpus.delete', onclick: () => deleteDoc(d) }) : null) },
    ], rows, { rowAttrs: (d) => ({ dataset: { doc: d.id } }) }), serverPager(v, go, DOC_PAGE_SIZE));
  };
  const go = async (step) => {
    const from = v.page;
    v.page = Math.max(0, v.page + step);
    try {
      await loadDocs(v);
    } catch (e) {
      v.page = from;
      list.prepend(notice('error', e.message));
      return;
    }
    draw();
  };
  const filter = el('input', { id: 'doc-filter', type: 'search', i18nPlaceholder: 'corpus.filterpage', value: v.filter, 'aria-label': 'filter' });
  filter.addEventListener('input', () => { v.filter = filter.value; draw(); });
  clear(box, el('div', { class: 'row' }, filter), list);
  draw();
}

async function showDoc(d) {
  const full = await api('GET', `${kbPath(app.kb)}/documents/${d.id}`);
  const dlg = modal(d.title, el('p', { class: 'hint' }, `${d.source} · ${full.chunks.length} `, el('span', { i18n: 'corpus.chunkboundaries' })), documentView(full));
  dlg.classList.add('doc-dialog');
}

// Asks the configured LLM for FAQ drafts from the document; shows what was
// stored and why entries were left out, or the server's reason.
async function draftFaqs(d) {
  const body = el('div', {}, notice('info', t('corpus.drafting')));
  modal(d.title, body);
  try {
    const r = await api('POST', `${kbPath(app.kb)}/documents/${d.id}/faq-drafts`);
    clear(body,
      notice('info', `${r.added.length} ${t('corpus.drafted')}; ${r.replaced} ${t('corpus.draftreplaced')}`),
      el('ul', { class: 'drafts' }, r.added.map((f) => el('li', {}, el('strong', { text: f.question }), el('br'), f.answer))),
      r.dropped.length ? el('p', { class: 'hint' }, t('corpus.draftdropped')) : null,
      r.dropped.length ? el('ul', { class: 'dropped' }, r.dropped.map((x) => el('li', { text: x }))) : null);
  } catch (e) {
    clear(body, notice('error', e.message || String(e)));
  }
}

async function deleteDoc(d) {
  if (!(await confirmDialog(`${t('corpus.confirm.doc')} ${d.title}`))) return;
  await api('DELETE', `${kbPath(app.kb)}/documents/${d.id}`);
  render();
}

// ---------------------------------------------------------------- FAQ entries

const faqFilters = (v) => {
  const p = {};
  if (v.status) p.status = v.status;
  if (v.filter.trim()) p.contains = v.filter.trim();
  return p;
};
const loadFaqs = (v) => loadPage(v, 'faqs', 'faqs', FAQ_PAGE_SIZE, faqFilters(v));

async function renderFaqs(box) {
  const v = view.faqs;
  if (v.kb !== app.kb) Object.assign(v, { kb: app.kb, filter: '', status: '', page: 0, cursors: [null] });
  await loadFaqs(v);
  // A page emptied by deletes: step back to one that has entries.
  while (!v.rows.length && v.page > 0) {
    v.page--;
    await loadFaqs(v);
  }
  const list = el('div', { class: 'list' });
  const draw = () => {
    clear(list, table([
      { i18n: 'col.question', cell: (x) => x.question },
      { i18n: 'col.answer', class: 'answer-cell', cell: (x) => x.answer },
      { i18n: 'col.status', cell: (x) => el('span', { class: `status status-${x.status}`, text: x.status }) },
      { i18n: 'col.edited', cell: (x) => el('span', { class: 'edited', dataset: { edited: String(x.edited) }, i18n: x.edited ? 'yes' : 'no' }) },
      { i18n: 'col.tags', cell: (x) => x.tags.join(', ') },
      ...(canWrite() ? [{ i18n: 'col.actions', cell: (x) => faqActions(x, draw) }] : []),
    ], v.rows, { rowAttrs: (x) => ({ dataset: { faq: x.id, status: x.status } }) }), serverPager(v, go, FAQ_PAGE_SIZE, !!v.filter.trim()));
  };
  // Moves `step` pages (0: reads the current page again).
  const go = async (step) => {
    const from = v.page;
    v.page = Math.max(0, v.page + step);
    try {
      if (!(await loadFaqs(v))) return;
    } catch (e) {
      v.page = from;
      list.prepend(notice('error', e.message));
      return;
    }
    draw();
  };
  // A new filter starts from the first page.
  const refilter = () => { v.page = 0; v.cursors = [null]; go(0); };
  const status = el('select', { id: 'faq-status', 'aria-label': 'status' },
    el('option', { value: '', i18n: 'corpus.all' }), ['approved', 'pending', 'disabled'].map((x) => el('option', { value: x, text: x })));
  status.value = v.status;
  status.addEventListener('change', () => { v.status = status.value; refilter(); });
  const filter = el('input', { id: 'faq-filter', type: 'search', i18nPlaceholder: 'corpus.filter', value: v.filter, 'aria-label': 'filter' });
  let pause;
  filter.addEventListener('input', () => {
    v.filter = filter.value;
    clearTimeout(pause);
    pause = setTimeout(refilter, 250);
  });
  const add = canWrite() ? el('button', { type: 'button', id: 'new-faq', i18n: 'corpus.newfaq', onclick: () => newFaq(() => go(0)) }) : null;
  clear(box, el('div', { class: 'row' }, filter, status, add), list);
  draw();
}

function newFaq(draw) {
  const q = el('textarea', { id: 'faq-new-question', rows: 2, required: true, 'aria-label': 'question' });
  const a = el('textarea', { id: 'faq-new-answer', rows: 5, required: true, 'aria-label': 'answer' });
  const tags = el('input', { id: 'faq-new-tags', type: 'text', 'aria-label': 'tags' });
  const status = el('select', { id: 'faq-new-status', 'aria-label': 'status' }, ['approved', 'pending'].map((x) => el('option', { value: x, text: x })));
  const err = el('div');
  const form = el('form', { id: 'faq-new', class: 'stack' },
    el('label', {}, el('span', { i18n: 'col.question' }), q),
    el('label', {}, el('span', { i18n: 'col.answer' }), a),
    el('label', {}, el('span', { i18n: 'col.tags' }), tags),
    el('label', {}, el('span', { i18n: 'col.status' }), status),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'faq-new-save', i18n: 'corpus.create' })), err);
  const dlg = modal(t('corpus.newfaq'), form);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api('POST', `${kbPath(app.kb)}/faqs`, {
        question: q.value.trim(), answer: a.value.trim(), status: status.value,
        tags: tags.value.split(',').map((x) => x.trim()).filter(Boolean),
      });
      dlg.close();
      // The listing is oldest first: the new entry is on the last page.
      draw();
    } catch (e) { clear(err, notice('error', e.message)); }
  });
}

function faqActions(x, draw) {
  const replace = (updated) => {
    const i = view.faqs.rows.findIndex((r) => r.id === updated.id);
    if (i >= 0) view.faqs.rows[i] = updated;
    draw();
  };
  const act = async (path, method = 'POST', body) => {
    try { replace(await api(method, `${kbPath(app.kb)}/faqs/${x.id}${path}`, body)); } catch (e) { root.prepend(notice('error', e.message)); }
  };
  return el('span', { class: 'actions' },
    el('button', { type: 'button', class: 'edit-faq', i18n: 'corpus.edit', onclick: () => editFaq(x, replace) }),
    x.status !== 'approved' ? el('button', { type: 'button', class: 'approve-faq', i18n: 'corpus.approve', onclick: () => act('/approve', 'POST', {}) }) : null,
    x.status !== 'disabled' ? el('button', { type: 'button', class: 'disable-faq', i18n: 'corpus.disable', onclick: () => act('/disable', 'POST', {}) }) : null,
    el('button', { type: 'button', class: 'danger del-faq', i18n: 'corpus.delete', onclick: async () => {
      if (!(await confirmDialog(`${t('corpus.confirm.faq')} ${x.question}`))) return;
      try {
        await api('DELETE', `${kbPath(app.kb)}/faqs/${x.id}`);
        view.faqs.rows = view.faqs.rows.filter((r) => r.id !== x.id);
        view.faqs.total = Math.max(0, view.faqs.total - 1);
        draw();
      } catch (e) { root.prepend(notice('error', e.message)); }
    } }));
}

function editFaq(x, replace) {
  const q = el('textarea', { id: 'faq-edit-question', rows: 2, 'aria-label': 'question' });
  q.value = x.question;
  const a = el('textarea', { id: 'faq-edit-answer', rows: 6, 'aria-label': 'answer' });
  a.value = x.answer;
  const tags = el('input', { id: 'faq-edit-tags', type: 'text', value: x.tags.join(', '), 'aria-label': 'tags' });
  const err = el('div');
  const form = el('form', { id: 'faq-edit', class: 'stack' },
    el('label', {}, el('span', { i18n: 'col.question' }), q),
    el('label', {}, el('span', { i18n: 'col.answer' }), a),
    el('label', {}, el('span', { i18n: 'col.tags' }), tags),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'faq-edit-save', i18n: 'corpus.save' })), err);
  const dlg = modal(t('corpus.edit'), form);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const patch = {};
    if (q.value !== x.question) patch.question = q.value;
    if (a.value !== x.answer) patch.answer = a.value;
    const newTags = tags.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (newTags.join('\u0000') !== x.tags.join('\u0000')) patch.tags = newTags;
    try {
      const updated = await api('PATCH', `${kbPath(app.kb)}/faqs/${x.id}`, patch);
      dlg.close();
      replace(updated);
    } catch (e) { clear(err, notice('error', e.message)); }
  });
}

// ---------------------------------------------------------------- lexicon

async function renderLexicon(box) {
  const lex = await api('GET', `${kbPath(app.kb)}/lexicon`);
  const syn = el('div', { id: 'synonyms' }, el('h3', { i18n: 'corpus.synonyms' }),
    el('ul', { class: 'chips' }, lex.synonyms.map((g) => el('li', { text: g.terms.join(' = ') }))));
  const words = el('div', { id: 'words' }, el('h3', { i18n: 'corpus.words' }),
    el('ul', { class: 'chips' }, lex.user_words.map((w) => el('li', { text: w.word }))));
  clear(box, syn, words);
  if (!canWrite()) return;
  const terms = el('input', { id: 'syn-terms', type: 'text', 'aria-label': 'terms' });
  const synForm = el('form', { class: 'inline' }, el('span', { i18n: 'corpus.addsyn' }), terms, el('button', { type: 'submit', i18n: 'corpus.add' }));
  synForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const list = terms.value.split(/[,，、]/).map((s) => s.trim()).filter(Boolean);
    try {
      await api('POST', `${kbPath(app.kb)}/synonyms`, [{ terms: list }]);
      render();
    } catch (e) { synForm.append(notice('error', e.message)); }
  });
  syn.append(synForm);
  const word = el('input', { id: 'dict-word', type: 'text', 'aria-label': 'word' });
  const wordForm = el('form', { class: 'inline' }, el('span', { i18n: 'corpus.addword' }), word, el('button', { type: 'submit', i18n: 'corpus.add' }));
  wordForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api('POST', `${kbPath(app.kb)}/dictionary`, [{ word: word.value.trim() }]);
      render();
    } catch (e) { wordForm.append(notice('error', e.message)); }
  });
  words.append(wordForm);
}
