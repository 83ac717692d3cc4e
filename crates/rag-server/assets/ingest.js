// Ingest: drop several files, upload them in one multipart request and show
// each file's progress events as the server streams them; add web pages as
// URL sources, sync them and show each page's outcome.
import { app, api, el, clear, t, notice, streamPost, kbPath, table, confirmDialog } from './core.js';

let root;

export function mount(node) {
  root = node;
  render();
  app.listeners.add((what) => { if (what === 'kb' || what === 'kbs') render(); });
}

export function shown() {}

function render() {
  if (!app.session.can_write) {
    clear(root, notice('info', t('readonly')));
    return;
  }
  const input = el('input', { id: 'ingest-files', type: 'file', multiple: true, hidden: true });
  const zone = el('div', { id: 'dropzone', class: 'dropzone', tabindex: 0, role: 'button', i18n: 'ingest.drop' });
  zone.addEventListener('click', () => input.click());
  zone.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); input.click(); } });
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    const files = [...e.dataTransfer.files];
    if (files.length) { upload(files); return; }
    // A link dragged from a browser arrives as text/uri-list.
    const links = (e.dataTransfer.getData('text/uri-list') || '').split(/\r?\n/).filter((l) => l && !l.startsWith('#'));
    for (const l of links) addUrl(l, 0);
  });
  input.addEventListener('change', () => { upload([...input.files]); input.value = ''; });
  const url = el('input', { id: 'source-url', type: 'url', placeholder: 'https://…', required: true, 'aria-label': 'URL', size: 48 });
  const depth = el('select', { id: 'source-depth', 'aria-label': 'depth' }, ...[0, 1, 2, 3].map((d) => el('option', { value: d, text: d })));
  const form = el('form', { id: 'source-form', class: 'row' }, url, el('label', {}, el('span', { i18n: 'ingest.depth' }), ' ', depth),
    el('button', { type: 'submit', id: 'source-add', i18n: 'ingest.addurl' }));
  form.addEventListener('submit', (e) => { e.preventDefault(); addUrl(url.value.trim(), Number(depth.value)); url.value = ''; });
  clear(root,
    el('section', { class: 'card' }, el('h2', {}, el('span', { i18n: 'nav.ingest' }), ' → ', el('b', { text: app.kb || '–' })), zone, input, el('div', { id: 'ingest-runs' })),
    el('section', { class: 'card' }, el('h2', { i18n: 'ingest.urls' }), el('p', { class: 'hint', i18n: 'ingest.urlhint' }), form,
      el('div', { id: 'source-result' }), el('div', { id: 'source-list' })));
  listSources();
}

const pageTable = (pages) => table([
  { i18n: 'col.url', cell: (p) => p.url },
  { i18n: 'col.outcome', cell: (p) => el('span', { class: `stage-badge st-${p.outcome}`, text: p.outcome }) },
  { i18n: 'col.reason', cell: (p) => p.reason || '' },
], pages, { rowAttrs: (p) => ({ dataset: { url: p.url, outcome: p.outcome } }) });

async function listSources() {
  const box = document.getElementById('source-list');
  if (!box || !app.kb) return;
  try {
    const sources = await api('GET', `${kbPath(app.kb)}/sources`);
    if (!sources.length) { clear(box, el('p', { class: 'hint', i18n: 'ingest.nosources' })); return; }
    clear(box, table([
      { i18n: 'col.url', cell: (s) => s.url },
      { i18n: 'col.status', cell: (s) => el('span', { class: `stage-badge st-${s.status}`, text: s.status, title: s.reason || '' }) },
      { i18n: 'ingest.lastsync', cell: (s) => (s.last_sync ? new Date(s.last_sync * 1000).toLocaleString() : '–') },
      { i18n: 'col.pages', cell: (s) => `${s.pages.filter((p) => p.doc).length} / ${s.pages.length}` },
      { i18n: 'col.actions', cell: (s) => el('span', {},
        el('button', { type: 'button', class: 'source-sync', i18n: 'ingest.resync', onclick: () => sync(s) }), ' ',
        el('button', { type: 'button', class: 'source-remove danger', i18n: 'ingest.remove', onclick: async () => {
          if (!(await confirmDialog(t('ingest.confirmremove')))) return;
          try { await api('DELETE', `${kbPath(app.kb)}/sources/${s.id}`); listSources(); } catch (e) { show(notice('error', e.message)); }
        } })) },
    ], sources, { rowAttrs: (s) => ({ dataset: { source: s.id, status: s.status } }) }));
  } catch (e) { clear(box, notice('error', e.message)); }
}

function show(...nodes) { clear(document.getElementById('source-result'), ...nodes); }

async function sync(source) {
  const result = el('div', { class: 'ingest-run', dataset: { state: 'running' } }, el('span', { class: 'hint', text: `${source.url} …` }));
  show(result);
  try {
    const s = await api('POST', `${kbPath(app.kb)}/sources/${source.id}/sync`);
    result.dataset.state = s.status;
    clear(result, el('b', { text: `${s.url}: ${s.status}` }), s.reason ? notice('error', s.reason) : '', pageTable(s.pages));
  } catch (e) {
    result.dataset.state = 'error';
    clear(result, notice('error', `${e.code || ''} ${e.message}`));
  }
  listSources();
}

async function addUrl(url, depth) {
  if (!url || !app.kb) return;
  try {
    const s = await api('POST', `${kbPath(app.kb)}/sources`, { url, depth });
    await sync(s);
  } catch (e) { show(notice('error', `${e.code || ''} ${e.message}`)); }
}

async function upload(files) {
  if (!files.length || !app.kb) return;
  const kb = app.kb;
  const form = new FormData();
  for (const f of files) form.append('file', f, f.name);
  const rows = new Map(files.map((f) => [f.name, { file: f.name, bytes: f.size, stage: 'queued', detail: '' }]));
  const box = el('div', { class: 'ingest-run', dataset: { state: 'running' } });
  const tableBox = el('div');
  const summary = el('div', { class: 'summary' });
  box.append(tableBox, summary);
  document.getElementById('ingest-runs').prepend(box);
  const draw = () => clear(tableBox, table([
    { i18n: 'col.file', cell: (r) => r.file },
    { i18n: 'col.bytes', cell: (r) => r.bytes },
    { i18n: 'col.status', cell: (r) => el('span', { class: `stage-badge st-${r.stage}`, text: r.stage }) },
    { i18n: 'col.reason', cell: (r) => r.detail },
  ], [...rows.values()], { rowAttrs: (r) => ({ dataset: { file: r.file, stage: r.stage } }) }));
  draw();
  try {
    await streamPost(`${kbPath(kb)}/documents`, form, (type, data) => {
      if (type === 'summary') {
        clear(summary, el('b', { i18n: 'ingest.summary' }), ` ${data.files} · indexed ${data.indexed} · skipped ${data.skipped} · failed ${data.failed}`);
        return;
      }
      const row = rows.get(data.file) || { file: data.file, bytes: '', stage: '', detail: '' };
      row.stage = data.stage || type;
      if (data.bytes !== undefined) row.bytes = data.bytes;
      if (type === 'indexed') row.detail = data.chunks ? `${data.chunks} chunks` : `${data.faqs_added} FAQ`;
      else if (data.reason) row.detail = data.reason;
      else if (type !== 'received') row.detail = JSON.stringify(data);
      rows.set(data.file, row);
      draw();
    });
    box.dataset.state = 'done';
  } catch (e) {
    box.dataset.state = 'error';
    summary.append(notice('error', `${e.code || ''} ${e.message}`));
  }
}
