// One node and one job.
import { get, getText } from './api.js';
import { fill, h, table, jobLink, nodeLink, when, gpuCount } from './dom.js';
import { STATES } from './states.js';
import { sharesByGpu } from './map.js';

function events(list) {
  if (!list || !list.length) return h('p', {}, 'No events.');
  return h('ol', { class: 'events' }, list.map((e) => h('li', {}, h('time', {}, when(e.time_ms)), ` ${e.kind}: ${e.message}`)));
}

// A GPU's fractions or MIG instances: "job 12: 0.50", "job 7: MIG slices 0-3" (whole: "—").
function shareCell(list) {
  if (!list) return '—';
  return list.map((s, i) => [i ? ', ' : '', jobLink(s[1]), s[3] >= 0 ? `: MIG slices ${s[3]}-${s[3] + s[4] - 1}` : `: ${(s[2] / 1000).toFixed(2)}`]);
}

async function mapRows() {
  const m = await get('/v1/dashboard/map');
  return new Map(m.nodes.map((r) => [r[0], r]));
}

export async function nodeView(main, ctx, name) {
  const [node, rows] = await Promise.all([get(`/v1/nodes/${encodeURIComponent(name)}`), mapRows()]);
  const row = rows.get(name);
  const gpus = h('div', { id: 'node-gpus' });
  const draw = (r) => {
    const shares = r ? sharesByGpu(r) : new Map();
    gpus.replaceChildren(table('GPUs', ['GPU', 'State', 'Utilisation', 'Temperature', 'Shared by'],
      [...(r ? r[4] : '')].map((c, g) => [`GPU ${g}`, h('span', {}, h('span', { class: `swatch swatch-${c}`, 'aria-hidden': 'true' }), ' ', STATES[c].name),
        `${r[5][g]} %`, `${r[6][g]} °C`, shareCell(shares.get(g))])));
  };
  draw(row);
  fill(main, h('h2', {}, `Node ${node.name}`),
    h('p', { id: 'node-state' }, `${node.state}${node.reason ? ': ' + node.reason : ''} — ${node.model}, ${node.spine} / ${node.leaf}, `,
      `${gpuCount(node.gpus_free)}/${node.gpus} GPUs free, ${node.connected ? 'connected' : 'not connected'}, last heartbeat ${when(node.last_heartbeat_ms)}`),
    h('h3', {}, 'Conditions'),
    node.conditions.length ? h('ul', { id: 'node-conditions' }, node.conditions.map((c) => h('li', {}, c))) : h('p', {}, 'None: healthy.'),
    gpus,
    h('h3', {}, 'Jobs'),
    node.jobs.length ? h('ul', {}, node.jobs.map((id) => h('li', {}, jobLink(id)))) : h('p', {}, 'No jobs on this node.'),
    h('h3', {}, 'Health history and events (newest first)'), events(node.events));
  ctx.onGpus = (changes) => {
    const ch = changes.find((c) => c[1] === name);
    if (ch) draw(ch.slice(1));
  };
}

const LABEL = { pending: 'Waits: ', starting: 'Runs: ', running: 'Runs: ', preempting: 'Stops: ' };

// A session's people and idleness (GET /v1/jobs/ID/sessions): who is attached and how, when
// someone last typed, since when its GPUs are idle, and what its queue's idle policy will do.
const SESSION_KIND = { attach: () => 'attached', exec: (o) => `exec ${o.program}`, 'port-forward': (o) => `port forward to ${o.program}` };

