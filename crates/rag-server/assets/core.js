// Shared helpers of the workbench: DOM building (text only, never HTML from
// data), translations, API calls with the session's CSRF token, SSE over
// fetch, and UTF-8 byte-range highlighting.

export const app = {
  session: null, // {mode, role, tenant, can_write, csrf_token}
  kb: null, // selected knowledge base name
  kbs: [],
  lang: localStorage.getItem('ragscope.lang') === 'en' ? 'en' : 'zh',
  listeners: new Set(),
};

// ---------------------------------------------------------------- i18n

const DICT = {
  'nav.ask': ['问答', 'Ask'],
  'nav.lab': ['检索实验室', 'Retrieval lab'],
  'nav.corpus': ['语料', 'Corpus'],
  'nav.ingest': ['导入', 'Ingest'],
  'nav.map': ['向量地图', 'Embedding map'],
  'nav.insights': ['洞察', 'Insights'],
  'nav.settings': ['设置', 'Settings'],
  'set.system': ['服务器', 'Server'],
  'set.embedder': ['嵌入模型', 'embedder'],
  'set.noembedder': ['未配置（向量路径不运行）', 'none (the dense path does not run)'],
  'set.test': ['测试连接', 'Test connection'],
  'set.llm': ['大模型', 'LLM'],
  'set.nollm': ['未配置（抽取式回答）', 'none (extractive answers)'],
  'set.reranker': ['重排序', 'reranker'],
  'set.noreranker': ['未配置（保持融合顺序）', 'none (the fused order is kept)'],
  'set.kb': ['知识库设置', 'Knowledge-base settings'],
  'set.hint': ['检索、融合与回答阈值（JSON）；保存时由服务器校验。', 'Retrieval, fusion and answer thresholds (JSON); the server validates them on save.'],
  'set.saved': ['已保存', 'saved'],
  'set.advanced': ['全部设置（JSON）', 'All settings (JSON)'],
  'set.answering': ['回答与检索', 'Answering and retrieval'],
  'set.profile': ['上下文预算', 'context budget'],
  'set.profile.auto': ['自动（FAQ 命中用短上下文）', 'auto (short when an FAQ entry leads)'],
  'set.profile.faq': ['FAQ：前 3 条，800 字以内', 'faq: top 3 within 800 characters'],
  'set.profile.document': ['文档：前 6 段，6000 字以内', 'document: top 6 within 6,000 characters'],
  'set.profile.hint': ['送给回答阶段的来源数量与长度。', 'How many sources, and how much of them, reach the answer.'],
  'set.minfused': ['未命中阈值（融合分数）', 'miss threshold (fused score)'],
  'set.minfused.hint': ['最高归一化融合分数低于它时，如实回答“知识库中没有”。留空则不检查。', 'Below this best normalised fused score the reply is an honest "not in the knowledge base". Empty: not checked.'],
  'set.mincosine': ['未命中阈值（余弦）', 'miss threshold (cosine)'],
  'set.mincosine.hint': ['向量路径运行时，最高余弦低于它即未命中。', 'When the dense path ran, a best cosine below this is a miss.'],
  'set.lambda': ['λ（词法 / 向量）', 'λ (lexical / vector)'],
  'set.lambda.hint': ['1 只用词法，0 只用向量；留空则按每个问题自动建议。', '1 lexical only, 0 vector only; empty: suggested per question.'],
  'set.rrfk': ['RRF k', 'RRF k'],
  'set.promptsystem': ['系统提示词模板', 'system prompt template'],
  'set.promptuser': ['用户提示词模板', 'user prompt template'],
  'set.prompt.hint': ['留空使用内置模板（要求用 [n] 引用、不编造）。', 'Empty uses the built-in template (cite with [n], never invent).'],
  'set.builtin': ['（内置模板）', '(built-in template)'],
  'ins.figures': ['概览', 'Overview'],
  'ins.queries': ['查询数', 'queries'],
  'ins.hitrate': ['命中率', 'hit rate'],
  'ins.misses': ['未命中', 'misses'],
  'ins.useful': ['有用 / 无用', 'useful / not useful'],
  'ins.never': ['从未被检索到的条目', 'never retrieved'],
  'ins.hist': ['最高融合分数分布', 'distribution of the top fused score'],
  'ins.cosinehist': ['最高余弦相似度分布', 'distribution of the top cosine'],
  'ins.threshold': ['未命中阈值', 'miss threshold'],
  'ins.overtime': ['每日命中与未命中', 'hits and misses per day'],
  'ins.top': ['高频问题', 'top questions'],
  'ins.count': ['次数', 'times'],
  'ins.days': ['天', 'days'],
  'ins.unreviewed': ['长期未复核的条目', 'entries not reviewed'],
  'ins.deadsyn': ['从未触发的同义词', 'synonyms that never fire'],
  'ins.missqueue': ['未命中队列', 'Miss queue'],
  'ins.nomiss': ['没有未命中的问题。', 'No missed questions.'],
  'ins.tofaq': ['转为 FAQ', 'Make an FAQ entry'],
  'ins.faqmade': ['已创建 FAQ', 'FAQ entry created'],
  'ins.log': ['查询日志', 'Query log'],
  'ins.open': ['在问答中打开', 'open in Ask'],
  'ins.replay': ['按当前设置重放', 'replay now'],
  'ins.was': ['当时排名', 'rank then'],
  'ins.now': ['现在排名', 'rank now'],
  'nav.eval': ['评测', 'Eval'],
  'eval.golden': ['黄金集', 'Golden set'],
  'eval.golden.hint': ['每行一个 JSON：{"question": "…", "expected": [条目 id、文档 id 或文档来源]}，与 ragscope tune 相同。可粘贴，或选择文件。', 'One JSON object a line: {"question": "…", "expected": [entry ids, document ids or document sources]}, as for ragscope tune. Paste it or choose a file.'],
  'eval.file': ['从文件加载：', 'Load from a file:'],
  'eval.line': ['第 {n} 行', 'line {n}'],
  'eval.badline': ['需要字符串 question 和字符串数组 expected', 'needs a string "question" and an array of strings "expected"'],
  'eval.questions': ['个问题', 'questions'],
  'eval.empty': ['黄金集中没有问题。', 'The golden set holds no question.'],
  'eval.settings': ['对比的两组设置', 'Two settings to compare'],
  'eval.settings.hint': ['A 默认是知识库当前的设置；修改 B 的融合权重、λ、路径或 top_k 后运行。λ 留空则沿用知识库的值（未设置时按问题自动建议）。', 'A starts as the knowledge base\'s current settings; change B\'s fusion weights, λ, paths or top_k, then run. An empty λ keeps the knowledge base\'s (suggested per question when it has none).'],
  'eval.side.a': ['设置 A', 'Setting A'],
  'eval.side.b': ['设置 B', 'Setting B'],
  'eval.paths': ['检索路径', 'paths'],
  'eval.topk': ['融合后保留 top_k', 'top_k after fusion'],
  'eval.rule': ['融合规则', 'fusion rule'],
  'eval.rerank': ['运行重排序', 'run the reranker'],
  'eval.run': ['运行评测', 'Run'],
  'eval.results': ['结果', 'Results'],
  'eval.metric': ['指标', 'metric'],
  'eval.diff': ['差值（B − A）', 'difference (B − A)'],
  'eval.perquery': ['逐个问题', 'Per question'],
  'eval.changed': ['个问题的排名不同', 'questions ranked differently'],
  'eval.expected': ['期望', 'expected'],
  'eval.andcg': ['A nDCG@10', 'A nDCG@10'],
  'eval.arank': ['A 首个期望的排名', 'A rank of first expected'],
  'eval.bndcg': ['B nDCG@10', 'B nDCG@10'],
  'eval.brank': ['B 首个期望的排名', 'B rank of first expected'],
  'eval.adopt.a': ['采用 A', 'Adopt A'],
  'eval.adopt.b': ['采用 B', 'Adopt B'],
  'eval.adopted.a': ['已将设置 A 保存到知识库', 'Setting A saved to the knowledge base'],
  'eval.adopted.b': ['已将设置 B 保存到知识库', 'Setting B saved to the knowledge base'],
  'map.place': ['放置查询', 'Place query'],
  'map.colour': ['着色：', 'Colour by:'],
  'map.bydoc': ['文档', 'document'],
  'map.bykind': ['类型', 'kind'],
  'map.bylang': ['语言', 'language'],
  'map.empty': ['没有向量可显示。', 'No vectors to show.'],
  'kb': ['知识库', 'Knowledge base'],
  'kb.none': ['（没有知识库）', '(no knowledge base)'],
  'lang.toggle': ['English', '中文'],
  'login.title': ['请输入 API 密钥', 'Enter an API key'],
  'login.hint': ['密钥只发送一次；之后浏览器使用会话 Cookie。', 'The key is sent once; the browser then uses a session cookie.'],
  'login.submit': ['登录', 'Log in'],
  'logout': ['退出', 'Log out'],
  'readonly': ['只读', 'read-only'],
  'ask.placeholder': ['输入问题，例如：营业时间是几点？', 'Ask a question, e.g. how do I pair the app?'],
  'ask.submit': ['提问', 'Ask'],
  'ask.timeline': ['流水线', 'Pipeline'],
  'ask.answer': ['回答', 'Answer'],
  'ask.sources': ['来源', 'Sources'],
  'ask.details': ['阶段详情', 'Stage details'],
  'ask.details.hint': ['点击流水线中的阶段查看详情。', 'Click a stage of the pipeline to see its details.'],
  'ask.noanswer': ['没有生成回答（未配置生成器）；以下是检索到的来源。', 'No answer was generated (no generator configured); the retrieved sources follow.'],
  'ask.demo.query': ['营业时间是几点？', 'How do I pair the app over Bluetooth?'],
  'ask.miss': ['知识库未命中：没有足够依据回答这个问题', 'Knowledge-base miss: nothing here supports an answer'],
  'ask.removed': ['已删除无效引用', 'citations removed as unsupported'],
  'ask.feedback': ['这个回答有用吗？', 'Was this answer useful?'],
  'ask.useful': ['有用', 'useful'],
  'ask.notuseful': ['没用', 'not useful'],
  'ins.feedback': ['反馈', 'feedback'],
  'ask.thanks': ['谢谢反馈', 'thanks for the feedback'],
  'mode.demo': ['演示', 'demo'],
  'mode.live': ['实时', 'live'],
  'running': ['运行中…', 'running…'],
  'raw': ['原始 JSON', 'raw JSON'],
  'warning': ['警告', 'warning'],
  'error': ['错误', 'error'],
  'passage': ['段落', 'Passage'],
  'passage.indoc': ['在文档中的位置', 'In its document'],
  'close': ['关闭', 'Close'],
  'col.rank': ['排名', 'rank'],
  'col.title': ['标题', 'title'],
  'col.score': ['分数', 'score'],
  'col.kind': ['类型', 'kind'],
  'col.matched': ['命中词', 'matched'],
  'col.path': ['路径', 'path'],
  'col.weight': ['权重', 'weight'],
  'col.rrf': ['RRF 贡献', 'RRF'],
  'col.pathscore': ['路径分数', 'path score'],
  'col.normalized': ['归一化', 'normalized'],
  'col.stage': ['阶段', 'stage'],
  'col.ms': ['毫秒', 'ms'],
  'col.token': ['词元', 'token'],
  'col.bytes': ['字节', 'bytes'],
  'col.reason': ['原因', 'reason'],
  'col.source': ['来源', 'source'],
  'col.chunks': ['分块', 'chunks'],
  'col.question': ['问题', 'question'],
  'col.answer': ['答案', 'answer'],
  'col.status': ['状态', 'status'],
  'col.edited': ['已编辑', 'edited'],
  'col.tags': ['标签', 'tags'],
  'col.actions': ['操作', 'actions'],
  'col.name': ['名称', 'name'],
  'col.created': ['创建时间', 'created'],
  'col.file': ['文件', 'file'],
  'lab.run': ['检索', 'Retrieve'],
  'lab.vector': ['仅向量', 'Vector only'],
  'lab.lexical': ['仅词法', 'Lexical only'],
  'lab.hybrid': ['混合 + 重排', 'Hybrid + rerank'],
  'lab.tokens': ['查询词元', 'Query tokens'],
  'lab.lambda': ['词法插值 λ', 'lexical interpolation λ'],
  'lab.lambda.auto': ['自动', 'auto'],
  'lab.k': ['RRF k', 'RRF k'],
  'lab.weights': ['路径权重', 'path weights'],
  'lab.emptylex': ['词法路径全部为空：没有任何词命中！', 'Every lexical path is empty: no term matched!'],
  'lab.dropped': ['被丢弃的候选', 'dropped candidates'],
  'lab.refused': ['已用新参数重新融合', 're-fused with the new settings'],
  'lab.nohits': ['没有结果', 'no hits'],
  'lab.rerankmove': ['重排移动', 'rerank move'],
  'lab.whynot': ['为什么没有它？', 'Why not this one?'],
  'lab.whynot.id': ['期望的条目 ID（faq:… 或 chunk:…）', 'expected entry id (faq:… or chunk:…)'],
  'lab.whynot.run': ['解释', 'Explain'],
  'lab.whynot.ask': ['为什么？', 'why?'],
  'lab.whynot.fused': ['融合排名', 'fused rank'],
  'lab.whynot.notfused': ['未进入融合结果', 'not in the fused list'],
  'lab.whynot.reranked': ['重排后排名', 'rank after rerank'],
  'lab.whynot.rerankdropped': ['被重排去掉', 'dropped by rerank'],
  'lab.whynot.context': ['上下文来源编号', 'context source'],
  'lab.whynot.notpacked': ['未放入上下文', 'not packed into the context'],
  'lab.whynot.needquery': ['先输入查询并检索', 'run a query first'],
  'why.returned': ['已返回', 'returned'],
  'why.cut_by_k': ['超出每路 k', 'cut by per-path k'],
  'why.filtered': ['被过滤', 'filtered out'],
  'why.no_match': ['不匹配', 'no match'],
  'why.below_threshold': ['超出容错阈值', 'beyond the typo threshold'],
  'why.not_scored': ['未评分', 'not scored'],
  'col.k': ['每路 k', 'per-path k'],
  'corpus.kbs': ['知识库', 'Knowledge bases'],
  'corpus.docs': ['文档', 'Documents'],
  'corpus.faqs': ['FAQ 条目', 'FAQ entries'],
  'corpus.lexicon': ['同义词与词典', 'Synonyms & dictionary'],
  'corpus.filter': ['筛选…', 'filter…'],
  'corpus.filterpage': ['筛选本页…', 'filter this page…'],
  'corpus.prev': ['上一页', 'previous'],
  'corpus.next': ['下一页', 'next'],
  'corpus.page': ['页', 'page'],
  'corpus.view': ['查看', 'view'],
  'corpus.delete': ['删除', 'delete'],
  'corpus.edit': ['编辑', 'edit'],
  'corpus.save': ['保存', 'save'],
  'corpus.cancel': ['取消', 'cancel'],
  'corpus.approve': ['批准', 'approve'],
  'corpus.disable': ['停用', 'disable'],
  'corpus.newfaq': ['新建 FAQ 条目', 'New FAQ entry'],
  'corpus.newkb': ['新建知识库', 'New knowledge base'],
  'corpus.create': ['创建', 'create'],
  'corpus.confirm.kb': ['删除知识库及其全部内容？请输入知识库名称确认：', 'Delete the knowledge base and everything in it? Type its name to confirm:'],
  'corpus.confirm.doc': ['删除这个文档及其分块？', 'Delete this document and its chunks?'],
  'corpus.confirm.faq': ['删除这个 FAQ 条目？', 'Delete this FAQ entry?'],
  'corpus.synonyms': ['同义词组', 'Synonym groups'],
  'corpus.words': ['用户词典', 'User dictionary'],
  'corpus.addsyn': ['添加同义词组（用逗号分隔）', 'Add a synonym group (comma-separated)'],
  'corpus.addword': ['添加词', 'Add a word'],
  'corpus.add': ['添加', 'add'],
  'corpus.all': ['全部状态', 'all statuses'],
  'corpus.chunkboundaries': ['分块边界', 'chunk boundaries'],
  'corpus.draft': ['生成 FAQ 草稿', 'draft FAQs'],
  'corpus.drafting': ['正在请 LLM 起草 FAQ…', 'The LLM is drafting FAQ entries…'],
  'corpus.drafted': ['条 FAQ 草稿已保存（在「FAQ 条目」中审核）', 'FAQ drafts stored (review them under FAQ entries)'],
  'corpus.draftreplaced': ['条未编辑的旧草稿被替换', 'earlier unedited drafts replaced'],
  'corpus.draftdropped': ['未采用的条目：', 'Entries left out:'],
  'ingest.drop': ['把文件或网页链接拖到这里（.md .txt .html .pdf .docx .jsonl .csv），或点击选择', 'Drop files or web links here (.md .txt .html .pdf .docx .jsonl .csv), or click to choose'],
  'ingest.summary': ['汇总', 'Summary'],
  'ingest.urls': ['网址来源', 'URL sources'],
  'ingest.urlhint': ['添加网页（可选：同站链接的深度），立即同步；再次同步只重建变化的页面。', 'Add a web page (optionally its same-site links to a depth) and sync it now; syncing again re-indexes only the pages that changed.'],
  'ingest.addurl': ['添加并同步', 'Add and sync'],
  'ingest.depth': ['链接深度', 'link depth'],
  'ingest.resync': ['重新同步', 'Sync again'],
  'ingest.remove': ['删除来源', 'Remove'],
  'ingest.confirmremove': ['删除这个来源及其页面的文档？', 'Remove this source and the documents of its pages?'],
  'ingest.lastsync': ['上次同步', 'last sync'],
  'ingest.nosources': ['还没有网址来源。', 'No URL sources yet.'],
  'col.url': ['网址', 'URL'],
  'col.pages': ['页面（已入库/总数）', 'pages (indexed / all)'],
  'col.outcome': ['结果', 'outcome'],
  'ok': ['确定', 'OK'],
  'yes': ['是', 'yes'],
  'no': ['否', 'no'],
};

