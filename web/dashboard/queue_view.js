// The queue: every pending job in the scheduler's order with its blocker, its position in its
// queue and the backfill plan's estimated start. Rows are fetched a page at a time and only the
// rows in view are in the DOM, so 100,000 pending jobs cost one page.
import { get } from './api.js';
import { fill, h, jobLink, gpuCount, when, inHowLong } from './dom.js';

const PAGE = 200;
const ROW_H = 66;

export async function queueView(main, ctx) {
  const first = await get(`/v1/dashboard/queue?limit=${PAGE}`);
  const pages = new Map([[0, first.jobs]]);
  const body = h('div', { class: 'vrows', role: 'rowgroup' });
  const spacer = h('div', { class: 'vspacer' }, body);
  const scroller = h('div', { class: 'vscroll', tabindex: '0', 'aria-label': 'Pending jobs' }, spacer);
  const header = h('div', { class: 'qrow qhead', role: 'row' },
    ['Position', 'Job', 'User / queue', 'GPUs', 'Why it waits', 'Estimated start'].map((c) => h('span', { role: 'columnheader' }, c)));
  fill(main, h('h2', {}, 'Queue'),
    h('p', { id: 'queue-total' }, totalText(first.total)),
    h('div', { role: 'table', 'aria-label': 'Pending jobs', 'aria-rowcount': first.total }, header, scroller));
  let total = first.total;
  const render = () => renderRows(body, spacer, scroller, pages, total, fetchPage);
  const fetching = new Set();
  async function fetchPage(p) {
    if (fetching.has(p)) return;
    fetching.add(p);
    const page = await get(`/v1/dashboard/queue?offset=${p * PAGE}&limit=${PAGE}`);
    fetching.delete(p);
    pages.set(p, page.jobs);
    total = page.total;
    render();
  }
  scroller.addEventListener('scroll', render);
  render();
  ctx.onJobs = async () => {
    const fresh = await get(`/v1/dashboard/queue?limit=${PAGE}`);
    pages.clear();
    pages.set(0, fresh.jobs);
    total = fresh.total;
    document.getElementById('queue-total').textContent = totalText(total);
    render();
  };
}

function totalText(n) {
  return `${n} pending ${n === 1 ? 'job' : 'jobs'}, in the order the scheduler considers them.`;
}

function renderRows(body, spacer, scroller, pages, total, fetchPage) {
  spacer.style.height = `${total * ROW_H}px`;
  const top = Math.floor(scroller.scrollTop / ROW_H);
  const count = Math.ceil((scroller.clientHeight || 600) / ROW_H) + 2;
  const rows = [];
  for (let i = top; i < Math.min(total, top + count); i++) {
    const page = pages.get(Math.floor(i / PAGE));
    if (!page) {
      fetchPage(Math.floor(i / PAGE));
      rows.push(h('div', { class: 'qrow', role: 'row' }, h('span', {}, '…')));
      continue;
    }
    const j = page[i % PAGE];
    if (j) rows.push(row(j, i));
  }
  body.style.transform = `translateY(${top * ROW_H}px)`;
  body.replaceChildren(...rows);
}

function row(j, i) {
  const start = j.estimated_start_ms
    ? `${inHowLong(j.estimated_start_ms)} (${when(j.estimated_start_ms)})`
    : 'no estimate';
  return h('div', { class: 'qrow', role: 'row', 'aria-rowindex': i + 1, 'data-job': j.id },
    h('span', { role: 'cell', class: 'qpos' }, `#${j.position} in ${j.queue}`),
    h('span', { role: 'cell' }, jobLink(j.id, j.name)),
    h('span', { role: 'cell' }, `${j.user} / ${j.queue}`),
    h('span', { role: 'cell' }, gpuCount(j.gpus)),
    h('span', { role: 'cell', class: 'blocker', title: j.reason }, j.reason, j.rule ? h('small', {}, ` [${j.rule}]`) : null),
    h('span', { role: 'cell' }, start));
}
