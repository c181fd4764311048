// Services: each service's ready and desired replicas, why it has that many, its revisions and
// its request rate at the load balancer (docs/services.md). Redrawn every 2 s while open: the
// rate and the counts move without any job changing.
import { get } from './api.js';
import { fill, h, table, jobLink } from './dom.js';

const REDRAW_MS = 2000;

export async function servicesView(main, ctx) {
  const body = h('div', { id: 'services' });
  fill(main, h('h2', {}, 'Services'), body);
  const draw = async () => {
    const list = (await get('/v1/services')).services;
    const details = await Promise.all(list.map((s) => get(`/v1/services/${encodeURIComponent(s.name)}`)));
    body.replaceChildren(list.length ? servicesTable(details) : h('p', {},
      'No services. `hangar service create -f FILE` starts one (docs/services.md).'),
    ...details.map(revisions));
  };
  await draw();
  const timer = setInterval(() => draw().catch(() => {}), REDRAW_MS);
  ctx.cleanup.push(() => clearInterval(timer));
}

function rate(s) {
  const t = s.traffic;
  return t ? `${t.requests_per_second} req/s, ${t.in_flight} in flight` : '—';
}

function servicesTable(services) {
  return table('Services: replicas ready of desired, and traffic at their endpoints',
    ['Service', 'Endpoint', 'Ready / desired', 'Revision', 'Request rate', 'Why this many'],
    services.map((s) => [h('span', { 'data-service': s.name }, s.name), s.endpoint, `${s.ready} / ${s.desired}`,
      `${s.revision} (${s.rollout})${s.message ? `: ${s.message}` : ''}`, rate(s),
      s.scale || (s.options && s.options.autoscale ? 'autoscaled: at its minimum' : 'its file\'s count')]));
}

function revisions(s) {
  return h('section', { 'aria-label': `Service ${s.name}` },
    table(`${s.name}: revisions`, ['Revision', 'State', 'Command', 'Note'],
      s.revisions.slice().reverse().map((r) => [String(r.revision), r.state, (r.command || []).join(' '), r.note || ''])),
    table(`${s.name}: replicas`, ['Replica', 'Revision', 'State', 'Job', 'Address', 'Restarts', 'Tier', 'Why'],
      s.replicas.map((r) => [String(r.id), String(r.revision), r.state, r.job ? jobLink(r.job) : '—', r.address || '—',
        String(r.restarts), r.tier, r.why])));
}