export function t(key) {
  const e = DICT[key];
  if (!e) return key;
  return app.lang === 'en' ? e[1] : e[0];
}

export function setLang(lang) {
  app.lang = lang;
  localStorage.setItem('ragscope.lang', lang);
  document.documentElement.lang = lang === 'en' ? 'en' : 'zh-CN';
  for (const node of document.querySelectorAll('[data-i18n]')) node.textContent = t(node.dataset.i18n);
  for (const node of document.querySelectorAll('[data-i18n-placeholder]')) node.placeholder = t(node.dataset.i18nPlaceholder);
}

// ---------------------------------------------------------------- DOM

// el('div', {class: 'x', i18n: 'key', onclick: f, dataset: {a: 1}}, child, 'text', …)
// Strings become text nodes: data never passes through an HTML parser.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'text') node.textContent = String(v);
    else if (k === 'i18n') { node.dataset.i18n = v; node.textContent = t(v); }
    else if (k === 'i18nPlaceholder') { node.dataset.i18nPlaceholder = v; node.placeholder = t(v); }
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else if (k === 'value') node.value = v;
    else if (v === true) node.setAttribute(k, '');
    else node.setAttribute(k, String(v));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

export function fmt(x, digits = 3) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return x === null || x === undefined ? '–' : String(x);
  if (Number.isInteger(x)) return String(x);
  return x.toFixed(digits);
}

