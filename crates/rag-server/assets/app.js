// Entry point: authentication, knowledge-base selection, language and page routing.
import { app, api, el, clear, setLang, t, notice } from './core.js';
import * as ask from './ask.js';
import * as lab from './lab.js';
import * as corpus from './corpus.js';
import * as ingest from './ingest.js';
import * as map from './map.js';
import * as insights from './insights.js';
import * as evalPage from './eval.js';
import * as settings from './settings.js';

const PAGES = { ask, lab, corpus, ingest, map, insights, eval: evalPage, settings };
const mounted = new Set();
app.refreshKbs = (select) => refreshKbs(select);
app.onSessionLost = () => { app.session = null; location.reload(); };

async function loadSession() {
  try {
    app.session = await api('GET', '/session');
    return true;
  } catch (e) {
    if (e.status === 401) return false;
    throw e;
  }
}

function showLogin() {
  document.getElementById('login').hidden = false;
  for (const p of document.querySelectorAll('.page')) p.hidden = true;
  const form = document.getElementById('login-form');
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    const key = document.getElementById('login-key').value;
    const err = document.getElementById('login-error');
    try {
      app.session = await api('POST', '/session', { key });
      document.getElementById('login-key').value = '';
      document.getElementById('login').hidden = true;
      await start();
    } catch (e) {
      clear(err, notice('error', e.message));
    }
  };
  document.body.dataset.ready = 'login';
}

async function refreshKbs(select) {
  app.kbs = await api('GET', '/kbs');
  const sel = document.getElementById('kb');
  const names = app.kbs.map((k) => k.name);
  if (select !== undefined) app.kb = select;
  if (!names.includes(app.kb)) app.kb = names.includes('demo') ? 'demo' : names[0] || null;
  clear(sel, app.kbs.length ? app.kbs.map((k) => el('option', { value: k.name, text: k.name })) : el('option', { value: '', i18n: 'kb.none' }));
  if (app.kb) sel.value = app.kb;
  for (const f of app.listeners) f('kbs');
}

function route() {
  const name = (location.hash || '#ask').slice(1).split('/')[0];
  const page = PAGES[name] ? name : 'ask';
  for (const [n] of Object.entries(PAGES)) {
    document.getElementById(`page-${n}`).hidden = n !== page;
    const link = document.querySelector(`#nav a[data-page="${n}"]`);
    if (n === page) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  const root = document.getElementById(`page-${page}`);
  if (!mounted.has(page)) {
    mounted.add(page);
    PAGES[page].mount(root);
  } else if (PAGES[page].shown) {
    PAGES[page].shown();
  }
  // The Ask page marks itself ready when its first pipeline completes; the others once mounted.
  if (page !== 'ask' && document.body.dataset.ready !== '1') {
    document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = '1';
  }
}

async function start() {
  const who = document.getElementById('who');
  const s = app.session;
  document.body.dataset.canWrite = s.can_write ? '1' : '0';
  document.body.dataset.mode = s.mode;
  clear(who, `${s.tenant} · ${s.role}`, s.can_write ? null : el('span', { class: 'badge ro', i18n: 'readonly' }));
  document.getElementById('logout').hidden = s.mode !== 'session';
  await refreshKbs();
  window.addEventListener('hashchange', route);
  route();
}

async function main() {
  setLang(app.lang);
  document.getElementById('lang').addEventListener('click', () => {
    setLang(app.lang === 'en' ? 'zh' : 'en');
    for (const f of app.listeners) f('lang');
  });
  document.getElementById('kb').addEventListener('change', (ev) => {
    app.kb = ev.target.value || null;
    for (const f of app.listeners) f('kb');
  });
  document.getElementById('logout').addEventListener('click', async () => {
    await api('DELETE', '/session');
    location.reload();
  });
  try {
    if (await loadSession()) await start();
    else showLogin();
  } catch (e) {
    document.getElementById('main').prepend(notice('error', e.message));
  }
}

main();
