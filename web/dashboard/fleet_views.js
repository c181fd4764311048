// Queues and fair share; usage and waste.
import { get } from './api.js';
import { fill, h, table, jobLink, nodeLink } from './dom.js';

const num = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : '—');
// Shares as `hangar share` prints them: a percentage with one decimal.
const pct = (v) => (typeof v === 'number' ? `${(100 * v).toFixed(1)}%` : '—');

export async function queuesView(main, ctx) {
  const history = new Map();  // queue -> share samples while the page is open
  const body = h('div', { id: 'share' });
  const draw = async () => {
    const share = await get('/v1/share');
    for (const q of share.queues) {
      if (!history.has(q.name)) history.set(q.name, []);
      history.get(q.name).push(q.share);
    }
    body.replaceChildren(share.queues.length ? table('Queues: guarantees, use and fair share',
      ['Queue', 'Guarantee (GPUs)', 'In use', 'Borrowed', 'Lent', 'Share', 'Recent share', 'Share while open', 'Pending', 'Head job waits'],
      share.queues.map((q) => [`${'\u2003'.repeat(q.depth)}${q.name}`, num(q.guarantee_gpus), num(q.in_use_gpus),
        num(q.borrowed_gpus), num(q.lent_gpus), pct(q.share), pct(q.recent_share), trend(history.get(q.name)),
        String(q.pending), q.head_job ? [jobLink(q.head_job), ': ', q.head_waits] : '—']))
      : h('p', {}, 'No queues are configured: every job is in the default queue (`hangar queues apply` sets them up).'),
    h('p', {}, `Cluster: ${num(share.cluster_gpus)} GPUs.`));
  };
  fill(main, h('h2', {}, 'Queues and fair share'), body);
  await draw();
  ctx.onJobs = draw;
}

function trend(samples) {
  const s = (samples || []).slice(-8);
  return s.map(num).join(' → ');
}

export async function usageView(main, ctx) {
  const [byQueue, byUser, map] = await Promise.all([
    get('/v1/usage?by=queue&since=7d'), get('/v1/usage?by=user&since=7d'), get('/v1/dashboard/map')]);
  const cols = (key) => [key, 'GPU-hours', 'Guaranteed', 'Opportunistic', 'Idle (allocated)', 'Lost to preemption', 'Jobs'];
  const rows = (u, key) => u.rows.map((r) => [r[key], num(r.gpu_hours), num(r.guaranteed_gpu_hours),
    num(r.opportunistic_gpu_hours), num(r.idle_gpu_hours), num(r.lost_to_preemption_gpu_hours), String(r.jobs)]);
  fill(main, h('h2', {}, 'Usage and waste (last 7 days)'),
    idleAlerts(map.nodes),
    table('GPU-hours by queue', cols('Queue'), rows(byQueue, 'queue')),
    table('GPU-hours by user', cols('User'), rows(byUser, 'user')));
}

// Jobs holding GPUs that sit idle now (utilisation under 5 %), from the map's cells.
function idleAlerts(nodes) {
  const idle = [];
  for (const [name, , , , codes, utils, , jobs] of nodes) {
    const gpus = [...codes].map((c, g) => (c === 'i' ? g : -1)).filter((g) => g >= 0);
    if (gpus.length) idle.push([nodeLink(name), gpus.map((g) => `GPU ${g} (${utils[g]} %)`).join(', '), jobs.map((id, i) => [i ? ', ' : '', jobLink(id)])]);
  }
  return h('section', { id: 'idle-alerts', 'aria-labelledby': 'idle-h' }, h('h3', { id: 'idle-h' }, `Alerts: allocated GPUs sitting idle (${idle.length} nodes)`),
    idle.length ? table('Nodes with allocated but idle GPUs', ['Node', 'Idle GPUs', 'Jobs on the node'], idle.slice(0, 500)) : h('p', {}, 'No allocated GPU is idle.'));
}