export function ms(x) {
  return typeof x === 'number' ? `${x < 10 ? x.toFixed(2) : x.toFixed(1)} ms` : '';
}

// A table: columns [{key|i18n, label?, cell(row) -> Node|string}].
export function table(columns, rows, opts = {}) {
  const head = el('tr', {}, columns.map((c) => el('th', c.i18n ? { i18n: c.i18n } : { text: c.label || '' })));
  const body = rows.map((r, i) => el('tr', opts.rowAttrs ? opts.rowAttrs(r, i) : {}, columns.map((c) => el('td', { class: c.class }, c.cell(r, i)))));
  return el('table', { class: opts.class || 'grid' }, el('thead', {}, head), el('tbody', {}, body));
}

export function jsonView(value) {
  return el('pre', { class: 'json', text: JSON.stringify(value, null, 2) });
}

export function rawDetails(value) {
  return el('details', { class: 'raw' }, el('summary', { i18n: 'raw' }), jsonView(value));
}

export function notice(kind, text) {
  return el('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status', text });
}

// ---------------------------------------------------------------- UTF-8 byte ranges

const enc = new TextEncoder();
const dec = new TextDecoder();

// Splits `text` at UTF-8 byte ranges: [{text, mark}] in order. Ranges are
// sorted, merged and clamped; an offset inside a character moves to the
// character's start so no character is ever cut.
export function byteSegments(text, ranges) {
  const bytes = enc.encode(text);
  const boundary = (b) => {
    let i = Math.max(0, Math.min(bytes.length, b));
    while (i > 0 && i < bytes.length && (bytes[i] & 0xc0) === 0x80) i--;
    return i;
  };
  const rs = (ranges || [])
    .map(([a, b]) => [boundary(a), boundary(b)])
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  const merged = [];
  for (const r of rs) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
    else merged.push([...r]);
  }
  const out = [];
  let pos = 0;
  for (const [a, b] of merged) {
    if (a > pos) out.push({ text: dec.decode(bytes.subarray(pos, a)), mark: false });
    out.push({ text: dec.decode(bytes.subarray(a, b)), mark: true });
    pos = b;
  }
  if (pos < bytes.length) out.push({ text: dec.decode(bytes.subarray(pos)), mark: false });
  return out;
}

