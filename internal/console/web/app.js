// Bolide console: a small single-page app over the console API (/console/api).
// No framework and no build step. Tables are rendered as one HTML string per
// table (one innerHTML write), every value escaped with esc(). Each page
// polls while the tab is visible; charts come from deltas between polls.
'use strict';

const POLL_MS = 3000;
const HISTORY = 120; // points kept per series (6 minutes at POLL_MS)

// ---------- small helpers ----------

const $ = (sel, root = document) => root.querySelector(sel);
const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** esc escapes any value for HTML text and attribute values. */
const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
const enc = encodeURIComponent;

const NF = new Intl.NumberFormat('en-US'); // one formatter: toLocaleString per cell is slow
function num(n) {
  if (n === null || n === undefined || n === '') return '–';
  return NF.format(Number(n));
}
const byName = (k) => (a, b) => (a[k] < b[k] ? -1 : a[k] > b[k] ? 1 : 0);

function bytes(n) {
  if (n === null || n === undefined) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + u[i];
}

function rateFmt(r) {
  if (r === null || r === undefined || !isFinite(r)) return '–';
  return r >= 100 ? r.toFixed(0) : r.toFixed(1);
}

/** when formats an RFC 3339 time as local "YYYY-MM-DD HH:MM:SS". */
function when(t) {
  if (!t) return '–';
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  const p = (x, n = 2) => String(x).padStart(n, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function ago(t) {
  if (!t) return '';
  const s = (Date.now() - new Date(t).getTime()) / 1000;
  if (!isFinite(s)) return '';
  if (s < 0) return 'in ' + dur(-s);
  return dur(s) + ' ago';
}

function dur(s) {
  if (s < 60) return s.toFixed(0) + 's';
  if (s < 3600) return (s / 60).toFixed(0) + 'm';
  if (s < 86400) return (s / 3600).toFixed(1) + 'h';
  return (s / 86400).toFixed(1) + 'd';
}

const PERMS = { 2: 'W', 4: 'R', 6: 'RW', 1: 'inherit' };
function perm(p) { return p === undefined || p === null ? '–' : esc(PERMS[p] || p); }

function yes(b) { return b ? '<span class="ok">yes</span>' : '<span class="bad">no</span>'; }

/** cell renders any JSON value for a generic table cell. */
function cell(v) {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'boolean') return yes(v);
  if (typeof v === 'number') return num(v);
  if (typeof v === 'object') return '<code>' + esc(JSON.stringify(v)) + '</code>';
  if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(v)) return esc(when(v));
  return esc(v);
}

/** table builds one table's HTML: cols are [title, fn(row) → HTML, class?]. */
function table(cols, rows, empty = 'Nothing to show.', attrs = '') {
  if (!rows || rows.length === 0) return `<p class="muted">${esc(empty)}</p>`;
  const head = cols.map((c) => `<th${c[2] ? ` class="${c[2]}"` : ''}>${esc(c[0])}</th>`).join('');
  const body = rows.map((r) => '<tr>' + cols.map((c) => `<td${c[2] ? ` class="${c[2]}"` : ''}>${c[1](r)}</td>`).join('') + '</tr>').join('');
  return `<div class="scroll"><table ${attrs}><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}

/** generic renders objects of unknown shape: one column per key. */
function generic(rows, empty) {
  rows = (rows || []).filter((r) => r && typeof r === 'object');
  const keys = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  return table(keys.map((k) => [k, (r) => cell(r[k]), typeof rows.find((x) => x[k] !== undefined)?.[k] === 'number' ? 'n' : '']), rows, empty);
}

/** kv renders one object as a two-column table. */
function kv(obj) {
  if (!obj) return '<p class="muted">–</p>';
  return '<table class="kv"><tbody>' + Object.entries(obj).map(([k, v]) => `<tr><th>${esc(k)}</th><td>${cell(v)}</td></tr>`).join('') + '</tbody></table>';
}

// ---------- performance marks (read by the browser tests) ----------

const marked = new Set();
/**
 * rendered records, once per page load, when a table was first rendered:
 * after the frame that lays it out and paints it (a task queued from the
 * next animation frame runs once that frame is done).
 */
function rendered(name) {
  if (marked.has(name)) return;
  marked.add(name);
  requestAnimationFrame(() => setTimeout(() => performance.mark(`bolide:${name}-table`), 0));
}

// ---------- history for live charts ----------

const series = new Map(); // key → [[t, v]...]

function sample(key, v, t = Date.now()) {
  let s = series.get(key);
  if (!s) { s = []; series.set(key, s); }
  const last = s[s.length - 1];
  if (last && last[0] === t) return s;
  s.push([t, v]);
  if (s.length > HISTORY + 1) s.shift();
  return s;
}

/** counterRate records a counter value and returns its per-second rates. */
function counterRate(key, v) {
  if (v === null || v === undefined) return [];
  const s = sample(key, Number(v));
  const out = [];
  for (let i = 1; i < s.length; i++) {
    const dt = (s[i][0] - s[i - 1][0]) / 1000;
    out.push(dt > 0 ? Math.max(0, s[i][1] - s[i - 1][1]) / dt : 0);
  }
  return out;
}

/** spark draws values as an inline SVG line; big adds axis labels. */
function spark(values, w = 100, h = 22, big = false) {
  if (!values || values.length < 2) return `<svg class="spark" width="${w}" height="${h}" aria-hidden="true"></svg>`;
  const max = Math.max(...values, 1e-9);
  const min = big ? 0 : Math.min(0, ...values);
  const pad = 2;
  const pts = values.map((v, i) => {
    const x = pad + (i * (w - 2 * pad)) / (values.length - 1);
    const y = h - pad - ((v - min) * (h - 2 * pad)) / (max - min || 1);
    return x.toFixed(1) + ',' + y.toFixed(1);
  }).join(' ');
  const labels = big ? `<text x="4" y="12">${esc(num(Math.round(max)))}</text><text x="4" y="${h - 4}">0</text>` : '';
  return `<svg class="spark${big ? ' big' : ''}" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img"><polyline points="${pts}"/>${labels}</svg>`;
}

// ---------- API ----------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const HEADERS = { 'X-Bolide-Console': '1', Accept: 'application/json' };
// The API's base without the user:password@ a bookmarked address may carry:
// fetch refuses a URL with credentials, and the browser sends the cached
// Basic credentials to the same origin anyway.
const API = location.origin + location.pathname.replace(/[^/]*$/, '') + 'api';

async function apiError(r) {
  let code = 'HTTP_' + r.status;
  let msg = r.statusText || 'request failed';
  const text = await r.text();
  try {
    const j = JSON.parse(text);
    if (j && j.error) { code = j.error.code || code; msg = j.error.message || msg; }
  } catch (_) {
    // Not JSON (a proxy's page, say): its text without markup.
    if (text) msg = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 300);
  }
  return new ApiError(r.status, code, msg);
}

