// ui/app.js — the retrace web UI (docs/ui.md): four views drawn from the
// coordinator's JSON API (docs/api.md), chosen by the URL's #fragment:
//   #/?service=..&...   trace search: filters above, results table below
//   #/trace/ID          one trace: span waterfall across hosts, attributes and
//                       logs inline, coherent/incoherent badge, partial spans marked
//   #/status            the coordinator's figures, agents and triggers
//   #/history           per-trigger rates, agents' event horizon and drops and
//                       selection windows over time (/api/history), as SVG
// Every string from a trace is untrusted: the DOM is built with textContent,
// never innerHTML. The page sets data-state="ready" (or "error") on <main>
// when a view is drawn, which the browser test waits for.
'use strict';

const view = document.getElementById('view');

// el('td', {class: 'num'}, 'text', childNode, ...)
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) {
    if (k === undefined || k === null || k === false) continue;
    e.appendChild(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
  }
  return e;
}

function show(state, ...nodes) {
  view.replaceChildren(...nodes);
  view.dataset.state = state;
}

async function api(path) {
  const res = await fetch(path, { cache: 'no-store' });
  let body;
  try { body = await res.json(); } catch (e) { body = { error: 'not JSON: HTTP ' + res.status }; }
  if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
  return body;
}

// A change (an alarm): the X-Retrace-Request header is what the API asks of a
// change, a header no page of another site can send (docs/api.md).
async function change(method, path) {
  const res = await fetch(path, { method, cache: 'no-store', headers: { 'X-Retrace-Request': '1' } });
  let body;
  try { body = await res.json(); } catch (e) { body = { error: 'HTTP ' + res.status }; }
  if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
  return body;
}

// "Alarm SERVICE OPERATION for [5 min]": selection keeps more of that entry
// API's traces (retrace alarm). msg gets the coordinator's answer.
function alarmForm(service, operation) {
  const secs = el('select', { name: 'seconds' });
  for (const [v, t] of [['300', '5 min'], ['900', '15 min'], ['3600', '1 hour']]) secs.appendChild(el('option', { value: v }, t));
  const msg = el('span', { class: 'muted', id: 'alarm-result' });
  const form = el('form', { class: 'alarm', id: 'alarm-form' },
    'Alarm ', el('b', {}, service + ' ' + operation), ' for ', secs, ' ',
    el('button', { type: 'submit' }, 'Set alarm'), ' ', msg);
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const q = new URLSearchParams({ service, operation, seconds: secs.value });
    try { msg.textContent = (await change('POST', '/api/alarms?' + q)).ok; msg.className = ''; }
    catch (e) { msg.textContent = e.message; msg.className = 'error'; }
  });
  return form;
}

function fail(what, err) {
  show('error', el('h1', {}, what), el('p', { class: 'error' }, String(err.message || err)));
}