// Text with <mark> elements around the byte ranges (all as text nodes).
export function highlighted(text, ranges, tag = 'span') {
  return el(tag, { class: 'hl' }, byteSegments(text, ranges).map((s) => (s.mark ? el('mark', { text: s.text }) : s.text)));
}

// A UTF-8 byte slice of a string.
export function byteSlice(text, start, end) {
  const bytes = enc.encode(text);
  return dec.decode(bytes.subarray(start, end));
}

export function utf8Length(text) {
  return enc.encode(text).length;
}

// ---------------------------------------------------------------- API

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

function headers(json) {
  const h = {};
  if (json) h['content-type'] = 'application/json';
  if (app.session && app.session.csrf_token) h['x-csrf-token'] = app.session.csrf_token;
  return h;
}

async function failure(res) {
  let body = {};
  try { body = await res.json(); } catch { /* not JSON */ }
  // A browser session that ended (expired, logged out elsewhere, key revoked): back to the login.
  if (res.status === 401 && app.session && app.session.mode === 'session' && app.onSessionLost) app.onSessionLost();
  return new ApiError(res.status, body.code, body.message);
}

export async function api(method, path, body) {
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers: headers(body !== undefined),
    body: body !== undefined ? JSON.stringify(body) : undefined,
    credentials: 'same-origin',
  });
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  const type = res.headers.get('content-type') || '';
  return type.includes('json') ? res.json() : res.text();
}