async function request(method, path, body, accept) {
  const opts = { method, headers: { ...HEADERS }, credentials: 'same-origin' };
  if (accept) opts.headers.Accept = accept;
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(API + path, opts);
  } catch (e) {
    throw new ApiError(0, 'UNREACHABLE', `the console API did not answer (${method} ${path}): ${e.message}`);
  }
  if (!r.ok) throw await apiError(r);
  return r;
}

async function api(method, path, body) {
  const r = await request(method, path, body);
  return r.json();
}
const get = (path) => api('GET', path);

/** ndjson POSTs and calls onLine for each line of the NDJSON answer. */
async function ndjson(path, body, onLine) {
  const r = await request('POST', path, body, 'application/x-ndjson');
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const flush = (line) => {
    line = line.trim();
    if (!line) return;
    const v = JSON.parse(line);
    if (v && v.error) throw new ApiError(r.status, v.error.code || 'SYSTEM_ERROR', v.error.message || 'stream failed');
    onLine(v);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      flush(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
  flush(buf + dec.decode());
}

// ---------- banner, confirm ----------

const errors = new Map(); // "code message" → {code, message, count}

function showError(e) {
  const code = e instanceof ApiError ? e.code : (e && e.name) || 'ERROR';
  const message = (e && e.message) || String(e);
  const key = code + ' ' + message;
  const have = errors.get(key);
  if (have) have.count++;
  else errors.set(key, { code, message, count: 1 });
  drawBanner();
}

function drawBanner() {
  const b = $('#banner');
  if (errors.size === 0) { b.hidden = true; b.innerHTML = ''; return; }
  b.hidden = false;
  b.innerHTML = [...errors.entries()].map(([k, e]) =>
    `<div class="err"><b class="code">${esc(e.code)}</b> <span class="msg">${esc(e.message)}</span>` +
    `${e.count > 1 ? ` <span class="muted">×${e.count}</span>` : ''}` +
    ` <button type="button" class="link" data-dismiss="${esc(k)}">dismiss</button></div>`).join('');
}

function confirmAction(text) {
  const d = $('#confirm');
  $('#confirm-text').textContent = text;
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

/** run performs an action, shows its error in the banner, returns its result. */
async function run(fn) {
  try {
    return await fn();
  } catch (e) {
    showError(e);
    return undefined;
  }
}

function flash(el, html) {
  if (el) el.innerHTML = html;
}

// ---------- router and polling ----------

let page = null; // {gen, refresh, timer, actions}
let gen = 0;

const routes = [
  [/^\/cluster$/, 'cluster', pageCluster],
  [/^\/topics$/, 'topics', pageTopics],
  [/^\/topics\/(.+)$/, 'topics', pageTopic],
  [/^\/groups$/, 'groups', pageGroups],
  [/^\/groups\/(.+)$/, 'groups', pageGroup],
  [/^\/messages$/, 'messages', pageMessages],
  [/^\/messages\/(.+)$/, 'messages', pageMessage],
  [/^\/dlq$/, 'dlq', pageDLQ],
  [/^\/dlq\/(.+)$/, 'dlq', pageDLQGroup],
  [/^\/delay$/, 'delay', pageDelay],
];

function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/cluster';
  const q = h.indexOf('?');
  return { path: q < 0 ? h : h.slice(0, q), query: new URLSearchParams(q < 0 ? '' : h.slice(q + 1)) };
}

function route() {
  if (page && page.timer) clearTimeout(page.timer);
  const { path, query } = parseHash();
  const found = routes.find((r) => r[0].test(path));
  if (!found) { location.hash = '#/cluster'; return; }
  const m = path.match(found[0]);
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('on', a.dataset.sec === found[1]);
  const main = $('#main');
  main.innerHTML = '';
  const my = ++gen;
  page = { gen: my, refresh: null, timer: 0, actions: {}, busy: false };
  const arg = m[1] !== undefined ? decodeURIComponent(m[1]) : undefined;
  found[2](main, page, arg, query);
  if (page.refresh) poll(page);
}

async function poll(p) {
  if (p.gen !== gen || p.busy) return;
  p.busy = true;
  try {
    await p.refresh();
  } catch (e) {
    showError(e);
  } finally {
    p.busy = false;
  }
  if (p.gen === gen && p.every !== 0) {
    clearTimeout(p.timer);
    p.timer = setTimeout(() => { if (document.visibilityState === 'visible') poll(p); }, POLL_MS);
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && page && page.refresh && !page.busy) poll(page);
});

// One delegated handler for every button with data-act on the page.
document.addEventListener('click', (ev) => {
  const dis = ev.target.closest('[data-dismiss]');
  if (dis) { errors.delete(dis.dataset.dismiss); drawBanner(); return; }
  const el = ev.target.closest('[data-act]');
  if (!el || !page) return;
  const fn = page.actions[el.dataset.act];
  if (!fn) return;
  ev.preventDefault();
  run(() => fn(el.dataset, el));
});

// Forms with data-form submit through page.actions too.
document.addEventListener('submit', (ev) => {
  const f = ev.target;
  if (!f.dataset || !f.dataset.form || !page) return;
  ev.preventDefault();
  const fn = page.actions[f.dataset.form];
  if (fn) run(() => fn(Object.fromEntries(new FormData(f)), f, ev.submitter));
});

function refreshSoon(p) {
  if (p.gen === gen && !p.busy) poll(p);
}

// ---------- header ----------

async function whoami() {
  const w = await get('/whoami');
  document.title = `Bolide console — ${w.name || w.addr || w.daemon}`;
  $('#who').innerHTML = `${esc(w.daemon)} <b>${esc(w.name || w.addr)}</b> ${esc(w.version || '')}` +
    (w.acl ? ` · user <b>${esc(w.user || '?')}</b>` : '');
  return w;
}

// ---------- Cluster ----------

function pageCluster(main, p) {
  main.innerHTML = `<h1>Cluster</h1>
  <section><h2>NameServers</h2><div id="ns"></div></section>
  <section><h2>Brokers</h2><div id="brokers"></div></section>
  <section id="ctl-sec" hidden><h2>Controller</h2><div id="ctl"></div></section>
  <section id="cfg-sec" hidden><h2>Configuration of <span id="cfg-name"></span></h2>
    <form data-form="saveConfig"><div id="cfg"></div>
    <p><label><input type="checkbox" id="cfg-all" checked> on every member of the group</label>
    <button type="submit">Save changed runtime keys</button> <button type="button" data-act="closeConfig">Close</button> <span id="cfg-msg"></span></p></form>
  </section>`;
  let cfg = null; // {name, addr, entries}
  p.refresh = async () => {
    const c = await get('/cluster');
    $('#ns').innerHTML = table([['address', (a) => esc(a)]], (c.nameservers || []).map((a) => a), 'No NameServer.', 'id="ns-table"');
    const brokers = c.brokers || [];
    const masters = new Map(brokers.filter((b) => Number(b.brokerId) === 0).map((b) => [b.brokerName, b]));
    const rows = brokers.map((b) => {
      const rt = b.runtime || {};
      const key = b.brokerName + '/' + b.brokerId + '/';
      return { b, rt, put: counterRate(key + 'put', rt.putMessagesTotal), pull: counterRate(key + 'get', rt.getMessagesTotal) };
    });
    const lag = (b) => {
      const rep = b.replication;
      if (rep) {
        const ins = Number(b.brokerId) === 0 ? ` · ${num(rep.inSyncSlaves)} of ${num((rep.slaves || []).length)} in sync` : '';
        return `${bytes(rep.lagBytes)} <span class="muted">${esc(rep.mode || '')}${ins}</span>`;
      }
      const m = masters.get(b.brokerName);
      const s = m && m.replication && (m.replication.slaves || []).find((x) => Number(x.brokerId) === Number(b.brokerId));
      return s ? `${bytes(s.lagBytes)} ${s.inSync ? '<span class="ok">in sync</span>' : '<span class="bad">behind</span>'}` : '–';
    };
    const rate = (vals, tps) => `${rateFmt(vals.length ? vals[vals.length - 1] : tps)}/s<br>${spark(vals, 90, 20)}`;
    $('#brokers').innerHTML = table([
      ['group', (r) => `<b>${esc(r.b.brokerName)}</b><br><span class="muted">${esc(r.b.cluster)}</span>`],
      ['id', (r) => esc(r.b.brokerId), 'n'],
      ['address', (r) => esc(r.b.addr) + (r.b.adminAddr ? `<br><span class="muted">admin ${esc(r.b.adminAddr)}</span>` : '')],
      ['role', (r) => esc(r.b.role || (Number(r.b.brokerId) === 0 ? 'MASTER' : 'SLAVE')) + `<br><span class="muted">epoch ${num(r.b.epoch)}</span>`],
      ['alive', (r) => yes(r.b.alive) + `<br><span class="muted">${esc(r.b.version)}</span>` + (r.b.error ? `<br><span class="bad">${esc(r.b.error)}</span>` : '')],
      ['disk', (r) => r.rt.diskUsedRatio === undefined ? '–' : `<meter min="0" max="1" low="0.75" high="0.9" optimum="0" value="${esc(r.rt.diskUsedRatio)}"></meter> ${(100 * r.rt.diskUsedRatio).toFixed(0)}%<br><span class="muted">${bytes(r.rt.diskFreeBytes)} free of ${bytes(r.rt.diskTotalBytes)}</span>`],
      ['store', (r) => bytes(r.rt.storeBytes), 'n'],
      ['replication lag', lag],
      ['send', (r) => rate(r.put, r.rt.putTps), 'n'],
      ['pull', (r) => rate(r.pull, r.rt.getTps), 'n'],
      ['connections', (r) => r.b.runtime ? `${num(r.rt.producerConnections)} producers<br>${num(r.rt.consumerConnections)} consumers` : '–'],
      ['write', (r) => Number(r.b.brokerId) !== 0 ? '–' : (r.b.writable
        ? `<span class="ok">writable</span><br><button type="button" class="danger" data-act="writePerm" data-broker="${esc(r.b.brokerName)}" data-w="0">take away</button>`
        : `<span class="bad">read-only</span><br><button type="button" data-act="writePerm" data-broker="${esc(r.b.brokerName)}" data-w="1">give back</button>`)],
      ['', (r) => `<button type="button" data-act="config" data-broker="${esc(r.b.brokerName)}" data-addr="${esc(r.b.addr)}">config</button>`],
    ], rows, 'No broker is registered.', 'id="brokers-table"');
    $('#ctl-sec').hidden = !c.controller;
    if (c.controller) $('#ctl').innerHTML = kv(c.controller);
    rendered('cluster');
  };
  p.actions.writePerm = async (d) => {
    const w = d.w === '1';
    const ok = await confirmAction(w ? `Give write permission back to broker group ${d.broker}?`
      : `Take write permission away from broker group ${d.broker}? Producers stop sending to it; consumers go on reading.`);
    if (!ok) return;
    await api('POST', `/brokers/${enc(d.broker)}/write-perm`, { writable: w });
    refreshSoon(p);
  };
  const drawConfig = () => {
    $('#cfg-sec').hidden = !cfg;
    if (!cfg) return;
    $('#cfg-name').textContent = `${cfg.name} (${cfg.addr})`;
    $('#cfg').innerHTML = table([
      ['key', (e) => `<code>${esc(e.key)}</code>`],
      ['value', (e) => e.runtime ? `<input name="${esc(e.key)}" value="${esc(e.value)}" data-was="${esc(e.value)}">` : esc(e.value)],
      ['default', (e) => esc(e.default)],
      ['runtime', (e) => yes(e.runtime)],
      ['description', (e) => esc(e.description), 'wrap'],
    ], cfg.entries, 'No configuration.', 'id="cfg-table"');
  };
  p.actions.config = async (d) => {
    const r = await get(`/brokers/${enc(d.broker)}/config?addr=${enc(d.addr)}`);
    cfg = { name: d.broker, addr: d.addr, entries: r.entries || [] };
    $('#cfg-msg').textContent = '';
    drawConfig();
    $('#cfg-sec').scrollIntoView();
  };
  p.actions.closeConfig = async () => { cfg = null; drawConfig(); };
  p.actions.saveConfig = async (_values, form) => {
    const changed = {};
    for (const i of form.querySelectorAll('input[data-was]')) if (i.value !== i.dataset.was) changed[i.name] = i.value;
    if (Object.keys(changed).length === 0) { $('#cfg-msg').textContent = 'Nothing changed.'; return; }
    if (!await confirmAction(`Change ${Object.keys(changed).join(', ')} on ${cfg.name}?`)) return;
    const r = await api('PUT', `/brokers/${enc(cfg.name)}/config` + ($('#cfg-all').checked ? '' : `?addr=${enc(cfg.addr)}`), changed);
    const again = await get(`/brokers/${enc(cfg.name)}/config?addr=${enc(cfg.addr)}`);
    cfg.entries = again.entries || [];
    drawConfig();
    $('#cfg-msg').textContent = 'Changed: ' + (r.entries || []).map((e) => `${e.key}=${e.value}`).join(', ') + ' on ' + (r.addrs || []).join(', ');
  };
}

// ---------- Topics ----------

const MESSAGE_TYPES = ['', 'NORMAL', 'FIFO', 'DELAY', 'TRANSACTION', 'MIXED'];

function topicForm(id, title, mode, t = {}) {
  const sel = MESSAGE_TYPES.map((m) => `<option value="${m}"${(t.messageType || '').toUpperCase() === m ? ' selected' : ''}>${m || '(any)'}</option>`).join('');
  return `<form data-form="${mode}" id="${id}" class="inline"><h3>${esc(title)}</h3>
    <label>topic <input name="topic" required pattern="[A-Za-z0-9_%\\|\\-]{1,127}" value="${esc(t.topic || '')}"${t.topic && mode === 'updateTopic' ? ' readonly' : ''}></label>
    <label>queues <input name="queues" type="number" min="1" max="1024" value="${esc(t.queues || 8)}"></label>
    <label>perm <select name="perm">${[[6, 'read-write'], [4, 'read'], [2, 'write']].map(([v, n]) => `<option value="${v}"${Number(t.perm ?? 6) === v ? ' selected' : ''}>${n}</option>`).join('')}</select></label>
    <label>message type <select name="messageType">${sel}</select></label>
    <label>cluster <input name="cluster" placeholder="all" value="${esc(t.cluster || '')}"></label>
    <button type="submit">${mode === 'createTopic' ? 'Create' : 'Update'}</button> <span class="msg"></span></form>`;
}

function topicBody(v) {
  const b = { topic: v.topic.trim(), queues: Number(v.queues) || 8, perm: Number(v.perm) || 6 };
  if (v.messageType) b.messageType = v.messageType;
  if (v.cluster) b.cluster = v.cluster.trim();
  return b;
}

function topicActions(p) {
  p.actions.createTopic = async (v, f) => {
    const r = await api('POST', '/topics', topicBody(v));
    flash($('.msg', f), `<span class="ok">Created ${esc(r.topic || v.topic)}.</span> <a href="#/topics/${esc(enc(v.topic))}">open</a>`);
    refreshSoon(p);
  };
  p.actions.updateTopic = async (v, f) => {
    const b = topicBody(v);
    delete b.topic;
    await api('PUT', '/topics/' + enc(v.topic.trim()), b);
    flash($('.msg', f), `<span class="ok">Updated ${esc(v.topic)}.</span>`);
    refreshSoon(p);
  };
}

function pageTopics(main, p, _arg, query) {
  main.innerHTML = `<h1>Topics</h1>
  <div class="toolbar"><input id="filter" type="search" placeholder="filter topics" value="${esc(query.get('q') || '')}">
  <label><input id="all" type="checkbox"${query.get('all') === '1' ? ' checked' : ''}> show system topics</label> <span id="count" class="muted"></span></div>
  <div id="topics"></div>
  <section class="forms">${topicForm('create-topic', 'Create a topic', 'createTopic')}${topicForm('update-topic', 'Update a topic', 'updateTopic')}</section>`;
  let topics = [];
  let rates = new Map();
  const draw = () => {
    const f = $('#filter').value.trim().toLowerCase();
    const rows = f ? topics.filter((t) => t.topic.toLowerCase().includes(f)) : topics;
    $('#count').textContent = `${rows.length} of ${topics.length}`;
    $('#topics').innerHTML = table([
      ['topic', (t) => `<a href="#/topics/${esc(enc(t.topic))}">${esc(t.topic)}</a>`],
      ['kind', (t) => esc(t.kind)],
      ['message type', (t) => esc(t.messageType || '')],
      ['perm', (t) => perm(t.perm)],
      ['queues r/w', (t) => `${num(t.readQueues)}/${num(t.writeQueues)}`, 'n'],
      ['queues per broker', (t) => esc((t.brokers || []).map((b) => `${b.broker} ${b.readQueues}/${b.writeQueues}`).join(', '))],
      ['messages', (t) => num(t.messages), 'n'],
      ['msg/s', (t) => rateFmt(rates.get(t.topic)), 'n'],
      ['last stored', (t) => esc(when(t.lastStoreTime))],
    ], rows, topics.length ? 'No topic matches the filter.' : 'No topic.', 'id="topics-table"');
    rendered('topics');
  };
  p.refresh = async () => {
    const r = await get('/topics' + ($('#all').checked ? '?all=1' : ''));
    topics = (r.topics || []).sort(byName('topic'));
    rates = new Map();
    for (const t of topics) {
      const rs = counterRate('topic/' + t.topic, t.maxOffsetSum);
      if (rs.length) rates.set(t.topic, rs[rs.length - 1]);
    }
    draw();
  };
  $('#filter').addEventListener('input', draw);
  $('#all').addEventListener('change', () => refreshSoon(p));
  topicActions(p);
}

function pageTopic(main, p, topic) {
  main.innerHTML = `<h1>Topic <span class="mono">${esc(topic)}</span></h1><p><a href="#/topics">← topics</a> · <a href="#/messages?topic=${esc(enc(topic))}">search messages</a></p>
  <section><h2>Configuration per broker</h2><div id="configs"></div></section>
  <section><h2>Queues</h2><div id="queues"></div></section>
  <section><h2>Route</h2><div id="route"></div></section>
  <section class="forms" id="upd"></section>`;
  let formDone = false;
  p.refresh = async () => {
    const t = await get('/topics/' + enc(topic));
    $('#configs').innerHTML = generic(t.configs, 'No configuration.');
    const qs = t.queues || [];
    $('#queues').innerHTML = table([
      ['broker', (q) => esc(q.broker)],
      ['queue', (q) => num(q.queueId), 'n'],
      ['min offset', (q) => num(q.minOffset), 'n'],
      ['max offset', (q) => num(q.maxOffset), 'n'],
      ['messages', (q) => num(q.maxOffset - q.minOffset), 'n'],
      ['msg/s', (q) => { const r = counterRate(`q/${topic}/${q.broker}/${q.queueId}`, q.maxOffset); return rateFmt(r[r.length - 1]); }, 'n'],
      ['last stored', (q) => esc(when(q.lastStoreTime))],
    ], qs, 'No queue.', 'id="queues-table"');
    $('#route').innerHTML = t.route ? table([
      ['broker', (b) => esc(b.broker)], ['cluster', (b) => esc(b.cluster)],
      ['members', (b) => esc(Object.entries(b.addrs || {}).map(([id, a]) => `${id}: ${a}`).join(', '))],
    ], t.route.brokers || [], 'Not routed.') : '<p class="muted">–</p>';
    if (!formDone) {
      formDone = true;
      const c = (t.configs || [])[0] || {};
      $('#upd').innerHTML = topicForm('update-topic', 'Update', 'updateTopic', {
        topic, queues: c.writeQueues || c.queues, perm: c.perm, messageType: c.messageType,
      });
    }
    rendered('topic');
  };
  topicActions(p);
}

// ---------- Consumer groups ----------

function pageGroups(main, p) {
  main.innerHTML = `<h1>Consumer groups</h1>
  <div class="toolbar"><input id="filter" type="search" placeholder="filter groups"> <span id="count" class="muted"></span></div>
  <div id="groups"></div>`;
  let groups = [];
  const draw = () => {
    const f = $('#filter').value.trim().toLowerCase();
    const rows = f ? groups.filter((g) => g.group.toLowerCase().includes(f)) : groups;
    $('#count').textContent = `${rows.length} of ${groups.length}`;
    $('#groups').innerHTML = table([
      ['group', (g) => `<a href="#/groups/${esc(enc(g.group))}">${esc(g.group)}</a>`],
      ['model', (g) => esc(g.model || '')],
      ['orderly', (g) => g.orderly ? 'yes' : ''],
      ['clients', (g) => num(g.clients), 'n'],
      ['subscriptions', (g) => esc(Object.entries(g.subscriptions || {}).map(([t, e]) => `${t}: ${e}`).join('; ')), 'wrap'],
      ['lag', (g) => num(g.totalLag), 'n'],
      ['declared', (g) => g.declared ? esc([g.declared.fifo ? 'fifo' : '', g.declared.maxDeliveryAttempts ? `at most ${g.declared.maxDeliveryAttempts} deliveries` : '',
        g.declared.consumeEnable === false ? 'disabled' : ''].filter(Boolean).join(', ') || 'yes') : ''],
      ['', (g) => g.error ? `<span class="bad">${esc(g.error)}</span>` : ''],
    ], rows, groups.length ? 'No group matches the filter.' : 'No consumer group.', 'id="groups-table"');
    rendered('groups');
  };
  p.refresh = async () => {
    const r = await get('/groups');
    groups = (r.groups || []).sort(byName('group'));
    for (const g of groups) if (g.totalLag !== null && g.totalLag !== undefined) sample('lag/' + g.group, g.totalLag);
    draw();
  };
  $('#filter').addEventListener('input', draw);
}

function conns(list) {
  return table([
    ['client', (c) => esc(c.clientId)],
    ['address', (c) => esc(c.remoteAddr)],
    ['language', (c) => esc(c.language) + ' ' + esc(c.version)],
    ['protocol', (c) => esc(c.protocol)],
    ['broker', (c) => esc(c.broker)],
    ['type', (c) => esc([c.consumeType, c.messageModel].filter(Boolean).join(' '))],
    ['subscriptions', (c) => esc(Object.entries(c.subscriptions || {}).map(([t, e]) => `${t}: ${e}`).join('; ')), 'wrap'],
    ['connected', (c) => esc(when(c.connectedSince))],
    ['last heartbeat', (c) => esc(ago(c.lastHeartbeat))],
  ], list, 'None connected.');
}

function pageGroup(main, p, group) {
  main.innerHTML = `<h1>Consumer group <span class="mono">${esc(group)}</span></h1><p><a href="#/groups">← groups</a> · <a href="#/dlq/${esc(enc(group))}">dead letters</a></p>
  <p id="group-error" class="bad" hidden></p>
  <section><h2>Lag <span id="lag" class="big-num"></span></h2><div id="lag-chart"></div><p id="online" class="muted"></p></section>
  <section><h2>Lag per queue</h2><div id="queues"></div></section>
  <section><h2>Consumers</h2><div id="consumers"></div><h2>Producers</h2><div id="producers"></div></section>
  <section><h2>Subscription group settings</h2><div id="declared"></div>
  <form data-form="declare" class="inline" id="declare-form">
    <label><input type="checkbox" name="fifo"> FIFO</label>
    <label>max delivery attempts <input type="number" name="maxDeliveryAttempts" min="0" value="16"></label>
    <label>retry backoff <input name="retryBackoff" placeholder="1s, 5s, 30s"></label>
    <label><input type="checkbox" name="consumeEnable" checked> consume enabled</label>
    <button type="submit">Save settings</button> <span class="msg"></span></form></section>
  <section><h2>Reset offsets</h2>
  <form data-form="reset" class="inline" id="reset-form">
    <label>topic <select name="topic" id="reset-topic"></select></label>
    <label>to <input name="to" value="1h" title="an RFC 3339 time, a duration back from now (1h), earliest or latest" required></label>
    <label><input type="checkbox" name="force"> force (even with consumers online)</label>
    <button type="submit" name="mode" value="preview">Preview</button>
    <button type="button" data-act="applyReset" id="reset-apply" class="danger" disabled>Apply</button></form>
  <div id="reset-out"></div></section>`;
  let formDone = false;
  let preview = null;
  p.refresh = async () => {
    const g = await get('/groups/' + enc(group));
    $('#lag').textContent = num(g.totalLag);
    $('#group-error').hidden = !g.error;
    $('#group-error').textContent = g.error || '';
    const on = g.online;
    $('#online').textContent = on ? `${on.model || ''}${on.orderly ? ' orderly' : ''} · ${(on.clientIds || []).length} member(s) online on ${(on.brokers || []).join(', ')}` : 'No member online.';
    if (g.totalLag !== null && g.totalLag !== undefined) sample('lag/' + group, g.totalLag);
    const s = series.get('lag/' + group) || [];
    $('#lag-chart').innerHTML = spark(s.map((x) => x[1]), 600, 90, true) +
      `<p class="muted">${s.length} samples since ${s.length ? esc(when(new Date(s[0][0]).toISOString())) : 'now'}</p>`;
    const qs = g.queues || [];
    $('#queues').innerHTML = table([
      ['topic', (q) => esc(q.topic)],
      ['broker', (q) => esc(q.broker)],
      ['queue', (q) => num(q.queueId), 'n'],
      ['broker offset', (q) => num(q.brokerOffset), 'n'],
      ['consumer offset', (q) => num(q.consumerOffset), 'n'],
      ['lag', (q) => num(q.lag), 'n'],
      ['last stored', (q) => esc(when(q.lastStoreTime))],
    ], qs, 'No committed offsets.', 'id="group-queues-table"');
    const c = g.connections || {};
    const na = '<p class="muted">Connections are not available from this cluster.</p>';
    $('#consumers').innerHTML = g.connections ? conns(c.consumers) : na;
    $('#producers').innerHTML = g.connections ? conns(c.producers) : na;
    $('#declared').innerHTML = g.declared ? generic(g.declared) : '<p class="muted">Not declared: the brokers use their defaults.</p>';
    const sel = $('#reset-topic');
    const topics = [...new Set(qs.map((q) => q.topic).concat(Object.keys((on && on.subscriptions) || {})))].sort();
    // Keep the choice; first pick a topic of the group's own, not its retry topic.
    const cur = sel.value || topics.find((t) => !t.startsWith('%RETRY%')) || topics[0];
    const opts = topics.map((t) => `<option${t === cur ? ' selected' : ''}>${esc(t)}</option>`).join('');
    if (sel.innerHTML !== opts) sel.innerHTML = opts;
    if (!formDone && g.declared && g.declared.length) {
      formDone = true;
      const d = g.declared[0];
      const f = $('#declare-form');
      f.fifo.checked = !!d.fifo;
      if (d.maxDeliveryAttempts !== undefined) f.maxDeliveryAttempts.value = d.maxDeliveryAttempts;
      f.retryBackoff.value = (d.retryBackoff || []).join(', ');
      f.consumeEnable.checked = d.consumeEnable !== false;
    }
    rendered('group');
  };
  p.actions.declare = async (v, f) => {
    const body = {
      fifo: !!v.fifo, maxDeliveryAttempts: Number(v.maxDeliveryAttempts) || 0, consumeEnable: !!v.consumeEnable,
      retryBackoff: (v.retryBackoff || '').split(',').map((x) => x.trim()).filter(Boolean),
    };
    await api('PUT', '/groups/' + enc(group), body);
    flash($('.msg', f), '<span class="ok">Saved.</span>');
    refreshSoon(p);
  };
  const changes = (r) => table([
    ['topic', (c) => esc(c.topic)], ['broker', (c) => esc(c.broker)], ['queue', (c) => num(c.queueId), 'n'],
    ['before', (c) => num(c.before), 'n'], ['after', (c) => num(c.after), 'n'],
    ['moves', (c) => num(c.after - c.before), 'n'],
  ], r.changes || [], 'No queue would change.', 'id="reset-table"');
  p.actions.reset = async (v) => {
    if (!v.topic) throw new ApiError(0, 'INVALID_PARAMETER', 'choose a topic');
    const body = { topic: v.topic, to: v.to.trim(), force: !!v.force, dryRun: true };
    const r = await api('POST', `/groups/${enc(group)}/reset`, body);
    preview = body;
    $('#reset-out').innerHTML = `<p>Preview (nothing changed yet):</p>${changes(r)}`;
    $('#reset-apply').disabled = false;
  };
  p.actions.applyReset = async () => {
    if (!preview) return;
    if (!await confirmAction(`Reset the offsets of ${group} on ${preview.topic} to ${preview.to}?`)) return;
    const r = await api('POST', `/groups/${enc(group)}/reset`, { ...preview, dryRun: false });
    preview = null;
    $('#reset-apply').disabled = true;
    $('#reset-out').innerHTML = `<p class="ok">Offsets reset:</p>${changes(r)}`;
    refreshSoon(p);
  };
}

// ---------- Messages ----------

function localInput(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return '';
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function pageMessages(main, p, _arg, q) {
  const by = q.get('id') ? 'id' : q.get('begin') ? 'time' : 'key';
  const hourAgo = new Date(Date.now() - 3600e3).toISOString();
  main.innerHTML = `<h1>Messages</h1>
  <form data-form="search" id="search-form" class="inline">
    <label>search by <select name="by" id="by">${[['key', 'key'], ['id', 'message id'], ['time', 'time range']].map(([v, n]) => `<option value="${v}"${v === by ? ' selected' : ''}>${n}</option>`).join('')}</select></label>
    <label>topic <input name="topic" value="${esc(q.get('topic') || '')}"></label>
    <label data-by="key">key <input name="key" value="${esc(q.get('key') || '')}"></label>
    <label data-by="id">id <input name="id" size="34" value="${esc(q.get('id') || '')}"></label>
    <label data-by="time">from <input name="begin" type="datetime-local" step="1" value="${esc(localInput(q.get('begin') || hourAgo))}"></label>
    <label data-by="time">to <input name="end" type="datetime-local" step="1" value="${esc(localInput(q.get('end')))}"></label>
    <label>max <input name="max" type="number" min="1" max="10000" value="${esc(q.get('max') || 64)}"></label>
    <button type="submit">Search</button></form>
  <div id="results"></div>`;
  const showBy = () => {
    const v = $('#by').value;
    for (const l of main.querySelectorAll('[data-by]')) l.hidden = l.dataset.by !== v;
  };
  $('#by').addEventListener('change', showBy);
  showBy();
  p.actions.search = async (v) => {
    const s = new URLSearchParams();
    if (v.topic) s.set('topic', v.topic.trim());
    if (v.by === 'key') s.set('key', v.key.trim());
    if (v.by === 'id') s.set('id', v.id.trim());
    if (v.by === 'time') {
      s.set('begin', new Date(v.begin).toISOString());
      if (v.end) s.set('end', new Date(v.end).toISOString());
    }
    if (v.max && v.by !== 'id') s.set('max', v.max);
    const h = '#/messages?' + s;
    if (location.hash === h) search(s); else location.hash = h;
  };
  const search = async (s) => {
    $('#results').innerHTML = '<p class="muted">Searching…</p>';
    if (!s.get('end') && s.get('begin')) s.set('end', new Date().toISOString());
    const r = await get('/messages?' + s);
    const ms = r.messages || [];
    $('#results').innerHTML = `<p class="muted">${ms.length} message${ms.length === 1 ? '' : 's'}${r.capped ? ' (more matched: raise max or narrow the search)' : ''}</p>` + msgTable(ms, 'messages-table');
    rendered('messages');
  };
  if (q.get('key') || q.get('id') || q.get('begin')) {
    p.refresh = () => search(new URLSearchParams(q));
    p.every = 0; // one search, no polling
  }
}

function msgLink(m) {
  return `<a class="mono" href="#/messages/${esc(enc(m.msgId || m.offsetMsgId))}?topic=${esc(enc(m.topic || ''))}">${esc(m.msgId || m.offsetMsgId)}</a>`;
}

function msgTable(ms, id, extra = []) {
  return table([
    ['message id', msgLink],
    ['topic', (m) => esc(m.topic)],
    ['tags', (m) => esc(m.tags)],
    ['keys', (m) => esc(Array.isArray(m.keys) ? m.keys.join(' ') : m.keys)],
    ['broker', (m) => esc(m.broker)],
    ['queue', (m) => num(m.queueId), 'n'],
    ['offset', (m) => num(m.queueOffset), 'n'],
    ['stored', (m) => esc(when(m.storeTime))],
    ['size', (m) => bytes(m.bodySize), 'n'],
    ['reconsumes', (m) => num(m.reconsumeTimes), 'n'],
    ...extra,
  ], ms, 'No message found.', `id="${id}"`);
}

const HEX_LIMIT = 64 * 1024;

function hexdump(b64) {
  let bin;
  try { bin = atob(b64 || ''); } catch (_) { return '(body is not base64)'; }
  const n = Math.min(bin.length, HEX_LIMIT);
  const lines = [];
  for (let o = 0; o < n; o += 16) {
    let hex = '';
    let asc = '';
    for (let i = o; i < o + 16; i++) {
      if (i < n) {
        const c = bin.charCodeAt(i);
        hex += c.toString(16).padStart(2, '0') + (i % 16 === 7 ? '  ' : ' ');
        asc += c >= 32 && c < 127 ? bin[i] : '.';
      } else hex += i % 16 === 7 ? '    ' : '   ';
    }
    lines.push(o.toString(16).padStart(8, '0') + '  ' + hex + ' ' + asc);
  }
  if (bin.length > n) lines.push(`… ${bin.length - n} more bytes`);
  return lines.join('\n');
}

function pageMessage(main, p, id, q) {
  main.innerHTML = `<h1>Message <span class="mono">${esc(id)}</span></h1><p><a href="#/messages">← search</a></p><div id="msg"><p class="muted">Loading…</p></div>`;
  p.every = 0;
  p.refresh = async () => {
    const t = q.get('topic');
    const r = await get('/messages/' + enc(id) + (t ? '?topic=' + enc(t) : ''));
    const m = r.message || {};
    const props = m.properties || {};
    const summary = {};
    for (const k of ['msgId', 'offsetMsgId', 'topic', 'tags', 'keys', 'broker', 'queueId', 'queueOffset', 'storeTime', 'bornTime', 'bornHost', 'storeHost', 'bodySize', 'reconsumeTimes']) summary[k] = m[k];
    if (Array.isArray(summary.keys)) summary.keys = summary.keys.join(' ');
    const isText = m.bodyText !== undefined && m.bodyText !== null;
    let json = null;
    if (isText) { try { json = JSON.stringify(JSON.parse(m.bodyText), null, 2); } catch (_) { json = null; } }
    const view = json !== null ? 'json' : isText ? 'text' : 'hex';
    const tab = (v, name, ok) => `<label class="tab"><input type="radio" name="bodyview" value="${v}"${v === view ? ' checked' : ''}${ok ? '' : ' disabled'}> ${name}</label>`;
    $('#msg').innerHTML = `<div class="cols"><section><h2>Message</h2>${kv(summary)}</section>
      <section><h2>Properties</h2>${kv(props)}</section></div>
      <section><h2>Body</h2><div class="tabs">${tab('text', 'text', isText)}${tab('json', 'JSON', json !== null)}${tab('hex', 'hex', true)}</div>
      <pre id="body-text" data-view="text"${view === 'text' ? '' : ' hidden'}>${esc(isText ? m.bodyText : '')}</pre>
      <pre id="body-json" data-view="json"${view === 'json' ? '' : ' hidden'}>${esc(json || '')}</pre>
      <pre id="body-hex" data-view="hex"${view === 'hex' ? '' : ' hidden'}>${esc(hexdump(m.body))}</pre></section>
      <section><h2>Trace through retry and dead letter</h2>${table([
        ['kind', (x) => `<span class="kind ${esc(x.kind)}">${esc(x.kind)}</span>`],
        ['topic', (x) => esc(x.topic)], ['group', (x) => esc(x.group)], ['broker', (x) => esc(x.broker)],
        ['queue', (x) => num(x.queueId), 'n'], ['offset', (x) => num(x.queueOffset), 'n'],
        ['stored', (x) => esc(when(x.storeTime))], ['reconsumes', (x) => num(x.reconsumeTimes), 'n'],
        ['message id', (x) => x.msgId ? msgLink(x) : '–'],
      ], r.trace || [], 'No trace.', 'id="trace-table"')}</section>`;
    for (const i of main.querySelectorAll('input[name=bodyview]')) {
      i.addEventListener('change', () => {
        for (const pre of main.querySelectorAll('pre[data-view]')) pre.hidden = pre.dataset.view !== i.value;
      });
    }
    rendered('message');
  };
}

// ---------- Dead letters ----------

function pageDLQ(main, p) {
  main.innerHTML = '<h1>Dead letters</h1><div id="dlq"></div>';
  p.refresh = async () => {
    const r = await get('/dlq');
    $('#dlq').innerHTML = table([
      ['group', (g) => `<a href="#/dlq/${esc(enc(g.group))}">${esc(g.group)}</a>`],
      ['dead letters', (g) => num(g.messages), 'n'],
      ['', (g) => `<a href="#/groups/${esc(enc(g.group))}">group</a>`],
    ], (r.groups || []).sort(byName('group')), 'No dead letters.', 'id="dlq-table"');
    rendered('dlq');
  };
}

function pageDLQGroup(main, p, group) {
  main.innerHTML = `<h1>Dead letters of <span class="mono">${esc(group)}</span></h1>
  <p><a href="#/dlq">← dead letters</a> · <a href="#/groups/${esc(enc(group))}">group</a> ·
  <a id="export" href="api/dlq/${esc(enc(group))}/export" download="${esc(group)}-dead-letters.ndjson">export (NDJSON)</a></p>
  <form data-form="replay" class="inline" id="replay-form">
    <label>replay to topic <input name="toTopic" placeholder="the original topic"></label>
    <label><input type="checkbox" name="selected"> only the selected ones</label>
    <button type="submit" name="mode" value="dry">Dry run</button>
    <button type="submit" name="mode" value="apply" class="danger">Replay</button></form>
  <div id="replay-out" hidden><progress id="replay-progress" max="1" value="0"></progress> <span id="replay-status"></span><div id="replay-lines"></div></div>
  <div id="letters"></div>`;
  const checked = new Set();
  let replaying = false;
  main.addEventListener('change', (ev) => {
    const c = ev.target.closest('input[data-id]');
    if (c) { if (c.checked) checked.add(c.dataset.id); else checked.delete(c.dataset.id); }
  });
  p.refresh = async () => {
    const r = await get(`/dlq/${enc(group)}?max=500`);
    const ds = r.deadLetters || [];
    $('#letters').innerHTML = `<p class="muted">${ds.length} dead letter${ds.length === 1 ? '' : 's'}</p>` +
      msgTable(ds, 'letters-table', [
        ['origin topic', (d) => esc(d.originTopic)],
        ['origin id', (d) => esc(d.originMsgId)],
        ['last failure', (d) => esc(when(d.lastFailure))],
        ['replayed', (d) => d.replayed ? `<span class="ok">replayed</span>${d.replay ? ' ' + esc(when(d.replay.at)) + ' to ' + esc(d.replay.topic) : ''}` : ''],
        ['failure', (d) => esc(d.failureReason || ''), 'wrap'],
        ['', (d) => `<input type="checkbox" data-id="${esc(d.msgId)}"${checked.has(d.msgId) ? ' checked' : ''} aria-label="select">`],
      ]);
    rendered('letters');
  };
  p.actions.replay = async (v, _f, submitter) => {
    if (replaying) return;
    const dry = !submitter || submitter.value !== 'apply';
    const ids = v.selected ? [...checked] : null;
    if (v.selected && ids.length === 0) throw new ApiError(0, 'INVALID_PARAMETER', 'no dead letter is selected');
    if (!dry && !await confirmAction(`Replay ${ids ? ids.length : 'all the'} dead letters of ${group}${v.toTopic ? ' to ' + v.toTopic : ''}?`)) return;
    const body = { ids, dryRun: dry };
    if (v.toTopic) body.toTopic = v.toTopic.trim();
    const out = $('#replay-out');
    const bar = $('#replay-progress');
    const status = $('#replay-status');
    const items = [];
    out.hidden = false;
    bar.removeAttribute('value');
    status.textContent = dry ? 'dry run…' : 'replaying…';
    $('#replay-lines').innerHTML = '';
    replaying = true;
    try {
      await ndjson(`/dlq/${enc(group)}/replay`, body, (line) => {
        if (line.final) {
          const s = line.summary || {};
          bar.max = 1; bar.value = 1;
          status.innerHTML = `<span class="ok">${dry ? 'Dry run done' : 'Done'}:</span> ${esc(Object.entries(s).map(([k, x]) => `${k} ${typeof x === 'object' ? JSON.stringify(x) : x}`).join(', '))}`;
          out.dataset.final = dry ? 'dry' : 'applied';
        } else if (line.total !== undefined && line.done !== undefined) {
          bar.max = Math.max(1, line.total);
          bar.value = line.done;
          status.textContent = `${line.done}/${line.total}: ${line.replayed || 0} replayed, ${line.failed || 0} failed, ${line.skipped || 0} skipped`;
          if (line.msgId) items.push({ msgId: line.msgId, outcome: dry && line.outcome === 'replayed' ? 'would replay' : line.outcome, error: line.error || '' });
        } else {
          items.push(line);
        }
      });
    } finally {
      replaying = false;
      if (items.length) $('#replay-lines').innerHTML = generic(items.slice(0, 1000));
    }
    refreshSoon(p);
  };
}

// ---------- Delayed & transactions ----------

function pageDelay(main, p) {
  main.innerHTML = `<h1>Delayed messages &amp; transactions</h1>
  <section><h2>Delayed delivery</h2><div id="delay"></div>
  <form data-form="cancel" class="inline" id="cancel-form"><h3>Cancel a timer message</h3>
    <label>topic <input name="topic" required></label> <label>message id <input name="msgId" size="34" required></label>
    <button type="submit" class="danger">Cancel it</button> <span class="msg"></span></form></section>
  <section><h2>Transactions per broker</h2><div id="txstats"></div></section>
  <section><h2>Pending transactions</h2><div id="pending"></div></section>
  <section><h2>Discarded transactions</h2><div id="discarded"></div></section>`;
  let pending = [];
  p.refresh = async () => {
    const [d, t] = await Promise.all([get('/delay'), get('/transactions')]);
    $('#delay').innerHTML = table([
      ['broker', (b) => esc(b.broker)],
      ['pending', (b) => num(b.pending), 'n'],
      ['next due', (b) => b.nextDue ? `${esc(when(b.nextDue))} <span class="muted">${esc(ago(b.nextDue))}</span>` : '–'],
      ['levels', (b) => esc((b.levels || []).filter((l) => l.pending > 0).map((l) => `L${l.level} (${l.delay}): ${l.pending}`).join('; ') || 'none pending'), 'wrap'],
      ['timer', (b) => b.timer ? esc(`${b.timer.enabled ? 'on' : 'off'}, ${b.timer.pending} pending, max ${b.timer.maxDelay}, ${b.timer.delivered} delivered, ${b.timer.cancelled} cancelled, ${b.timer.lost} lost`) : '–'],
      ['', (b) => b.error ? `<span class="bad">${esc(b.error)}</span>` : ''],
    ], d.brokers || [], 'No broker.', 'id="delay-table"');
    $('#txstats').innerHTML = generic(t.stats, 'No broker.') + (t.error ? `<p class="bad">${esc(t.error)}</p>` : '');
    pending = t.pending || [];
    $('#pending').innerHTML = table([
      ['broker', (x) => esc(x.broker)], ['topic', (x) => esc(x.topic)], ['queue', (x) => num(x.queueId), 'n'],
      ['group', (x) => esc(x.group)], ['transaction', (x) => esc(x.transactionId)],
      ['commit log offset', (x) => num(x.commitLogOffset), 'n'], ['half offset', (x) => num(x.halfOffset), 'n'],
      ['checks', (x) => num(x.checks), 'n'], ['born', (x) => esc(when(x.born))], ['next check', (x) => esc(ago(x.nextCheck))],
      ['', (x) => `<button type="button" data-act="resolve" data-i="${x.i}" data-commit="1">commit</button> <button type="button" class="danger" data-act="resolve" data-i="${x.i}" data-commit="0">roll back</button>`],
    ], pending.map((x, i) => ({ ...x, i })), 'No pending transaction.', 'id="pending-table"');
    $('#discarded').innerHTML = generic(t.discarded, 'No discarded transaction.');
    rendered('delay');
  };
  p.actions.cancel = async (v, f) => {
    if (!await confirmAction(`Cancel the delayed message ${v.msgId} of ${v.topic}?`)) return;
    await api('POST', '/delay/cancel', { topic: v.topic.trim(), msgId: v.msgId.trim() });
    flash($('.msg', f), '<span class="ok">Cancelled.</span>');
    refreshSoon(p);
  };
  p.actions.resolve = async (d) => {
    const x = pending[Number(d.i)];
    if (!x) return;
    const commit = d.commit === '1';
    if (!await confirmAction(`${commit ? 'Commit' : 'Roll back'} transaction ${x.transactionId || x.commitLogOffset} of ${x.topic}?`)) return;
    await api('POST', '/transactions/resolve', { broker: x.broker, commitLogOffset: x.commitLogOffset, commit });
    refreshSoon(p);
  };
}

// ---------- start ----------

window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (ev) => { ev.preventDefault(); showError(ev.reason); });
run(whoami);
route();
