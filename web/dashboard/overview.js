// The first page: the cluster's load over time as charts, then nodes by name, running and
// pending jobs by name, each pending job's blocker.
import { get, ApiError } from './api.js';
import { historySection, RANGES } from './charts.js';
import { fill, h, jobLink, nodeLink, gpuCount } from './dom.js';
import { STATES } from './states.js';

const LIST_CAP = 200;  // rows per list on this page; the queue and map views show them all

const RANGE_KEY = 'hangar.range';

function chosenRange() {
  const r = sessionStorage.getItem(RANGE_KEY);
  return RANGES.some(([k]) => k === r) ? r : '6h';
}

// The history of `range`; a failure other than a refused login is shown in place of the charts.
async function history(range) {
  try {
    const hist = await get(`/v1/history?since=${range}`);
    hist.rangeLabel = RANGES.find(([k]) => k === range)[1];
    return hist;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) throw e;
    return { error: e.message };
  }
}

function charts(hist, range) {
  return historySection(hist, range, async (r) => {
    sessionStorage.setItem(RANGE_KEY, r);
    const next = charts(await history(r), r);
    const old = document.getElementById('history');
    if (old) old.replaceWith(next);
  });
}

export async function overview(main, ctx) {
  const range = chosenRange();
  const [nodes, running, queue, hist] = await Promise.all([
    get('/v1/dashboard/map'), get(`/v1/jobs?state=running&limit=${LIST_CAP}`), get(`/v1/dashboard/queue?limit=${LIST_CAP}`),
    history(range),
  ]);
  // The map's compact rows: [name, spine, leaf, state, codes, utils, temps, jobs].
  nodes.nodes = nodes.nodes.map(([name, , , state, codes]) => ({ name, state, codes }));
  fill(main, 
    h('h2', {}, 'Overview'),
    summary(nodes.nodes, running.jobs, queue),
    charts(hist, range),
    h('div', { class: 'columns' }, pendingSection(queue), runningSection(running.jobs), nodesSection(nodes.nodes)));
  if (ctx) ctx.onJobs = () => overview(main, null);
}

function summary(nodes, running, queue) {
  const gpus = nodes.reduce((s, n) => s + n.codes.length, 0);
  const free = nodes.reduce((s, n) => s + freeOf(n), 0);
  const ready = nodes.filter((n) => n.state === 'ready').length;
  return h('p', { class: 'summary', id: 'summary' },
    `${nodes.length} nodes (${ready} ready), ${gpus} GPUs (${gpuCount(free)} free); `,
    `${running.length}${running.length >= LIST_CAP ? '+' : ''} running ${running.length === 1 ? 'job' : 'jobs'}, ${queue.total} pending.`);
}

function pendingSection(queue) {
  const items = queue.jobs.map((j) => h('li', { class: 'pending-job' },
    jobLink(j.id, j.name), ` — ${j.user}, ${gpuCount(j.gpus)} GPUs, #${j.position} in queue ${j.queue}`,
    h('p', { class: 'blocker' }, j.reason)));
  return h('section', { 'aria-labelledby': 'pending-h' },
    h('h3', { id: 'pending-h' }, `Pending jobs (${queue.total})`),
    items.length ? h('ul', { id: 'pending-list' }, items) : h('p', {}, 'No job is waiting.'),
    more(queue.total, items.length, '#/queue', 'the whole queue'));
}

function runningSection(jobs) {
  const items = jobs.map((j) => h('li', {}, jobLink(j.id, j.name),
    ` — ${j.user}, ${j.interactive ? 'interactive, ' : ''}${gpuCount(j.gpus)} GPUs on `, nodesOf(j)));
  return h('section', { 'aria-labelledby': 'running-h' },
    h('h3', { id: 'running-h' }, `Running jobs (${jobs.length}${jobs.length >= LIST_CAP ? '+' : ''})`),
    items.length ? h('ul', { id: 'running-list' }, items) : h('p', {}, 'No job is running.'));
}

function nodesOf(job) {
  const names = [...new Set((job.task_list || []).map((t) => t.node).filter(Boolean))];
  const out = [];
  names.slice(0, 4).forEach((n, i) => out.push(i ? ', ' : '', nodeLink(n)));
  if (names.length > 4) out.push(` and ${names.length - 4} more`);
  return out.length ? out : ['(starting)'];
}

function nodesSection(nodes) {
  const shown = nodes.slice(0, LIST_CAP);
  const items = shown.map((n) => {
    const odd = [...n.codes].map((c, g) => ('vsdq'.includes(c) ? `GPU ${g} ${STATES[c].name}` : '')).filter(Boolean);
    return h('li', {}, nodeLink(n.name), ` — ${n.state}, ${freeOf(n)}/${n.codes.length} GPUs free`,
      odd.length ? h('span', { class: 'conditions' }, '; ' + odd.join(', ')) : null);
  });
  return h('section', { 'aria-labelledby': 'nodes-h' },
    h('h3', { id: 'nodes-h' }, `Nodes (${nodes.length})`),
    h('ul', { id: 'node-list' }, items),
    more(nodes.length, shown.length, '#/map', 'every node on the cluster map'));
}

function freeOf(n) {
  return [...n.codes].filter((c) => c === 'f').length;
}

function more(total, shown, href, what) {
  return total > shown ? h('p', {}, `${total - shown} more: see `, h('a', { href }, what), '.') : null;
}
