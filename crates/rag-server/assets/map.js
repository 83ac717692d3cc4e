// Embedding map: the knowledge base's vectors projected to 2-D by the server
// (PCA), coloured by document, kind or language; a query is a star with lines to its
// nearest passages. SVG built with DOM calls; titles are text nodes.
import { app, api, el, clear, t, fmt, notice, kbPath, table } from './core.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 900;
const H = 560;
const PAD = 24;
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#ea580c', '#4f46e5', '#0d9488', '#b91c1c', '#a16207', '#9333ea', '#0369a1', '#be185d'];

let root;
let data = null;
let colourBy = 'group';

function svg(tag, attrs = {}, ...children) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  for (const c of children) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return n;
}

export function mount(node) {
  root = node;
  const q = el('input', { id: 'map-q', type: 'search', i18nPlaceholder: 'ask.placeholder', autocomplete: 'off', 'aria-label': 'query' });
  const form = el('form', { id: 'map-form', class: 'askbar' }, q, el('button', { id: 'map-run', type: 'submit', i18n: 'map.place' }));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); load(q.value.trim()); });
  const by = el('select', { id: 'map-colour', 'aria-label': 'colour' },
    el('option', { value: 'group', i18n: 'map.bydoc' }), el('option', { value: 'kind', i18n: 'map.bykind' }),
    el('option', { value: 'language', i18n: 'map.bylang' }));
  by.addEventListener('change', () => { colourBy = by.value; draw(); });
  clear(root, form,
    el('div', { class: 'row' }, el('span', { i18n: 'map.colour' }), by, el('span', { id: 'map-info', class: 'hint' })),
    el('div', { id: 'map-notes' }),
    el('div', { class: 'map-wrap' }, el('div', { id: 'map-canvas' }), el('div', { class: 'map-side' }, el('div', { id: 'map-hover', class: 'map-hover' }), el('div', { id: 'map-nearest' }), el('ul', { id: 'map-legend', class: 'legend' }))));
  app.listeners.add((what) => { if ((what === 'kb' || what === 'kbs') && !root.hidden) load(''); });
  load('');
}

export function shown() { load(document.getElementById('map-q').value.trim()); }

async function load(query) {
  if (!app.kb) return;
  root.dataset.state = 'loading';
  try {
    const qs = query ? `?query=${encodeURIComponent(query)}` : '';
    data = await api('GET', `${kbPath(app.kb)}/map${qs}`);
    draw();
    root.dataset.state = 'done';
  } catch (e) {
    root.dataset.state = 'error';
    clear(document.getElementById('map-notes'), notice('error', e.message));
  }
}

function draw() {
  if (!data) return;
  clear(document.getElementById('map-notes'), (data.notes || []).map((n) => notice('warning', n)));
  const how = data.method === 'umap' ? 'UMAP' : `PCA ${(100 * data.explained[0]).toFixed(1)}% + ${(100 * data.explained[1]).toFixed(1)}%`;
  clear(document.getElementById('map-info'), data.model_id ? `${data.model_id} · ${data.points.length} · ${how}` : '');
  const pts = data.points;
  const xs = pts.map((p) => p.x).concat(data.query ? [data.query.x] : []);
  const ys = pts.map((p) => p.y).concat(data.query ? [data.query.y] : []);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const sx = (x) => PAD + ((x - x0) / (x1 - x0 || 1)) * (W - 2 * PAD);
  const sy = (y) => H - PAD - ((y - y0) / (y1 - y0 || 1)) * (H - 2 * PAD);
  const key = (p) => (colourBy === 'kind' ? p.kind : colourBy === 'language' ? p.language : p.group);
  const groups = [...new Set(pts.map(key))].sort();
  const colour = (g) => PALETTE[groups.indexOf(g) % PALETTE.length];
  const hover = document.getElementById('map-hover');
  const canvas = svg('svg', { id: 'map-svg', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'embedding map' });
  const near = new Set(data.query ? data.query.nearest.map((n) => n.point) : []);
  pts.forEach((p, i) => {
    const c = svg('circle', { class: `pt${near.has(i) ? ' near' : ''}`, cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1), r: near.has(i) ? 6 : 4, fill: colour(key(p)), 'data-i': i, 'data-group': key(p) },
      svg('title', {}, `${p.title} — ${p.group}`));
    c.addEventListener('mouseenter', () => clear(hover, el('b', { text: p.title }), el('div', { class: 'hint', text: `${p.kind} · ${p.group}` })));
    canvas.append(c);
  });
  if (data.query) {
    const qx = sx(data.query.x);
    const qy = sy(data.query.y);
    for (const n of data.query.nearest) {
      const p = pts[n.point];
      canvas.insertBefore(svg('line', { class: 'nn', x1: qx, y1: qy, x2: sx(p.x), y2: sy(p.y), 'stroke-width': 1 + 2 * Math.max(0, n.cosine) }), canvas.firstChild);
    }
    const star = [];
    for (let k = 0; k < 10; k++) {
      const r = k % 2 ? 5 : 12;
      const a = (Math.PI / 5) * k - Math.PI / 2;
      star.push(`${(qx + r * Math.cos(a)).toFixed(1)},${(qy + r * Math.sin(a)).toFixed(1)}`);
    }
    canvas.append(svg('polygon', { id: 'map-star', points: star.join(' ') }, svg('title', {}, document.getElementById('map-q').value)));
    clear(document.getElementById('map-nearest'), table([
      { i18n: 'col.title', cell: (n) => pts[n.point].title },
      { label: 'cos', cell: (n) => fmt(n.cosine, 3) },
    ], data.query.nearest, { class: 'grid small' }));
  } else {
    clear(document.getElementById('map-nearest'));
  }
  clear(document.getElementById('map-canvas'), canvas);
  clear(document.getElementById('map-legend'), groups.slice(0, 40).map((g) => { const sw = el('span', { class: 'swatch' }); sw.style.backgroundColor = colour(g); return el('li', {}, sw, g); }));
  if (groups.length > 40) document.getElementById('map-legend').append(el('li', { text: `+${groups.length - 40}` }));
  if (!pts.length) document.getElementById('map-canvas').append(el('p', { class: 'hint', text: t('map.empty') }));
}
