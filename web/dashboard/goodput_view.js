// Goodput (docs/goodput.md, "In the controller"): where the jobs' time went since they first
// started -- productive, setup, restart, lost work, waiting after an interruption -- for the
// cluster (GET /v1/goodput) and per job, each job's time line drawn as inline SVG (no library)
// and said in words beside it.
import { get } from './api.js';
import { fill, h, table, jobLink, when } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
// Each part: its name in the API, its label, its colour (and a pattern-free order for the key).
const PARTS = [
  ['productive', 'productive', '#2f8f5b'],
  ['setup', 'setup', '#8e9aa6'],
  ['restart', 'restart and restore', '#1f7a8c'],
  ['lost_work', 'lost work', '#a4361c'],
  ['requeue_wait', 'waiting after an interruption', '#d69a00'],
];
const COLOUR = Object.fromEntries(PARTS.map(([k, , c]) => [k, c]));

const pct = (v) => (typeof v === 'number' ? `${(100 * v).toFixed(1)}%` : '—');
const hours = (v) => (typeof v === 'number' ? v.toFixed(3) : '—');

export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 90) return `${s.toFixed(1)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// The job's time line as segments [part, from_ms, to_ms]: setup from its first start, and around
// each interruption kept in `recent` its lost work (before it), the wait and the restart (after);
// the rest productive. Interruptions older than the last 20 are drawn as productive.
export function timeline(g) {
  const start = g.first_start_ms;
  const end = start + g.wall_ms;
  const marks = [['setup', start, start + g.parts.setup.ms]];
  for (const i of g.recent) {
    marks.push(['lost_work', i.at_ms - i.lost_work_ms, i.at_ms]);
    marks.push(['requeue_wait', i.at_ms, i.at_ms + i.requeue_wait_ms]);
    marks.push(['restart', i.at_ms + i.requeue_wait_ms, i.at_ms + i.requeue_wait_ms + i.restart_ms]);
  }
  const segs = [];
  let at = start;
  for (const [part, from, to] of marks) {
    const a = Math.max(from, at), b = Math.min(to, end);
    if (a > at) segs.push(['productive', at, a]);
    if (b > a) segs.push([part, a, b]);
    at = Math.max(at, b);
  }
  if (end > at) segs.push(['productive', at, end]);
  return segs;
}

function timelineSvg(g, label) {
  const W = 600, H = 22;
  const segs = timeline(g);
  const span = Math.max(1, g.wall_ms);
  const x = (t) => ((t - g.first_start_ms) / span) * W;
  const svg = s('svg', { class: 'goodput-line', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': label },
    s('title', {}, label));
  for (const [part, a, b] of segs) {
    svg.append(s('rect', { x: x(a).toFixed(2), y: 2, width: Math.max(0.5, x(b) - x(a)).toFixed(2), height: H - 4,
      fill: COLOUR[part], 'data-part': part }));
  }
  for (const i of g.recent) svg.append(s('line', { x1: x(i.at_ms), x2: x(i.at_ms), y1: 0, y2: H, stroke: '#1b2733', 'stroke-width': 2 }));
  return svg;
}

function key() {
  return h('ul', { class: 'legend', id: 'goodput-key' }, PARTS.map(([, label, colour]) =>
    h('li', {}, svgSwatch(colour), label)), h('li', {}, svgSwatch('#1b2733', true), 'an interruption'));
}

function svgSwatch(colour, bar) {
  return s('svg', { width: 14, height: 14, 'aria-hidden': 'true' },
    bar ? s('rect', { x: 6, y: 0, width: 2, height: 14, fill: colour }) : s('rect', { x: 0, y: 0, width: 14, height: 14, fill: colour }));
}

// What the time line shows, in words.
function inWords(g) {
  return PARTS.filter(([k]) => g.parts[k].ms > 0).map(([k, label]) => `${label} ${duration(g.parts[k].ms)}`).join(', ');
}

function partsTable(caption, g, timed) {
  const total = PARTS.reduce((t, [k]) => t + g.parts[k].gpu_hours, 0);
  return table(caption, timed ? ['Part', 'Time', 'Share', 'GPU-hours'] : ['Part', 'Share', 'GPU-hours'],
    PARTS.map(([k, label]) => {
      const p = g.parts[k];
      return timed ? [label, duration(p.ms), pct(g.wall_ms ? p.ms / g.wall_ms : 0), hours(p.gpu_hours)]
        : [label, pct(total ? p.gpu_hours / total : 0), hours(p.gpu_hours)];
    }));
}

function causesTable(byCause) {
  const rows = Object.entries(byCause || {}).filter(([, c]) => c.count > 0);
  if (!rows.length) return h('p', {}, 'No interruption.');
  return table('Interruptions by cause', ['Cause', 'Count', 'Lost work', 'Restart', 'Waiting', 'GPU-hours'],
    rows.map(([cause, c]) => [cause, String(c.count), duration(c.lost_work_ms), duration(c.restart_ms),
      duration(c.requeue_wait_ms), hours(c.gpu_hours)]));
}

export async function goodputView(main) {
  const c = await get('/v1/goodput?jobs=100');
  const jobs = c.job_list || [];
  fill(main, h('h2', {}, 'Goodput'),
    h('p', { class: 'summary', id: 'goodput-cluster' },
      `Cluster: ETTR ${pct(c.ettr)} (productive GPU-hours over all) across ${c.jobs} jobs that started — `,
      `${c.jobs_under_way} under way, ${c.jobs_interrupted} interrupted; ${hours(c.gpu_hours)} GPU-hours.`),
    partsTable('Where the GPU-hours went', c, false),
    causesTable(c.by_cause),
    h('h3', {}, `Jobs under way (${jobs.length}), lowest ETTR first`), key(),
    jobs.length ? table('Each job\'s time since it first started', ['Job', 'ETTR', 'Time line', 'Interruptions', 'In words'],
      jobs.map((j) => [jobLink(j.id, j.name), pct(j.goodput.ettr),
        h('a', { href: `#/goodput/${j.id}` }, timelineSvg(j.goodput, `time line of job ${j.id}: ${inWords(j.goodput)}`)),
        String(j.goodput.interruptions), inWords(j.goodput)]))
      : h('p', {}, 'No job is under way.'));
}

export async function jobGoodputView(main, ctx, id) {
  const r = await get(`/v1/jobs/${id}/goodput`);
  const g = r.goodput;
  if (!g) {
    fill(main, h('h2', {}, `Goodput of job ${r.name} (#${r.id})`), h('p', {}, `It is ${r.state} and has not started yet.`));
    return;
  }
  fill(main, h('h2', {}, `Goodput of job ${r.name} (#${r.id})`),
    h('p', { class: 'summary', id: 'goodput-job' }, `${r.state}: ETTR ${pct(g.ettr)} over ${duration(g.wall_ms)} since it first started (${when(g.first_start_ms)}), `,
      `${hours(g.gpu_hours)} GPU-hours; `, jobLink(r.id, 'the job')),
    key(), timelineSvg(g, `time line: ${inWords(g)}`), h('p', {}, inWords(g)),
    partsTable('Where its time went', g, true),
    causesTable(g.by_cause),
    g.recent.length ? table('Interruptions (the latest 20)', ['Attempt', 'At', 'Cause', 'Lost work', 'Reckoned from', 'Waiting', 'Restart', 'Why'],
      g.recent.map((i) => [String(i.attempt), when(i.at_ms), i.cause, duration(i.lost_work_ms), i.lost_basis,
        duration(i.requeue_wait_ms), duration(i.restart_ms), i.why])) : null);
}
