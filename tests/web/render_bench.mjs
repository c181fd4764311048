// The dashboard's render benchmark (issue 21, docs/benchmarks.md): a controller with 10,240 nodes
// x 8 GPUs played by `hangar swarm`, every GPU taken by a running job and 100,000 jobs pending;
// then, in Debian's chromium, the time from navigation to the first full render of the cluster
// map and of the queue view (the page's performance mark 'hangar:rendered'), split into the
// API answer (server and transfer) and the page's own work (parse, layout, draw). Prints figures.
//   node render_bench.mjs --hangar build/hangar [--nodes 10240] [--pending 100000] [--runs 5] [--shots DIR]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { api, launchBrowser, newPage, start, stop, waitFor } from './harness.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
}
const HANGAR = path.resolve(arg('--hangar', 'build/hangar'));
const NODES = Number(arg('--nodes', '10240'));
const PENDING = Number(arg('--pending', '100000'));
const RUNS = Number(arg('--runs', '5'));
const HOLD = process.argv.includes('--hold');
const SHOTS = arg('--shots', '');  // a folder for a screenshot of the map and the queue at this size  // set up, print the API's address, wait (to probe by hand)

function clusterYaml(nodes) {
  const perLeaf = Math.min(32, nodes);
  const spines = Math.max(1, Math.floor(nodes / 1024));
  const leaves = Math.max(1, Math.floor(nodes / spines / perLeaf));
  return `name: bench-${nodes}\nnode_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}\n` +
    `fat_tree: {spines: ${spines}, leaves_per_spine: ${leaves}, nodes_per_leaf: ${perLeaf}}\n`;
}

async function startFleet(dir) {
  fs.writeFileSync(path.join(dir, 'cluster.yaml'), clusterYaml(NODES));
  const ctl = start(HANGAR, ['controller', '--cluster', path.join(dir, 'cluster.yaml'), '--api', '127.0.0.1:0',
    '--agents', '127.0.0.1:0', '--store', `sqlite://${dir}/state.db`, '--port-file', path.join(dir, 'ports.json'),
    '--auth', 'none', '--insecure'], path.join(dir, 'controller.log'));
  const ports = await waitFor('the port file', () => fs.existsSync(path.join(dir, 'ports.json')) && JSON.parse(fs.readFileSync(path.join(dir, 'ports.json'))), 30000);
  const swarm = start(HANGAR, ['swarm', '--controller', `127.0.0.1:${ports.agents}`, '--cluster', path.join(dir, 'cluster.yaml'),
    '--task-duration', '36000s'], path.join(dir, 'swarm.log'));
  const base = `http://127.0.0.1:${ports.api}`;
  const a = api(base);
  await waitFor(`${NODES} nodes connected`, async () => (await a.get('/healthz')).agents >= NODES, 300000, 1000);
  return { ctl, swarm, base, a };
}

async function submit(base, yaml, count, user) {
  const r = await fetch(`${base}/v1/jobs?count=${count}`, { method: 'POST', body: yaml, headers: { 'X-Hangar-User': user } });
  if (r.status !== 201) throw new Error(`submit: HTTP ${r.status} ${await r.text()}`);
}

// Every GPU busy (one 8-GPU job per node, with a time limit so the backfill plan has estimates),
// then PENDING jobs that wait.
async function load(base, a) {
  const full = 'name: fill\ntime_limit: 10h\ntasks:\n  - {gpus: 8, command: [sleep, "36000"]}\n';
  for (let left = NODES; left > 0; left -= 10000) await submit(base, full, Math.min(10000, left), 'filler');
  await waitFor('every node busy', async () => (await a.get('/v1/dashboard/map')).nodes.every((n) => !n[4].includes('f')), 600000, 2000);
  const wait = 'name: sweep\ntasks:\n  - {gpus: 1, command: [sleep, "600"]}\n';
  for (let i = 0, left = PENDING; left > 0; i++, left -= 10000) await submit(base, wait, Math.min(10000, left), `user-${i % 10}`);
  await waitFor(`${PENDING} pending`, async () => (await a.get('/v1/dashboard/queue?limit=1')).total >= PENDING, 600000, 2000);
}

