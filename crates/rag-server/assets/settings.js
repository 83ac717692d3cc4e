// Settings: what the server runs with, real connection tests of the
// embedder, the LLM and the reranker, and the knowledge base's settings (retrieval, fusion, answer
// thresholds) edited as JSON and validated by the server.
import { app, api, el, clear, t, notice, kbPath, jsonView } from './core.js';

let root;

export function mount(node) {
  root = node;
  app.listeners.add((what) => { if ((what === 'kb' || what === 'kbs') && !root.hidden) render(); });
  render();
}

export function shown() { render(); }

async function render() {
  const sys = el('section', { id: 'settings-system', class: 'card' });
  const kb = el('section', { id: 'settings-kb', class: 'card' });
  clear(root, sys, kb);
  try {
    const info = await api('GET', '/system');
    // One real request per provider; admin only (it may cost money).
    const tester = (name, path) => {
      const result = el('div', { id: `${name}-test-result`, class: 'test-result' });
      const button = app.session.role === 'admin'
        ? el('button', { type: 'button', id: `test-${name}`, i18n: 'set.test', onclick: async () => {
          clear(result, el('span', { class: 'hint', i18n: 'running' }));
          try {
            const r = await api('POST', path);
            result.dataset.ok = String(r.ok);
            clear(result, notice(r.ok ? 'info' : 'error', `${r.ok ? '✓' : '✗'} ${r.detail} (${r.ms.toFixed(1)} ms)`));
          } catch (e) { clear(result, notice('error', e.message)); }
        } })
        : null;
      return el('dd', {}, button, result);
    };
    sys.append(el('h2', { i18n: 'set.system' }),
      el('dl', { class: 'kv' },
        el('dt', { text: 'version' }), el('dd', { text: info.version }),
        el('dt', { i18n: 'set.embedder' }), el('dd', { id: 'embedder-info', text: info.embedder ? `${info.embedder.model_id} · ${info.embedder.dimensions}d` : t('set.noembedder') }),
        el('dt', {}), tester('embedder', '/system/test-embedder'),
        el('dt', { i18n: 'set.llm' }), el('dd', { id: 'llm-info', text: info.llm || t('set.nollm') }),
        el('dt', {}), tester('llm', '/system/test-llm'),
        el('dt', { i18n: 'set.reranker' }), el('dd', { id: 'reranker-info', text: info.reranker === 'identity' ? t('set.noreranker') : info.reranker }),
        el('dt', {}), tester('reranker', '/system/test-reranker'),
        el('dt', { text: 'max_top_k' }), el('dd', { text: info.max_top_k }),
        el('dt', { text: 'max_upload_bytes' }), el('dd', { text: info.max_upload_bytes })));
  } catch (e) { sys.append(notice('error', e.message)); }
  if (!app.kb) return;
  try {
    const row = await api('GET', kbPath(app.kb));
    kb.append(el('h2', {}, el('span', { i18n: 'set.kb' }), ` · ${row.name}`));
    if (!app.session.can_write) { kb.append(jsonView(row.settings)); return; }
    const text = el('textarea', { id: 'settings-json', rows: 24, spellcheck: 'false', 'aria-label': 'settings' });
    text.value = JSON.stringify(row.settings, null, 2);
    const out = el('div', { id: 'settings-result' });
    const form = el('form', { class: 'stack' }, el('p', { class: 'hint', i18n: 'set.hint' }), text,
      el('div', { class: 'row' }, el('button', { type: 'submit', id: 'settings-save', i18n: 'corpus.save' })), out);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      let parsed;
      try { parsed = JSON.parse(text.value); } catch (e) { clear(out, notice('error', `JSON: ${e.message}`)); return; }
      try {
        const saved = await api('PUT', `${kbPath(app.kb)}/settings`, parsed);
        text.value = JSON.stringify(saved.settings, null, 2);
        out.dataset.saved = String(Date.now());
        clear(out, notice('info', t('set.saved')));
      } catch (e) { clear(out, notice('error', `${e.code || ''} ${e.message}`)); }
    });
    kb.append(form);
  } catch (e) { kb.append(notice('error', e.message)); }
}
