// The overview's charts: the cluster's load over the last hours or days (GET /v1/history), drawn
// as inline SVG by this file (no library). Three charts -- utilisation, queue length and waste --
// share one time axis; a line breaks where the history has a gap (the controller was down).
import { h } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 480, H = 170, LEFT = 44, RIGHT = 10, TOP = 10, BOTTOM = 24;
// [the API's `since`, as the heading says it, as its button says it]
export const RANGES = [['1h', 'hour', '1 h'], ['6h', '6 hours', '6 h'], ['24h', '24 hours', '24 h'], ['7d', '7 days', '7 d']];

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// What each chart draws: its series (a value of a point, its colour and dash) and its y axis.
const CHARTS = [
  {
    id: 'chart-utilisation', title: 'GPU utilisation', unit: '%', max: () => 100,
    // Busy as a filled area under the allocated line: the gap between them is the waste.
    series: [
      { name: 'busy', colour: '#2f8f5b', value: (p) => pct(p.busy, p.gpus), area: true },
      { name: 'allocated', colour: '#1f4e79', value: (p) => pct(p.allocated, p.gpus) },
    ],
  },
  {
    id: 'chart-queue', title: 'Queue length', unit: 'jobs', max: niceMax,
    series: [
      { name: 'pending', colour: '#b07d00', value: (p) => p.pending },
      { name: 'running', colour: '#1f4e79', dash: '5 3', value: (p) => p.running },
    ],
  },
  {
    id: 'chart-waste', title: 'Waste: GPUs held but idle', unit: 'GPUs', max: niceMax,
    series: [{ name: 'idle', colour: '#a4361c', value: (p) => p.idle, area: true }],
  },
];

function pct(part, whole) {
  return whole > 0 ? (100 * part) / whole : 0;
}

// A round top for the y axis above the largest value (at least 1).
function niceMax(values) {
  const top = Math.max(1, ...values);
  const mag = 10 ** Math.floor(Math.log10(top));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * mag >= top) return m * mag;
  return 10 * mag;
}

// The history section: a range selector and the three charts, for the history `hist`.
export function historySection(hist, range, onRange) {
  const buttons = RANGES.map(([r, , label]) => h('button', {
    type: 'button', class: 'range', 'aria-pressed': r === range ? 'true' : 'false', 'data-range': r,
    onclick: () => onRange(r),
  }, label));
  const body = hist.error
    ? h('p', { class: 'error' }, `The history could not be read: ${hist.error}`)
    : h('div', { class: 'charts' }, CHARTS.map((c) => chart(c, hist)));
  const every = hist.interval_ms ? `sampled every ${Math.round(hist.interval_ms / 1000)} s` : '';
  return h('section', { 'aria-labelledby': 'history-h', id: 'history' },
    h('div', { class: 'history-head' },
      h('h3', { id: 'history-h' }, 'Load over the last ', RANGES.find(([r]) => r === range)[1]),
      h('div', { role: 'group', 'aria-label': 'Time range' }, buttons),
      h('span', { class: 'muted' }, every)),
    body);
}

function chart(c, hist) {
  const pts = hist.points || [];
  const t0 = hist.since_ms, t1 = hist.until_ms;
  const ymax = c.max(pts.flatMap((p) => c.series.map((se) => se.value(p))));
  const x = (t) => LEFT + (Math.min(Math.max(t - t0, 0), t1 - t0) / Math.max(1, t1 - t0)) * (W - LEFT - RIGHT);
  const y = (v) => TOP + (1 - v / ymax) * (H - TOP - BOTTOM);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', id: c.id, 'data-points': pts.length });
  svg.append(s('title', {}, `${c.title} over the last ${hist.rangeLabel}`));
  for (const f of [0, 0.5, 1]) {
    const v = ymax * f;
    svg.append(s('line', { x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(s('text', { x: LEFT - 4, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, tickLabel(v, c.unit)));
  }
  for (const f of [0, 0.5, 1]) {
    const t = t0 + (t1 - t0) * f;
    svg.append(s('text', { x: x(t), y: H - 6, 'text-anchor': ['start', 'middle', 'end'][f * 2], class: 'tick' },
      timeLabel(t, t1 - t0)));
  }
  for (const se of c.series) {
    const d = pathOf(pts, (p) => x(p.time_ms + p.step_ms / 2), (p) => y(se.value(p)));
    if (se.area && d) svg.append(s('path', { d: areaOf(pts, x, y, se), class: 'area', fill: se.colour }));
    svg.append(s('path', { d, class: 'series', stroke: se.colour, 'stroke-dasharray': se.dash || 'none',
      'data-series': se.name }));
  }
  if (!pts.length) {
    svg.append(s('text', { x: (LEFT + W) / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' },
      'No samples in this range yet'));
  }
  const last = pts[pts.length - 1];
  const now = last ? c.series.map((se) => `${se.name} ${valueText(se.value(last), c.unit)}`).join(', ') : 'no data';
  return h('figure', { class: 'chart-box' },
    h('figcaption', {}, h('strong', {}, c.title), h('span', { class: 'muted' }, ` — latest: ${now}`)),
    svg,
    h('ul', { class: 'chart-key' }, c.series.map((se) => h('li', {}, keySwatch(se), se.name))));
}

// Through the CSSOM: the page's policy (style-src 'self') refuses inline style attributes.
function keySwatch(se) {
  const el = h('span', { class: 'key' });
  el.style.borderTop = `3px ${se.dash ? 'dashed' : 'solid'} ${se.colour}`;
  return el;
}

// The points split where the history has a gap: longer than twice a point's span.
function segments(pts) {
  const out = [];
  let prev = null;
  for (const p of pts) {
    if (!prev || p.time_ms - prev.time_ms > 2 * Math.max(p.step_ms, prev.step_ms)) out.push([]);
    out[out.length - 1].push(p);
    prev = p;
  }
  return out;
}

// The points as an SVG path, one subpath per segment; a lone point is a short tick so that it
// shows.
function pathOf(pts, px, py) {
  return segments(pts).map((seg) => seg.map((p, i) => `${i ? 'L' : 'M'}${px(p).toFixed(1)},${py(p).toFixed(1)}`)
    .join('') + (seg.length === 1 ? 'h1.5' : '')).join('');
}

// The area under each segment, closed down to 0.
function areaOf(pts, x, y, se) {
  const px = (p) => x(p.time_ms + p.step_ms / 2).toFixed(1);
  const base = y(0).toFixed(1);
  return segments(pts).filter((seg) => seg.length > 1).map((seg) =>
    seg.map((p, i) => `${i ? 'L' : 'M'}${px(p)},${y(se.value(p)).toFixed(1)}`).join('') +
    `L${px(seg[seg.length - 1])},${base}L${px(seg[0])},${base}Z`).join('');
}

function valueText(v, unit) {
  if (unit === '%') return `${Math.round(v)}%`;
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${v === 1 ? unit.replace(/s$/, '') : unit}`;
}

function tickLabel(v, unit) {
  if (unit === '%') return `${Math.round(v)}%`;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

function timeLabel(t, span) {
  const d = new Date(t);
  const hm = `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  if (span <= 36 * 3600 * 1000) return hm;
  return `${d.toLocaleDateString(undefined, { weekday: 'short' })} ${hm}`;
}