// One navigation: ms to the render mark, and the API request's time to its last byte.
async function measure(page, base, hash, view, apiPath) {
  await page.goto('about:blank');
  await page.goto(`${base}/${hash}`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction((v) => ['error', v].includes(document.body.dataset.rendered), { timeout: 120000 }, view);
  const shown = await page.evaluate(() => document.body.dataset.rendered);
  if (shown !== view) throw new Error(`the ${view} view failed: ${await page.$eval('main', (m) => m.innerText)}`);
  return page.evaluate((p) => {
    const mark = performance.getEntriesByName('hangar:rendered').pop();
    const res = performance.getEntriesByType('resource').filter((e) => e.name.includes(p)).pop();
    const nav = performance.getEntriesByType('navigation')[0];
    const drawn = performance.getEntriesByName('hangar:map-drawn').pop();
    const server = {};
    for (const t of (res && res.serverTiming) || []) server[t.name] = t.duration;
    return { render: mark.startTime, apiEnd: res ? res.responseEnd : NaN, apiStart: res ? res.startTime : NaN, dcl: nav.domContentLoadedEventEnd,
      drawn: drawn ? drawn.startTime : null, server, bytes: res ? res.encodedBodySize : NaN };
  }, apiPath);
}

// What bounds a view's API answer: the same request timed from here (no browser), beside
// /healthz (no state-thread work) and /v1/jobs?limit=1 (one round trip through the state thread,
// almost no work): the wait for the state thread shows as the second minus the first.
async function probe(base, paths, n = 5) {
  const out = {};
  for (const p of paths) {
    const ms = [];
    let bytes = 0;
    let enc = null;
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await fetch(base + p, { headers: { 'Accept-Encoding': 'gzip, deflate, br' } });  // as a browser asks
      bytes = (await r.arrayBuffer()).byteLength;
      enc = r.headers.get('content-encoding');
      ms.push(performance.now() - t0);
    }
    out[p] = { ms: median(ms), bytes, encoding: enc };
    console.log(`probe ${p}: median ${median(ms).toFixed(0)} ms (${ms.map((x) => x.toFixed(0)).join(', ')}), ${(bytes / 1e6).toFixed(2)} MB, ` +
      `content-encoding ${enc || 'none'}`);
  }
  return out;
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

async function bench(page, base, hash, view, apiPath) {
  const runs = [];
  for (let i = 0; i < RUNS + 1; i++) runs.push(await measure(page, base, hash, view, apiPath));
  runs.shift();  // the first warms the caches
  const render = median(runs.map((r) => r.render));
  const apiMs = median(runs.map((r) => r.apiEnd - r.apiStart));
  const after = median(runs.map((r) => r.render - r.apiEnd));
  const before = median(runs.map((r) => r.apiStart));
  const dcl = median(runs.map((r) => r.dcl));
  const drawnAfter = runs[0].drawn === null ? NaN : median(runs.map((r) => r.drawn - r.apiEnd));
  const server = {};
  for (const k of Object.keys(runs[0].server)) server[k] = median(runs.map((r) => r.server[k]));
  const serverText = Object.keys(server).length ? `; server (median): ${Object.entries(server).map(([k, v]) => `${k} ${v.toFixed(1)} ms`).join(', ')}` : '';
  console.log(`${view}: first full render ${render.toFixed(0)} ms (median of ${RUNS}; runs ${runs.map((r) => r.render.toFixed(0)).join(', ')}); ` +
    `page and scripts loaded at ${dcl.toFixed(0)} ms, API request sent at ${before.toFixed(0)} ms, its answer took ${apiMs.toFixed(0)} ms ` +
    `(${(runs[0].bytes / 1e3).toFixed(0)} kB on the wire); page work after the answer ${after.toFixed(0)} ms` +
    `${Number.isNaN(drawnAfter) ? '' : ` (canvas drawn ${drawnAfter.toFixed(0)} ms after the answer)`}${serverText}`);
  return { view, render, dcl, before, apiMs, after, drawnAfter, server };
}

async function updateCost(page, base) {
  // One feed update on the open map: how many nodes were redrawn (not the whole canvas).
  await page.goto(`${base}/#/map`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => document.body.dataset.rendered === 'map', { timeout: 120000 });
  await page.waitForFunction(() => document.getElementById('feed-status').dataset.state === 'live', { timeout: 30000 });
  const t0 = Date.now();
  await page.waitForFunction(() => Number(document.getElementById('map').dataset.updates || 0) > 0, { timeout: 60000 }).catch(() => null);
  return page.evaluate((ms) => ({ updates: Number(document.getElementById('map').dataset.updates || 0), waited: ms }), Date.now() - t0);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangar-render-bench-'));
let fleet = null;
let browser = null;
try {
  const t0 = Date.now();
  fleet = await startFleet(dir);
  await load(fleet.base, fleet.a);
  console.log(`fleet up: ${NODES} nodes x 8 GPUs, all busy, ${PENDING} pending (${((Date.now() - t0) / 1000).toFixed(0)} s to set up)`);
  if (HOLD) {
    console.log(`holding: ${fleet.base}`);
    await new Promise(() => {});
  }
  browser = await launchBrowser();
  const errors = [];
  const page = await newPage(browser, errors, 1600, 1000);
  process.on('exit', () => { if (errors.length) console.log(`console errors: ${errors.join('; ')}`); });
  const out = [await bench(page, fleet.base, '#/map', 'map', '/v1/dashboard/map'),
    await bench(page, fleet.base, '#/queue', 'queue', '/v1/dashboard/queue'),
    await bench(page, fleet.base, '#/', 'overview', '/v1/jobs?state=running')];
  const probes = await probe(fleet.base, ['/healthz', '/v1/jobs?limit=1', '/v1/dashboard/map', '/v1/dashboard/queue?limit=200']);
  if (SHOTS) {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const [hash, view] of [['#/map', 'map'], ['#/queue', 'queue']]) {
      await measure(page, fleet.base, hash, view, '/v1/dashboard/');
      await page.screenshot({ path: path.join(SHOTS, `bench-${view}.png`) });
    }
  }
  const upd = await updateCost(page, fleet.base);
  console.log(upd.updates ? `map updates from the feed: ${upd.updates} node(s) redrawn in the first update seen (of ${NODES})`
    : `map updates from the feed: none within 60 s (no row changed: the swarm's telemetry is steady)`);
  if (errors.length) console.log(`console errors: ${errors.join('; ')}`);
  console.log(JSON.stringify({ nodes: NODES, pending: PENDING, results: out, probes }));
} catch (e) {
  console.error(`FAILED: ${e.stack || e}; logs in ${dir}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  if (fleet) {
    await stop(fleet.swarm);
    await stop(fleet.ctl);
  }
  // Kept when it failed (its logs say why); else nothing is left behind.
  if (!process.exitCode) fs.rmSync(dir, { recursive: true, force: true });
}
