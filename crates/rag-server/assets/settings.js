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
    kb.append(answerForm(row.settings));
    const text = el('textarea', { id: 'settings-json', rows: 24, spellcheck: 'false', 'aria-label': 'settings' });
    text.value = JSON.stringify(row.settings, null, 2);
    const out = el('div', { id: 'settings-result' });
    const form = el('form', { class: 'stack' }, el('h3', { i18n: 'set.advanced' }), el('p', { class: 'hint', i18n: 'set.hint' }), text,
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

// The settings people change most, as a form: answer profile (context
// budget), miss thresholds, prompt templates, λ and RRF k. Everything else
// is kept as it is; the server validates on save.
function answerForm(settings) {
  const a = settings.answer || {};
  const f = settings.retrieval.fusion || {};
  const num = (id, value, step, min, max) => el('input', { id, type: 'number', step, min, max, value: value ?? '' });
  const profile = el('select', { id: 'set-profile' }, ...['auto', 'faq', 'document'].map((p) => el('option', { value: p, i18n: `set.profile.${p}`, selected: a.profile === p })));
  const minFused = num('set-min-fused', a.min_fused, '0.01', 0, 1);
  const minCosine = num('set-min-cosine', a.min_cosine, '0.01', 0, 1);
  const lambda = num('set-lambda', f.lexical_interpolation, '0.05', 0, 1);
  const rrfK = num('set-rrf-k', f.k, '1', 1, 1000);
  const system = el('textarea', { id: 'set-prompt-system', rows: 5, placeholder: t('set.builtin') });
  system.value = a.prompt_system || '';
  const user = el('textarea', { id: 'set-prompt-user', rows: 4, placeholder: t('set.builtin') });
  user.value = a.prompt_user || '';
  const out = el('div', { id: 'answer-form-result' });
  const field = (label, input, hint) => el('label', { class: 'field' }, el('span', { i18n: label }), input, hint ? el('small', { class: 'hint', i18n: hint }) : null);
  const form = el('form', { id: 'answer-form', class: 'stack' },
    el('h3', { i18n: 'set.answering' }),
    field('set.profile', profile, 'set.profile.hint'),
    field('set.minfused', minFused, 'set.minfused.hint'),
    field('set.mincosine', minCosine, 'set.mincosine.hint'),
    field('set.lambda', lambda, 'set.lambda.hint'),
    field('set.rrfk', rrfK),
    field('set.promptsystem', system, 'set.prompt.hint'),
    field('set.promptuser', user),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'answer-save', i18n: 'corpus.save' })), out);
  const opt = (input) => (input.value.trim() === '' ? null : Number(input.value));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const next = structuredClone(settings);
    next.answer = { ...a, profile: profile.value, min_fused: opt(minFused), min_cosine: opt(minCosine),
      prompt_system: system.value.trim() || null, prompt_user: user.value.trim() || null };
    next.retrieval.fusion = { ...f, lexical_interpolation: opt(lambda), k: opt(rrfK) ?? f.k };
    try {
      const saved = await api('PUT', `${kbPath(app.kb)}/settings`, next);
      Object.assign(settings, saved.settings);
      out.dataset.saved = String(Date.now());
      clear(out, notice('info', t('set.saved')));
      const json = document.getElementById('settings-json');
      if (json) json.value = JSON.stringify(saved.settings, null, 2);
    } catch (e) { clear(out, notice('error', `${e.code || ''} ${e.message}`)); }
  });
  return form;
}
