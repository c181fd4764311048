// The dashboard: a hash router over the views, the login (with --auth tokens), and the live feed,
// opened once the first view has rendered.
import { get, token, setToken, openFeed, ApiError } from './api.js';
import { h } from './dom.js';
import { overview } from './overview.js';
import { mapView } from './map_view.js';
import { queueView } from './queue_view.js';
import { nodeView, jobView } from './detail_views.js';
import { queuesView, usageView } from './fleet_views.js';
import { servicesView } from './services_view.js';
import { goodputView, jobGoodputView } from './goodput_view.js';

const ROUTES = [
  [/^#?\/?$/, 'overview', (m, c) => overview(m, c)],
  [/^#\/map$/, 'map', (m, c) => mapView(m, c)],
  [/^#\/queue$/, 'queue', (m, c) => queueView(m, c)],
  [/^#\/queues$/, 'queues', (m, c) => queuesView(m, c)],
  [/^#\/usage$/, 'usage', (m, c) => usageView(m, c)],
  [/^#\/services$/, 'services', (m, c) => servicesView(m, c)],
  [/^#\/goodput$/, 'goodput', (m, c) => goodputView(m, c)],
  [/^#\/goodput\/(\d+)$/, 'job-goodput', (m, c, a) => jobGoodputView(m, c, a)],
  [/^#\/node\/(.+)$/, 'node', (m, c, a) => nodeView(m, c, decodeURIComponent(a))],
  [/^#\/job\/(\d+)$/, 'job', (m, c, a) => jobView(m, c, a)],
];

let ctx = null;
let stopFeed = null;

function newContext() {
  return { onGpus: null, onJobs: null, feedSince: undefined, after: [], cleanup: [], rerender: () => render() };
}

async function render() {
  if (ctx) ctx.cleanup.forEach((f) => f());
  ctx = newContext();
  const mine = ctx;
  const main = document.getElementById('main');
  const hash = location.hash || '#/';
  const route = ROUTES.find(([re]) => re.test(hash));
  document.body.dataset.rendered = '';
  markNav(hash);
  try {
    if (!route) throw new ApiError(404, `no such view: ${hash}`);
    const [re, name, view] = route;
    const arg = hash.match(re)[1];
    await view(main, mine, arg);
    if (mine !== ctx) return;
    document.title = `Hangar — ${main.querySelector('h2') ? main.querySelector('h2').textContent : name}`;
    document.body.dataset.rendered = name;
    performance.mark('hangar:rendered', { detail: name });
    mine.after.forEach((f) => f());
    startFeed(mine.feedSince);
  } catch (e) {
    if (mine !== ctx) return;
    if (e instanceof ApiError && e.status === 401) return login(main, e.message);
    main.replaceChildren(h('h2', {}, 'Something went wrong'), h('p', { class: 'error', role: 'alert' }, e.message));
    document.body.dataset.rendered = 'error';
  }
}

function markNav(hash) {
  for (const a of document.querySelectorAll('nav a')) {
    const here = a.getAttribute('href') === hash || (hash === '#/' && a.getAttribute('href') === '#/');
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function login(main, why) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, size: 50 });
  const form = h('form', { id: 'login' },
    h('h2', {}, 'Log in'),
    h('p', {}, token() ? `The token was refused: ${why}` : `This controller asks for a token. ${why}`),
    h('label', { for: 'token' }, 'Token '), input, ' ', h('button', { type: 'submit' }, 'Log in'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    checkWho().then(render);
  });
  main.replaceChildren(form);
  document.body.dataset.rendered = 'login';
  input.focus();
}

async function checkWho() {
  const who = document.getElementById('who');
  try {
    const w = await get('/v1/whoami');
    who.replaceChildren(`${w.user || 'anonymous'} (${w.role || 'admin'})`,
      token() ? h('button', { type: 'button', id: 'logout', onclick: () => { setToken(''); location.reload(); } }, 'Log out') : '');
  } catch (e) {
    who.textContent = '';
  }
}

// The live feed opens after the first render. A view that drew the map from a snapshot
// (ctx.feedSince) has it reopened from that snapshot, so that no change in between is lost;
// else it starts from now and stays open across views.
let feedSince;
function startFeed(since) {
  if (stopFeed && (since === undefined || since === feedSince)) return;
  if (stopFeed) stopFeed();
  feedSince = since;
  const status = document.getElementById('feed-status');
  const path = since === undefined ? '/v1/dashboard/feed' : `/v1/dashboard/feed?since=${since}`;
  stopFeed = openFeed(path, (name, data) => {
    if (name === 'gpus' && ctx && ctx.onGpus) ctx.onGpus(data.nodes);
    if (name === 'jobs' && ctx && ctx.onJobs) ctx.onJobs(data.generation);
  }, (state) => {
    status.textContent = state === 'live' ? 'Live' : 'Reconnecting…';
    status.dataset.state = state;
  });
}

// A page left for another keeps its feed open if the browser keeps the page (the back-forward
// cache): six such pages take every connection the browser allows to this host, and the next
// page never loads. Close it when the page is hidden; draw afresh if the page comes back.
function closeFeed() {
  if (stopFeed) stopFeed();
  stopFeed = null;
  feedSince = undefined;
}

// A link may carry the token in its fragment (/#token=hgr_...; a fragment never reaches a
// server or its logs): it is kept for this tab and taken out of the address bar and history.
function tokenFromLink() {
  const m = location.hash.match(/^#token=([A-Za-z0-9_]+)$/);
  if (!m) return false;
  setToken(m[1]);
  history.replaceState(null, '', location.pathname + location.search + '#/');
  return true;
}

async function start() {
  tokenFromLink();
  window.addEventListener('pagehide', closeFeed);
  window.addEventListener('pageshow', (e) => { if (e.persisted) render(); });
  const header = document.querySelector('header');
  header.append(h('span', { id: 'who' }));
  checkWho();  // beside the first view, not before it
  window.addEventListener('hashchange', () => {
    if (tokenFromLink()) checkWho();
    render();
  });
  await render();
}

start();