export const kbPath = (kb) => `/kbs/${encodeURIComponent(kb)}`;

// POSTs and calls onEvent(type, data) for each Server-Sent Event as it arrives.
// `body` is an object (sent as JSON) or FormData. Resolves when the stream ends.
export async function streamPost(path, body, onEvent, signal) {
  const isForm = body instanceof FormData;
  const res = await fetch(`/api/v1${path}`, {
    method: 'POST',
    headers: headers(!isForm),
    body: isForm ? body : JSON.stringify(body),
    credentials: 'same-origin',
    signal,
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    buf = buf.replace(/\r\n/g, '\n');
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      dispatch(block, onEvent);
    }
  }
  if (buf.trim()) dispatch(buf, onEvent);
}

function dispatch(block, onEvent) {
  let type = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue; // keep-alive comment
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return;
  let parsed;
  try { parsed = JSON.parse(data.join('\n')); } catch { parsed = data.join('\n'); }
  onEvent(type, parsed);
}

// ---------------------------------------------------------------- dialogs

// An in-page confirmation (never window.confirm). With `typed`, the user must
// type that text before OK is enabled.
export function confirmDialog(message, typed) {
  return new Promise((resolve) => {
    const input = typed ? el('input', { type: 'text', class: 'confirm-input', 'aria-label': message }) : null;
    const ok = el('button', { class: 'danger confirm-ok', i18n: 'ok', disabled: !!typed });
    const cancel = el('button', { class: 'confirm-cancel', i18n: 'corpus.cancel' });
    const dlg = el('dialog', { class: 'confirm' }, el('p', { text: message }), input, el('div', { class: 'row' }, ok, cancel));
    if (input) input.addEventListener('input', () => { ok.disabled = input.value !== typed; });
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    ok.addEventListener('click', () => done(true));
    cancel.addEventListener('click', () => done(false));
    dlg.addEventListener('cancel', () => done(false));
    document.body.append(dlg);
    dlg.showModal();
    (input || ok).focus();
  });
}