function fmtDur(ns) {
  if (ns < 1e3) return ns + ' ns';
  if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' µs';
  if (ns < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
  return (ns / 1e9).toFixed(2) + ' s';
}

function fmtTime(ns) {
  if (!ns) return '-';
  const d = new Date(ns / 1e6);
  return d.toISOString().replace('T', ' ').replace('Z', '');
}

function coherentBadge(c) {
  return el('span', { class: 'badge ' + (c ? 'coherent' : 'incoherent') }, c ? 'coherent' : 'incoherent');
}

// A stable colour per service name.
function colour(name) {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return 'hsl(' + (h % 360) + ', 55%, 55%)';
}

function setNav(which) {
  document.getElementById('nav-search').classList.toggle('active', which === 'search');
  document.getElementById('nav-status').classList.toggle('active', which === 'status');
  document.getElementById('nav-history').classList.toggle('active', which === 'history');
}

// ------------------------------------------------------------------ search

// "payment-error (7), head-sampled": a named trigger with its id, a built-in by
// name, an unnamed one by id (trigger_names runs beside triggers, null: none).
function triggerLabels(t) {
  const names = t.trigger_names || [];
  return t.triggers.map((id, i) => {
    const n = names[i];
    if (!n) return String(id);
    return id >= 0xFFFFFF00 ? n : n + ' (' + id + ')';
  }).join(', ');
}

const FILTERS = [
  ['service', 'service', 'text'], ['operation', 'operation', 'text'],
  ['trigger', 'trigger (name or id)', 'text'], ['group', 'selection group', 'text'],
  ['min_ms', 'min ms', 'text'], ['max_ms', 'max ms', 'text'],
];
const WITHIN = [['', 'any time'], ['15', 'last 15 min'], ['60', 'last hour'], ['1440', 'last day']];

async function searchView(params) {
  setNav('search');
  const form = el('form', { class: 'filters', id: 'filters' });
  for (const [name, label] of FILTERS)
    form.appendChild(el('label', {}, label, el('input', { name, value: params.get(name) || '' })));
  const within = el('select', { name: 'within' });
  for (const [v, t] of WITHIN)
    within.appendChild(el('option', { value: v, selected: (params.get('within') || '') === v ? '' : null }, t));
  form.appendChild(el('label', {}, 'closed', within));
  const coh = el('select', { name: 'coherent' });
  for (const [v, t] of [['', 'any'], ['true', 'coherent'], ['false', 'incoherent']])
    coh.appendChild(el('option', { value: v, selected: (params.get('coherent') || '') === v ? '' : null }, t));
  form.appendChild(el('label', {}, 'coherent', coh));
  form.appendChild(el('label', {}, 'limit', el('input', { name: 'limit', value: params.get('limit') || '100', size: 5 })));
  form.appendChild(el('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v !== '') p.set(k, v);
    location.hash = '#/?' + p.toString();
  });

  const q = new URLSearchParams();
  for (const [k, v] of params) {
    if (k === 'within') q.set('since', String(Date.now() - Number(v) * 60000));
    else if (v !== '') q.set(k, v);
  }
  show('loading', el('h1', {}, 'Traces'), form, el('p', { class: 'muted' }, 'Searching…'));
  let r;
  try { r = await api('/api/traces?' + q.toString()); } catch (e) {
    show('error', el('h1', {}, 'Traces'), form, el('p', { class: 'error', id: 'search-error' }, e.message));
    return;
  }
  const table = el('table', { id: 'results' },
    el('thead', {}, el('tr', {}, ...['trace', 'closed', 'root', 'duration', 'spans', 'services',
      'coherent', 'triggers', 'errors', 'group', 'score'].map(h => el('th', {}, h)))));
  const body = el('tbody');
  for (const t of r.traces) {
    body.appendChild(el('tr', { 'data-trace': t.trace_id },
      el('td', {}, el('a', { class: 'mono', href: '#/trace/' + t.trace_id }, t.trace_id)),
      el('td', { class: 'mono' }, fmtTime(t.closed_ns)),
      el('td', {}, t.root_service ? el('b', {}, t.root_service) : '-', ' ', t.root_operation || ''),
      el('td', { class: 'num' }, fmtDur(t.duration_ns)),
      el('td', { class: 'num' }, t.spans),
      el('td', {}, t.services.join(', ')),
      el('td', {}, coherentBadge(t.coherent)),
      el('td', { class: 'triggers' }, triggerLabels(t)),
      el('td', { class: 'num' }, t.errors ? el('span', { class: 'badge error' }, t.errors) : '0'),
      el('td', {}, t.selection.group || '-'),
      el('td', { class: 'num' }, t.selection.selected ? t.selection.score.toFixed(1) : '-')));
  }
  table.appendChild(body);
  const note = r.count + ' trace' + (r.count === 1 ? '' : 's') + ' (scanned ' + r.scanned + ' rows' +
    (r.truncated ? ', stopped early: narrow the search' : '') + ')';
  show('ready', el('h1', {}, 'Traces'), form, el('p', { class: 'muted', id: 'count' }, note), table);
}

// ------------------------------------------------------------------- trace

function attrTable(attrs) {
  const t = el('table', {});
  for (const a of attrs)
    t.appendChild(el('tr', {}, el('td', { class: 'mono' }, a.key),
      el('td', { class: 'mono' }, typeof a.value === 'string' ? a.value : JSON.stringify(a.value))));
  return t;
}

// A link the weaver inferred for a hop that carried no context (docs/weaving.md):
// the span's retrace.weave.* attributes, shown with the link's confidence.
function inferredBadge(s) {
  const attr = k => (s.attributes.find(a => a.key === k) || {}).value;
  if (attr('retrace.weave.inferred') !== true) return null;
  const conf = attr('retrace.weave.confidence');
  const other = attr('retrace.weave.parent_trace_id') || attr('retrace.weave.child_trace_id');
  return el('span', { class: 'badge flag inferred', title: other ? 'linked trace ' + other : '' },
    'inferred link' + (typeof conf === 'number' ? ' · confidence ' + conf.toFixed(2) : ''));
}

function logLines(logs, t0) {
  return logs.map(l => el('div', { class: 'log' },
    el('span', { class: 'lvl ' + l.level }, l.level), '+' + fmtDur(Math.max(0, l.time_ns - t0)) + '  ', l.body));
}

// Depth-first order of the span tree (parent indexes cross hosts); spans whose
// parent is not in the trace are roots; a loop (damaged data) is cut.
function treeOrder(spans) {
  const kids = spans.map(() => []);
  const roots = [];
  spans.forEach((s, i) => (s.parent !== null && s.parent !== i ? kids[s.parent] : roots).push(i));
  const out = [], seen = new Set();
  const walk = (i, depth) => {
    const stack = [[i, depth]];
    while (stack.length) {
      const [j, d] = stack.pop();
      if (seen.has(j)) continue;
      seen.add(j);
      out.push([j, d]);
      for (let k = kids[j].length - 1; k >= 0; k--) stack.push([kids[j][k], d + 1]);
    }
  };
  roots.forEach(i => walk(i, 0));
  spans.forEach((_, i) => { if (!seen.has(i)) walk(i, 0); });
  return out;
}

async function traceView(id) {
  setNav('search');
  show('loading', el('h1', {}, 'Trace ' + id), el('p', { class: 'muted' }, 'Loading…'));
  let t, names = {};
  try {
    const [tr, ag] = await Promise.all([api('/api/traces/' + encodeURIComponent(id)),
                                        api('/api/agents').catch(() => ({ agents: [] }))]);
    t = tr;
    for (const a of ag.agents) names[a.agent_id] = a.host; // the agents' --host names
  } catch (e) { return fail('Trace ' + id, e); }
  const agentName = n => 'agent ' + n + (names[n] ? ' (' + names[n] + ')' : '');
  const t0 = t.start_ns, span = Math.max(1, t.end_ns - t.start_ns);
  const problems = Object.entries(t.decode).filter(([k, v]) =>
    typeof v === 'number' && v > 0 && !['slices', 'buffers', 'records', 'events', 'duplicate_buffers'].includes(k));
  const summary = el('div', { class: 'summary', id: 'trace-summary' },
    el('div', {}, el('span', {}, 'trace'), el('code', { id: 'trace-id' }, t.trace_id)),
    el('div', { id: 'coherence' }, coherentBadge(t.coherent),
      t.decode.complete ? '' : el('span', { class: 'badge flag' }, 'decode incomplete')),
    el('div', {}, el('span', {}, 'duration'), fmtDur(t.end_ns - t.start_ns)),
    el('div', {}, el('span', {}, 'spans'), t.spans.length),
    el('div', {}, el('span', {}, 'agents'), t.agents.map(agentName).join(', ') || '-'),
    t.missing.length ? el('div', { class: 'error' }, 'missing slices from agent(s) ' + t.missing.join(', ') +
      ' (' + t.missing.map(n => names[n] || '?').join(', ') + ')') : null,
    el('div', {}, el('span', {}, 'triggers'), triggerLabels(t) || '-'),
    el('div', {}, el('span', {}, 'triggered'), fmtTime(t.triggered_ns)),
    el('div', {}, el('span', {}, 'traversal'), fmtDur(t.traversal_ns)),
    t.selection.selected ? el('div', {}, el('span', {}, 'group'), t.selection.group + ' (score ' + t.selection.score.toFixed(1) + ')') : null,
    problems.length ? el('div', { class: 'error', id: 'decode-problems' },
      'decode: ' + problems.map(([k, v]) => v + ' ' + k.replace(/_/g, ' ')).join(', ')) : null);

  const wf = el('div', { class: 'waterfall', id: 'waterfall' });
  for (const [i, depth] of treeOrder(t.spans)) {
    const s = t.spans[i];
    const left = ((s.start_ns - t0) / span) * 100, width = ((s.end_ns - s.start_ns) / span) * 100;
    const label = el('div', { class: 'label', style: 'padding-left:' + Math.min(depth, 24) * 14 + 'px',
                              title: s.service + ' ' + s.name },
      el('span', { class: 'svc' }, s.service),
      s.host ? el('span', { class: 'host' }, '@' + s.host) : null,
      el('span', { class: 'name' }, s.name || '(span ' + s.span_id + ')'), ' ',
      el('span', { class: 'badge kind' }, s.kind),
      s.status === 'error' ? el('span', { class: 'badge error' }, 'ERROR ' + s.status_code + (s.status_message ? ': ' + s.status_message : '')) : null,
      ...s.flags.map(f => el('span', { class: 'badge flag' }, f.replace('_', ' '))),
      s.orphan ? el('span', { class: 'badge flag' }, 'orphan: parent ' + s.parent_id + ' not in the trace') : null,
      inferredBadge(s));
    wf.appendChild(el('div', { class: 'span-row', 'data-span': s.span_id, 'data-service': s.service },
      label,
      el('div', { class: 'track' }, el('div', { class: 'bar' + (s.status === 'error' ? ' err' : ''),
        style: 'left:' + left.toFixed(3) + '%;width:' + Math.max(width, 0.2).toFixed(3) + '%;background:' + colour(s.service) })),
      el('div', { class: 'dur' }, fmtDur(s.end_ns - s.start_ns))));
    if (s.attributes.length || s.logs.length) {
      const d = el('details', { class: 'span-detail', style: 'margin-left:' + Math.min(depth, 24) * 14 + 'px' },
        el('summary', {}, s.attributes.length + ' attribute' + (s.attributes.length === 1 ? '' : 's') + ', ' +
          s.logs.length + ' log' + (s.logs.length === 1 ? '' : 's') + ' · ' + s.service + '@' + (s.host || '?') +
          ' pid ' + s.pid + ' ' + agentName(s.agent_id)),
        s.attributes.length ? attrTable(s.attributes) : null, ...logLines(s.logs, t0));
      if (s.logs.length) d.open = true; // logs inline; attributes one click away
      wf.appendChild(d);
    }
  }
  const extra = t.loose_logs.length ? [el('h2', {}, 'Logs outside any span'), ...logLines(t.loose_logs, t0)] : [];
  const root = t.spans.find(s => s.parent === null);
  show('ready', el('h1', {}, 'Trace'), summary, root && root.name ? alarmForm(root.service, root.name) : null, wf, ...extra,
    el('p', {}, el('a', { href: '/api/traces/' + t.trace_id }, 'JSON')));
}

// ------------------------------------------------------------------ status

function figureCard(name, figs) {
  const t = el('table', {});
  for (const [k, v] of Object.entries(figs))
    t.appendChild(el('tr', {}, el('td', { class: 'mono' }, k),
      el('td', { class: 'mono num' }, typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(3) : String(v))));
  return el('div', { class: 'card', 'data-section': name }, el('h3', {}, name), t);
}

async function statusView() {
  setNav('status');
  show('loading', el('h1', {}, 'Status'), el('p', { class: 'muted' }, 'Loading…'));
  let st, ag, al;
  try { [st, ag] = await Promise.all([api('/api/status'), api('/api/agents')]); } catch (e) { return fail('Status', e); }
  try { al = (await api('/api/alarms')).alarms; } catch (e) { al = e; }
  const now = Date.now() * 1e6;
  const agents = el('table', { id: 'agents' },
    el('tr', {}, ...['agent', 'host', 'address', 'pid', 'started', 'last seen'].map(h => el('th', {}, h))));
  for (const a of ag.agents)
    agents.appendChild(el('tr', { 'data-agent': a.agent_id }, el('td', { class: 'num' }, a.agent_id), el('td', {}, a.host),
      el('td', { class: 'mono' }, a.address), el('td', { class: 'num' }, a.pid), el('td', { class: 'mono' }, fmtTime(a.start_ns)),
      el('td', {}, fmtDur(Math.max(0, now - a.last_seen_ns)) + ' ago')));
  // Per-trigger figures (the traversal shares section names them trigger_<id>_...).
  const trig = {};
  for (const figs of Object.values(st))
    if (figs && typeof figs === 'object')
      for (const [k, v] of Object.entries(figs)) {
        const m = /^trigger_(\d+)_(.+)$/.exec(k);
        if (m) (trig[m[1]] = trig[m[1]] || {})[m[2]] = v;
      }
  const cols = [...new Set(Object.values(trig).flatMap(o => Object.keys(o)))];
  const triggers = el('table', { id: 'triggers' }, el('tr', {}, el('th', {}, 'trigger'), ...cols.map(c => el('th', {}, c))));
  for (const [id, o] of Object.entries(trig))
    triggers.appendChild(el('tr', {}, el('td', { class: 'num' }, id), ...cols.map(c => el('td', { class: 'num' }, o[c] ?? '-'))));
  const cards = el('div', { class: 'cards', id: 'figures' });
  for (const [name, figs] of Object.entries(st))
    if (figs && typeof figs === 'object') cards.appendChild(figureCard(name, figs));
  let alarms;
  if (al instanceof Error) alarms = el('p', { class: 'muted' }, al.message);
  else if (!al.length) alarms = el('p', { class: 'muted', id: 'alarms' }, 'no alarm is set');
  else {
    alarms = el('table', { id: 'alarms' }, el('tr', {}, ...['kind', 'entry API', 'remaining', ''].map(h => el('th', {}, h))));
    for (const a of al) {
      const clear = a.kind === 'operator' ? el('button', { type: 'button' }, 'clear') : null;
      if (clear) clear.addEventListener('click', async () => {
        try { await change('DELETE', '/api/alarms?' + new URLSearchParams({ service: a.service, operation: a.operation })); route(); }
        catch (e) { clear.replaceWith(el('span', { class: 'error' }, e.message)); }
      });
      alarms.appendChild(el('tr', { 'data-alarm': a.kind }, el('td', {}, a.kind),
        el('td', {}, a.kind === 'operator' ? a.service + ' ' + a.operation : a.group),
        el('td', {}, a.kind === 'operator' ? a.remaining_s + ' s' : 'next window'), el('td', {}, clear)));
    }
  }
  show('ready', el('h1', {}, 'Status'), el('h2', {}, 'Agents'), agents,
    el('h2', {}, 'Selection alarms'), alarms,
    el('h2', {}, 'Triggers'), cols.length ? triggers : el('p', { class: 'muted' }, 'no trigger has fired yet'),
    el('h2', {}, 'Coordinator figures'), cards);
}

// ----------------------------------------------------------------- history

const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
const PALETTE = ['#2a6fdb', '#d9480f', '#2b8a3e', '#ae3ec9', '#f08c00', '#0c8599', '#c92a2a', '#5c7cfa'];

// One line chart: series = [{key, label, points: [[t_ms, value or null], ...]}];
// a null value breaks the line (an agent that did not answer). Plain SVG.
function lineChart(id, unit, series) {
  const W = 760, H = 180, L = 56, R = 10, T = 10, B = 24;
  const pts = series.flatMap(s => s.points.filter(p => p[1] !== null));
  const wrap = el('div', { class: 'chart', id });
  if (!pts.length) { wrap.appendChild(el('p', { class: 'muted' }, 'no samples yet')); return wrap; }
  const t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]), t0 + 1);
  const vmax = Math.max(...pts.map(p => p[1])) * 1.1 || 1; // all zero: a 0..1 scale
  const x = t => L + (t - t0) / (t1 - t0) * (W - L - R), y = v => H - B - v / vmax * (H - T - B);
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img' });
  svg.appendChild(svgEl('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  svg.appendChild(svgEl('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
  for (const [v, yy] of [[vmax, T + 10], [vmax / 2, y(vmax / 2) + 4], [0, H - B]]) {
    const t = svgEl('text', { x: L - 4, y: yy, 'text-anchor': 'end', class: 'tick' });
    t.textContent = (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(2)) + (v ? ' ' + unit : '');
    svg.appendChild(t);
  }
  for (const [tt, anchor] of [[t0, 'start'], [t1, 'end']]) {
    const t = svgEl('text', { x: x(tt), y: H - 6, 'text-anchor': anchor, class: 'tick' });
    t.textContent = new Date(tt).toISOString().slice(11, 19) + 'Z';
    svg.appendChild(t);
  }
  const legend = el('div', { class: 'legend' });
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    let d = '', pen = false;
    for (const [t, v] of s.points) {
      if (v === null) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + x(t).toFixed(1) + ' ' + y(v).toFixed(1) + ' ';
      pen = true;
    }
    const last = [...s.points].reverse().find(p => p[1] !== null);
    svg.appendChild(svgEl('path', { d: d.trim() || 'M0 0', class: 'series', stroke: color, 'data-series': s.key,
      'data-points': s.points.filter(p => p[1] !== null).length, 'data-last': last ? last[1] : '' }));
    legend.appendChild(el('span', { 'data-legend': s.key },
      el('i', { style: 'background:' + color }), s.label + (last ? ' ' + fmtNum(last[1]) + ' ' + unit : '')));
  });
  wrap.append(svg, legend);
  return wrap;
}

