// Ingest: drop several files, upload them in one multipart request and show
// each file's progress events as the server streams them.
import { app, el, clear, t, notice, streamPost, kbPath, table } from './core.js';

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
    upload([...e.dataTransfer.files]);
  });
  input.addEventListener('change', () => { upload([...input.files]); input.value = ''; });
  clear(root, el('section', { class: 'card' }, el('h2', {}, el('span', { i18n: 'nav.ingest' }), ' → ', el('b', { text: app.kb || '–' })), zone, input, el('div', { id: 'ingest-runs' })));
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