// A modal with arbitrary content; returns the dialog.
export function modal(title, ...content) {
  const close = el('button', { class: 'close', i18n: 'close' });
  const dlg = el('dialog', { class: 'modal' }, el('header', {}, el('h2', { text: title }), close), el('div', { class: 'modal-body' }, content));
  close.addEventListener('click', () => { dlg.close(); dlg.remove(); });
  dlg.addEventListener('close', () => dlg.remove());
  document.body.append(dlg);
  dlg.showModal();
  return dlg;
}

// Shows a passage with its highlights and, for a document chunk, the whole
// document with that chunk marked and scrolled into view.
export async function openPassage(kb, passage, label) {
  const body = el('div', { class: 'passage-view' },
    el('div', { class: 'meta' }, el('span', { class: `kind kind-${passage.kind}`, text: passage.kind }), passage.source ? el('span', { class: 'src', text: passage.source }) : null),
    el('h3', { class: 'passage-title', text: passage.title }),
    el('p', { class: 'passage-body' }, highlighted(passage.body, passage.highlights)));
  const dlg = modal(label || t('passage'), body);
  dlg.classList.add('passage-dialog');
  if (passage.kind !== 'chunk' || !passage.source) return dlg;
  try {
    const found = await api('GET', `${kbPath(kb)}/documents?source=${encodeURIComponent(passage.source)}&limit=1`);
    const doc = found.documents[0];
    if (!doc) return dlg;
    const full = await api('GET', `${kbPath(kb)}/documents/${doc.id}`);
    const view = documentView(full, passage.id.id);
    body.append(el('h4', { i18n: 'passage.indoc' }), view);
    const cited = view.querySelector('.chunk.cited');
    if (cited) cited.scrollIntoView({ block: 'center' });
  } catch (e) {
    body.append(notice('error', e.message));
  }
  return dlg;
}

// The document's text with chunk boundaries; `citedChunk` is marked.
export function documentView(full, citedChunk) {
  const text = full.document.text;
  const bytes = enc.encode(text);
  const parts = [];
  let pos = 0;
  const chunks = [...full.chunks].sort((a, b) => a.start - b.start);
  for (const c of chunks) {
    if (c.start > pos) parts.push(el('span', { class: 'gap', text: dec.decode(bytes.subarray(pos, c.start)) }));
    const start = Math.max(pos, c.start);
    parts.push(el('span', {
      class: `chunk${c.id === citedChunk ? ' cited' : ''}`,
      dataset: { chunk: c.id, ordinal: c.ordinal },
      title: `#${c.ordinal} · ${c.start}–${c.end}`,
    }, el('span', { class: 'chunk-label', text: `#${c.ordinal}` }), dec.decode(bytes.subarray(start, c.end))));
    pos = Math.max(pos, c.end);
  }
  if (pos < bytes.length) parts.push(el('span', { class: 'gap', text: dec.decode(bytes.subarray(pos)) }));
  return el('div', { class: 'document-text' }, parts);
}

// Passages by id key from the recall events of a run.
export const pid = (id) => `${id.kind}:${id.id}`;