function fmtNum(v) { return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(2); }

// Per-second rate of a cumulative counter between consecutive samples.
function rates(samples, get) {
  const out = [];
  for (let i = 1; i < samples.length; i++) {
    const a = get(samples[i - 1]), b = get(samples[i]), dt = (samples[i].t_ms - samples[i - 1].t_ms) / 1000;
    out.push([samples[i].t_ms, a === null || b === null || dt <= 0 ? null : Math.max(0, b - a) / dt]);
  }
  return out;
}

async function historyView() {
  setNav('history');
  show('loading', el('h1', {}, 'History'), el('p', { class: 'muted' }, 'Loading…'));
  let h;
  try { h = await api('/api/history'); } catch (e) { return fail('History', e); }
  const names = h.trigger_names || {}, samples = h.history.samples;
  const trigIds = [...new Set(samples.flatMap(s => s.triggers.map(t => t.id)))].sort((a, b) => a - b);
  const agentIds = [...new Set(samples.flatMap(s => s.agents.map(a => a.id)))].sort((a, b) => a - b);
  const trig = (s, id) => { const t = s.triggers.find(x => x.id === id); return t ? t.opened : 0; };
  const agent = (s, id) => s.agents.find(x => x.id === id && x.ok) || null;
  const drops = a => a.null_buffers + a.trigger_drops + a.breadcrumb_drops + a.complete_drops;
  const label = id => names[id] ? names[id] + (id < 0xFFFFFF00 ? ' (' + id + ')' : '') : String(id);
  const triggers = lineChart('chart-triggers', '/s', trigIds.map(id => ({
    key: 'trigger-' + id, label: label(id), points: rates(samples, s => trig(s, id)) })));
  const horizon = lineChart('chart-horizon', 's', agentIds.map(id => ({
    key: 'agent-' + id, label: 'agent ' + id,
    points: samples.map(s => { const a = agent(s, id); return [s.t_ms, a ? a.horizon_us / 1e6 : null]; }) })));
  const dropChart = lineChart('chart-drops', '/s', agentIds.map(id => ({
    key: 'agent-' + id, label: 'agent ' + id,
    points: rates(samples, s => { const a = agent(s, id); return a ? drops(a) : null; }) })));
  const selection = lineChart('chart-selection', '/s', [
    { key: 'kept', label: 'kept', points: rates(samples, s => s.selection.kept) },
    { key: 'dropped', label: 'dropped', points: rates(samples, s => s.selection.dropped) },
    { key: 'windows', label: 'windows closed', points: rates(samples, s => s.selection.windows) }]);
  // The newest sample, as numbers (what the charts end at).
  const last = samples[samples.length - 1];
  const table = el('table', { id: 'history-agents' }, el('tr', {}, ...['agent', 'answered', 'event horizon',
    'discard writes', 'evicted traces', 'trigger drops', 'breadcrumb drops'].map(t => el('th', {}, t))));
  for (const a of last ? last.agents : [])
    table.appendChild(el('tr', { 'data-hist-agent': a.id }, el('td', { class: 'num' }, a.id),
      el('td', {}, a.ok ? 'yes' : 'no'), el('td', { class: 'num' }, a.ok ? fmtDur(a.horizon_us * 1000) : '-'),
      el('td', { class: 'num' }, a.null_buffers), el('td', { class: 'num' }, a.evicted),
      el('td', { class: 'num' }, a.trigger_drops), el('td', { class: 'num' }, a.breadcrumb_drops)));
  show('ready', el('h1', {}, 'History'),
    el('p', { class: 'muted', id: 'history-meta', 'data-samples': samples.length },
      samples.length + ' samples, one every ' + h.history.interval_s + ' s (the last ' + h.history.capacity + ' are kept)'),
    el('h2', {}, 'Trigger rates (trace groups opened per second)'), triggers,
    el('h2', {}, "Agents' event horizon"),
    el('p', { class: 'muted' }, 'The age of the data an agent evicted last: 0 until its pool first fills past the eviction threshold.'),
    horizon,
    el('h2', {}, "Agents' drops (discard writes and queue drops per second)"), dropChart,
    el('h2', {}, 'Selection windows (traces kept and dropped per second, windows closed)'), selection,
    el('h2', {}, 'Newest sample'), table);
}

// ------------------------------------------------------------------ routes

function route() {
  const h = location.hash || '#/';
  let m;
  if ((m = /^#\/trace\/([^/?]+)/.exec(h))) return traceView(decodeURIComponent(m[1]));
  if (h.startsWith('#/status')) return statusView();
  if (h.startsWith('#/history')) return historyView();
  const qi = h.indexOf('?');
  return searchView(new URLSearchParams(qi >= 0 ? h.slice(qi + 1) : ''));
}

window.addEventListener('hashchange', route);
route();
