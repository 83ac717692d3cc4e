// ragscope chat widget: one <script src=".../widget.js" data-kb="…" data-key="…"> tag
// gives a page a chat box with streaming answers and clickable [n] citations.
// Use a widget key (POST /api/v1/keys {"role":"widget","kb":"…"}): it is visible to every visitor and can only ask its one knowledge base. Standalone (no imports);
// everything shown is set as text, never parsed as HTML.
(() => {
  const me = document.currentScript;
  if (!me) return;
  const base = new URL(me.src, location.href).origin;
  const kb = me.dataset.kb || 'demo';
  const key = me.dataset.key || '';
  const zh = (me.dataset.lang || navigator.language || 'zh').toLowerCase().startsWith('zh');
  const T = zh
    ? { open: '在线客服', title: '有问题问我', placeholder: '请输入问题…', send: '发送', thinking: '正在查找…', sources: '来源', fail: '出错了：', none: '没有找到答案。' }
    : { open: 'Chat', title: 'Ask us anything', placeholder: 'Type a question…', send: 'Send', thinking: 'Looking it up…', sources: 'Sources', fail: 'Something went wrong: ', none: 'No answer found.' };

  const make = (tag, cls, text) => {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  };

  const host = make('div');
  host.id = 'ragscope-widget';
  document.body.append(host);
  const root = host.attachShadow({ mode: 'open' });
  const css = make('link');
  css.rel = 'stylesheet';
  css.href = `${base}/assets/widget.css`;
  const toggle = make('button', 'toggle', T.open);
  const panel = make('section', 'panel');
  panel.hidden = true;
  const log = make('div', 'log');
  const form = make('form', 'ask');
  const input = make('input');
  input.placeholder = T.placeholder;
  input.setAttribute('aria-label', T.placeholder);
  const send = make('button', 'send', T.send);
  send.type = 'submit';
  form.append(input, send);
  const card = make('div', 'card');
  card.hidden = true;
  panel.append(make('header', '', T.title), log, card, form);
  root.append(css, toggle, panel);
  toggle.addEventListener('click', () => { panel.hidden = !panel.hidden; if (!panel.hidden) input.focus(); });

  function showSource(src) {
    card.replaceChildren(make('div', 'card-title', `[${src.n}] ${src.passage.title}`), make('div', 'card-body', src.passage.body));
    card.hidden = false;
    card.dataset.n = String(src.n);
  }

  function render(node, text, sources) {
    const parts = [];
    const re = /\[(\d+)\]/g;
    let last = 0;
    let m;
    while ((m = re.exec(text))) {
      const src = sources.find((s) => s.n === Number(m[1]));
      if (!src) continue;
      parts.push(document.createTextNode(text.slice(last, m.index)));
      const b = make('button', 'cite', `[${src.n}]`);
      b.type = 'button';
      b.title = src.passage.title;
      b.addEventListener('click', () => showSource(src));
      parts.push(b);
      last = m.index + m[0].length;
    }
    parts.push(document.createTextNode(text.slice(last)));
    node.replaceChildren(...parts);
  }

  async function ask(question) {
    log.append(make('div', 'msg user', question));
    const bot = make('div', 'msg bot', T.thinking);
    bot.dataset.state = 'streaming';
    log.append(bot);
    log.scrollTop = log.scrollHeight;
    let text = '';
    let sources = [];
    const onEvent = (type, data) => {
      if (type === 'answer_token') { text += data.text || ''; render(bot, text, sources); }
      else if (type === 'context_assembled') sources = data.sources || [];
      else if (type === 'answered' && !text && data.text) { text = data.text; render(bot, text, sources); }
      else if (type === 'error') { text = T.fail + (data.message || data.code); bot.textContent = text; }
      log.scrollTop = log.scrollHeight;
    };
    try {
      const headers = { 'content-type': 'application/json' };
      if (key) headers.authorization = `Bearer ${key}`;
      const res = await fetch(`${base}/api/v1/kbs/${encodeURIComponent(kb)}/query`, { method: 'POST', headers, body: JSON.stringify({ query: question }) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true }).replace(/\r\n/g, '\n');
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let type = 'message';
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event:')) type = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
          }
          if (data.length) { try { onEvent(type, JSON.parse(data.join('\n'))); } catch { /* not JSON */ } }
        }
      }
      if (!text) {
        // No generator: offer the best sources as the answer.
        text = sources.length ? sources.slice(0, 3).map((s) => `[${s.n}] ${s.passage.title}`).join('\n') : T.none;
        render(bot, text, sources);
      }
    } catch (e) {
      bot.textContent = T.fail + e.message;
    }
    bot.dataset.state = 'done';
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = input.value.trim();
    if (!q) return;
    input.value = '';
    ask(q);
  });
})();