function ago(ms) {
  if (!ms) return null;
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago` : `${(s / 3600).toFixed(1)} h ago`;
}

function sessionSection(s, job) {
  if (!s) return null;
  const people = s.sessions.map((o, i) => [i ? ', ' : '', h('strong', {}, o.user),
    ` (${(SESSION_KIND[o.kind] || (() => o.kind))(o)}, task ${o.task}, since ${when(o.since_ms)})`]);
  const p = s.idle_policy;
  const policy = p ? `its queue will ${p.action === 'stop' ? 'end' : p.action === 'notify' ? 'only report' : 'checkpoint and requeue'} it after ${Math.round(p.for_s / 60)} min with its GPUs below ${p.gpu_util_below} %${s.terminal ? ' and nothing typed' : ''}`
    : 'its queue has no idle policy';
  return h('section', { 'aria-labelledby': 'session-h' }, h('h3', { id: 'session-h' }, 'Session'),
    h('p', { id: 'job-session' }, people.length ? ['Attached: ', ...people.flat(), '.'] : 'Nobody is attached.'),
    h('p', { id: 'job-idleness' }, s.terminal ? `Last input ${ago(s.input_at_ms) || 'none yet'}; ` : '',
      !job.gpus ? 'no GPUs; ' : s.gpus_idle_since_ms ? `GPUs idle since ${when(s.gpus_idle_since_ms)} (${ago(s.gpus_idle_since_ms)}); ` : 'GPUs busy; ',
      policy, s.idle_warned ? '; those attached were warned.' : '.'));
}

export async function jobView(main, ctx, id) {
  const [job, ev] = await Promise.all([get(`/v1/jobs/${id}`), get(`/v1/events?subject=job/${id}&limit=200`).catch(() => ({ events: [] }))]);
  const rows = await mapRows();
  const session = job.interactive ? await get(`/v1/jobs/${id}/sessions`).catch(() => null) : null;
  const samples = new Map();  // "node/gpu" -> utilisation samples while the view is open
  const util = h('div', { id: 'job-util' });
  const sample = () => {
    for (const t of job.task_list) {
      const r = rows.get(t.node);
      for (const g of t.gpus) {
        const key = `${t.node}/${g}`;
        if (!samples.has(key)) samples.set(key, []);
        if (r) samples.get(key).push(r[5][g]);
      }
    }
    util.replaceChildren(table('GPU utilisation while this page is open', ['GPU', 'Now', 'Over time'],
      [...samples].map(([k, s]) => [k, `${s.length ? s[s.length - 1] : '—'} %`, spark(s)])));
  };
  sample();
  const logs = h('pre', { id: 'job-logs', tabindex: '0', 'aria-label': 'Logs of task 0' }, job.task_list.length ? '' : 'No task has run yet.');
  fill(main, h('h2', {}, `Job ${job.name} (#${job.id})${job.interactive ? ' — interactive session' : ''}`),
    h('p', { id: 'job-state' }, `${job.state} — ${job.user}, queue ${job.queue}, ${gpuCount(job.gpus)} GPUs in ${job.tasks} tasks, `,
      `attempt ${job.attempt}, ${job.restarts} restarts; submitted ${when(job.submitted_ms)}, started ${when(job.started_ms)}, ended ${when(job.ended_ms)}`),
    job.reason ? h('p', { class: 'blocker', id: 'job-reason' }, LABEL[job.state] || 'Ended: ', job.reason, job.reason_rule && job.reason_rule !== 'none' ? ` [${job.reason_rule}]` : '') : null,
    job.message ? h('p', {}, job.message) : null,
    sessionSection(session, job),
    table('Tasks', ['Task', 'Group', 'Node', 'GPUs', 'State', 'Exit'],
      job.task_list.map((t) => [String(t.index), t.group, t.node ? nodeLink(t.node) : '—', t.gpus.join(', '), t.state,
        // As `hangar job` shows it: an exit only once the task has ended.
        t.state !== 'ended' ? '—' : t.signal ? `signal ${t.signal}` : String(t.exit_code)])),
    util, h('h3', {}, 'Events'), events(ev.events), h('h3', {}, 'Logs (task 0)'), logs);
  ctx.onGpus = (changes) => {
    for (const c of changes) rows.set(c[1], c.slice(1));
    sample();
  };
  if (job.task_list.length) ctx.after.push(() => followLogs(job, logs, ctx));
}

// Logs stream after the first render (a request held open during load would keep a headless
// browser from finishing it); the view's change aborts the stream.
function followLogs(job, pre, ctx) {
  const ctrl = new AbortController();
  ctx.cleanup.push(() => ctrl.abort());
  const live = job.state === 'running' || job.state === 'starting' ? '&follow=1' : '';
  getText(`/v1/jobs/${job.id}/logs?task=0${live}`, ctrl.signal).then(async (res) => {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    pre.textContent = '';
    pre.dataset.placeholder = 'no output yet';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pre.textContent += dec.decode(value, { stream: true });
    }
  }).catch((e) => {
    if (e.name !== 'AbortError') pre.textContent += `\n[${e.message}]`;
  });
}

function spark(samples) {
  const c = h('canvas', { width: 120, height: 20, class: 'spark', role: 'img', 'aria-label': `utilisation samples: ${samples.slice(-10).join(', ')} %` });
  const g = c.getContext('2d');
  g.fillStyle = '#f4f6f8';
  g.fillRect(0, 0, 120, 20);
  g.strokeStyle = '#2f6db5';
  g.lineWidth = 2;
  g.beginPath();
  const s = samples.slice(-60);
  if (s.length === 1) s.push(s[0]);
  const step = 116 / (s.length - 1);
  s.forEach((v, i) => (i ? g.lineTo : g.moveTo).call(g, 2 + i * step, 18 - v * 0.16));
  g.stroke();
  return c;
}
