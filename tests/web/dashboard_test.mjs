// The dashboard against a live `hangar dev` (4 nodes x 8 fake GPUs, its per-run token) on loopback,
// in Debian's chromium (issue 21, "Must show"): the first page renders fully under
// `chromium --dump-dom --virtual-time-budget=8000`; every view opens and shows the cluster's own
// facts (node names, a waiting job's blocker and queue position, a fault injected on a fake GPU
// turning its map cell suspect through the live feed); no console errors; a screenshot of each
// view under --out; the overview's charts draw the controller's history within 1 s of load; the
// services page shows a service's replicas, revision and request rate through its endpoint.
//   node dashboard_test.mjs --hangar build/hangar --out build/dashboard-screenshots
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { api, devToken, dumpDom, freePortPair, launchBrowser, newPage, start, stop, waitFor } from './harness.mjs';

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
}
const HANGAR = path.resolve(arg('--hangar', 'build/hangar'));
const OUT = path.resolve(arg('--out', 'build/dashboard-screenshots'));

const BLOCKED = 'name: big-pretrain\ntasks:\n  - {replicas: 4, gpus: 8, command: [sleep, "1000"]}\n';
const BLOCKED_2 = 'name: second-in-line\ntasks:\n  - {replicas: 4, gpus: 8, command: [sleep, "1000"]}\n';
const RUNNING = 'name: finetune-a\ntime_limit: 2h\ntasks:\n  - {gpus: 8, command: [sleep, "1000"]}\n';
// A service of one replica, a stdlib HTTP server on the port Hangar gives it.
const WEB_SERVICE = 'name: web\nservice: {replicas: 1, readiness: {http: /, interval: 250ms}}\n'
  + 'tasks:\n  - {name: server, cpu: 1, command: [sh, -c, \'exec python3 -m http.server "$HANGAR_PORT"\']}\n';
const HALF = 'name: half-gpu\ntime_limit: 2h\ntasks:\n  - {gpu_fraction: 0.5, gpu_memory: 20Gi, command: [sleep, "1000"]}\n';

const checks = [];
async function check(name, fn) {
  const t0 = Date.now();
  await fn();
  checks.push(name);
  console.log(`ok - ${name} (${Date.now() - t0} ms)`);
}

async function startCluster(dir) {
  const port = await freePortPair();
  const base = `http://127.0.0.1:${port}`;
  const dev = start(HANGAR, ['dev', '--port', String(port), '--dir', dir], path.join(dir, 'dev.log'));
  const token = await devToken(dir);
  const a = api(base, token);
  await waitFor('4 ready nodes', async () => {
    const n = await a.get('/v1/nodes');
    return n.nodes.length === 4 && n.nodes.every((x) => x.state === 'ready' && x.connected);
  }, 60000);
  return { dev, base, a, token };
}

// Where a job's first task runs: its node and first GPU.
async function placeOf(a, id) {
  const t = (await a.get(`/v1/jobs/${id}`)).task_list[0];
  return { node: t.node, gpu: t.gpus[0] };
}

// A fault script for a fake GPU, written beside and renamed into place (docs/health.md).
async function inject(dir, node, script) {
  const agentDir = path.join(dir, 'agents', node);
  fs.writeFileSync(path.join(agentDir, 'faults.tmp'), script);
  fs.renameSync(path.join(agentDir, 'faults.tmp'), path.join(agentDir, 'inject-faults.yaml'));
  await waitFor(`${node} to apply the fault script`, () => fs.existsSync(path.join(agentDir, 'inject-faults.yaml.applied')), 15000);
}

// The colour of a GPU's cell on the map canvas, read from its pixels (`dy` px from the cell's top).
// The map's count of nodes the feed redrew, once it has not moved for 2.5 s (the feed sends
// at most once a second).
async function quietUpdates(page) {
  const count = () => page.$eval('#map', (c) => Number(c.dataset.updates || 0));
  let last = await count();
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 2500));
    const now = await count();
    if (now === last) return now;
    last = now;
  }
  throw new Error(`the map never stopped redrawing (${last} node updates)`);
}

async function cellColour(page, node, gpu, dy = 2) {
  return page.evaluate((nodeName, g, down) => {
    const m = window.hangarMap;
    const k = m.rows.findIndex((r) => r[0] === nodeName);
    const r = m.rects[k];
    const x = r.x + (g % 4) * m.cell + 2;
    const y = r.y + Math.floor(g / 4) * m.cell + down;
    const [red, green, blue] = m.canvas.getContext('2d').getImageData(x, y, 1, 1).data;
    return `#${[red, green, blue].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
  }, node, gpu, dy);
}

// Per chart of the overview: how many points the history gave it, and how many vertices its
// lines have (an SVG path's M and L commands), by series.
async function chartsDrawn(page) {
  return page.$$eval('svg.chart', (svgs) => Object.fromEntries(svgs.map((svg) => {
    const paths = [...svg.querySelectorAll('path.series')];
    const vertices = paths.reduce((n, p) => n + ((p.getAttribute('d') || '').match(/[ML]/g) || []).length, 0);
    return [svg.id, { points: Number(svg.dataset.points), vertices, series: paths.map((p) => p.dataset.series) }];
  })));
}

async function open(page, base, hash, view) {
  await page.goto(`${base}/${hash}`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction((v) => document.body.dataset.rendered === v, { timeout: 20000 }, view);
}

async function shot(page, name) {
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  console.log(`screenshot: ${file}`);
}

async function run(dir) {
  const { dev, base, a, token } = await startCluster(dir);
  const running = await a.post('/v1/jobs', RUNNING);
  await waitFor('finetune-a running', async () => (await a.get(`/v1/jobs/${running.id}`)).state === 'running', 30000);
  const half = await a.post('/v1/jobs', HALF);
  await waitFor('half-gpu running', async () => (await a.get(`/v1/jobs/${half.id}`)).state === 'running', 30000);
  // Before the blocked jobs: a replica (no time limit) is not backfilled past their reservation.
  await a.post('/v1/services', WEB_SERVICE);
  await waitFor('the service web ready', async () => (await a.get('/v1/services/web')).ready === 1, 60000);
  const blocked = await a.post('/v1/jobs', BLOCKED);
  const blocked2 = await a.post('/v1/jobs', BLOCKED_2);
  const why = await waitFor('a blocker for big-pretrain', async () => {
    const e = await a.get(`/v1/jobs/${blocked.id}/explain`);
    return e.reason && e.rule !== 'none' && e.reason !== 'waiting for the next scheduling cycle' ? e.reason : null;
  });
  console.log(`big-pretrain waits: ${why}`);

  await check('the first page renders fully under chromium --dump-dom --virtual-time-budget=8000', async () => {
    const dom = await dumpDom(`${base}/#token=${token}`);
    assert.match(dom, /data-rendered="overview"/, 'the overview did not finish rendering');
    for (const n of ['node-1', 'node-2', 'node-3', 'node-4', 'finetune-a', 'big-pretrain', 'second-in-line']) assert.ok(dom.includes(n), `${n} missing from the dumped DOM`);
    assert.ok(dom.includes(why), `the blocker sentence "${why}" is missing from the dumped DOM`);
  });

  const browser = await launchBrowser();
  const errors = [];
  const page = await newPage(browser, errors);
  try {
    await check('hangar dev: the page asks for its token, takes it from a link, and drops it from the address', async () => {
      await open(page, base, '#/', 'login');
      const said = await page.$eval('#login', (f) => f.innerText);
      assert.ok(said.includes(`cat ${path.join(dir, 'dev-token')}`), said);
      await open(page, base, `#token=${token}`, 'overview');
      assert.equal(await page.evaluate(() => location.hash), '#/');
      // Only the login page's 401 may be in the console.
      errors.splice(0, errors.length, ...errors.filter((e) => !e.includes('401')));
    });
    await check('a page of another loopback origin cannot submit a job (fetch no-cors, text/plain)', async () => {
      await crossOriginAttack(browser, base, a);
    });
    await check('overview: nodes, running and pending jobs, blockers', async () => {
      await open(page, base, '#/', 'overview');
      const text = await page.$eval('main', (m) => m.innerText);
      for (const n of ['node-1', 'node-4', 'finetune-a', 'big-pretrain', why, '#1 in queue', '#2 in queue']) assert.ok(text.includes(n), `overview lacks "${n}"`);
      await shot(page, 'overview');
    });
    await check('overview: charts of utilisation, queue length and waste from the history; a range selector', async () => {
      // hangar dev samples every 10 s; the 6 hours the page shows are in steps of a minute: wait
      // for a whole step since the jobs above were placed.
      await waitFor('a step of samples with the running jobs', async () => {
        const last = (await a.get('/v1/history?since=6h')).points.at(-1);
        return last && last.allocated === 8.5 && last.pending === 2;
      }, 120000, 1000);
      await page.goto('about:blank');  // the overview above is drawn from before that sample
      await open(page, base, '#/', 'overview');
      const drawn = await chartsDrawn(page);
      assert.deepEqual(Object.keys(drawn).sort(), ['chart-queue', 'chart-utilisation', 'chart-waste'], JSON.stringify(drawn));
      assert.deepEqual(drawn['chart-utilisation'].series, ['busy', 'allocated']);
      assert.deepEqual(drawn['chart-queue'].series, ['pending', 'running']);
      assert.deepEqual(drawn['chart-waste'].series, ['idle']);
      // The latest point: 8.5 of 32 GPUs allocated (27%) and busy, two jobs pending.
      const captions = await page.$$eval('#history figcaption', (fs) => fs.map((f) => f.innerText));
      assert.match(captions[0], /latest: busy 27%, allocated 27%/, captions[0]);
      assert.match(captions[1], /latest: pending 2 jobs/, captions[1]);
      await page.click('button.range[data-range="24h"]');
      await page.waitForFunction(() => document.querySelector('button.range[data-range="24h"]').getAttribute('aria-pressed') === 'true',
        { timeout: 5000 });
      assert.match(await page.$eval('#history-h', (e) => e.innerText), /24 hours/);
      assert.ok((await chartsDrawn(page))['chart-queue'].vertices >= 1);
      await page.click('button.range[data-range="6h"]');
      await page.waitForFunction(() => document.querySelector('button.range[data-range="6h"]').getAttribute('aria-pressed') === 'true',
        { timeout: 5000 });
    });
    await check('queue: blocker text and position in its queue', async () => {
      await open(page, base, '#/queue', 'queue');
      const rows = await page.$$eval('.qrow[data-job]', (rs) => rs.map((r) => r.innerText));
      assert.equal(rows.length, 2, rows.join('\n'));
      assert.match(rows[0], /#1 in default/);
      assert.ok(rows[0].includes('big-pretrain') && rows[0].includes(why), rows[0]);
      assert.match(rows[1], /#2 in default/);
      assert.ok(rows[1].includes('second-in-line'), rows[1]);
      await shot(page, 'queue');
    });
    await check('cluster map: compressed answer (gzip, not Brotli), one snapshot shared with the feed', async () => {
      const r = await fetch(`${base}/v1/dashboard/map`, { headers: { 'Accept-Encoding': 'gzip, deflate, br', Authorization: `Bearer ${token}` } });
      assert.equal(r.headers.get('content-encoding'), 'gzip');
      assert.match(r.headers.get('server-timing') || '', /collect;dur=[\d.]+.*encode;dur=/);
      const m = await r.json();
      assert.equal(m.nodes.length, 4);
      assert.ok(Number.isInteger(m.snapshot) && m.snapshot > 0, `snapshot ${m.snapshot}`);
      assert.equal(m.nodes[0].length, 9, JSON.stringify(m.nodes[0]));
      const q = await fetch(`${base}/v1/dashboard/queue`, { headers: { 'Accept-Encoding': 'gzip, deflate, br', Authorization: `Bearer ${token}` } });
      assert.ok([null, 'gzip'].includes(q.headers.get('content-encoding')), `the queue is sent ${q.headers.get('content-encoding')}`);
      assert.equal((await q.json()).total, 2);
      for (const f of ['/ui/app.js', '/ui/style.css']) {
        const res = await fetch(base + f, { headers: { 'Accept-Encoding': 'gzip, deflate, br' } });
        assert.equal(res.status, 200, f);
        assert.equal(res.headers.get('content-encoding'), 'gzip', `${f} is not sent gzipped`);
        assert.ok((await res.text()).length > 1000, f);
      }
      const plain = await fetch(`${base}/ui/app.js`, { headers: { 'Accept-Encoding': 'identity' } });
      assert.equal(plain.headers.get('content-encoding'), null);
      assert.match(await plain.text(), /^\/\/ The dashboard/);
    });
    await check('cluster map: cells coloured by state; a fractional GPU drawn by its share; a fault on a fake GPU turns its cell suspect live', async () => {
      await open(page, base, '#/map', 'map');
      const list = await page.$eval('#map-text', (e) => e.innerText);
      for (const n of ['leaf-0', 'leaf-1', 'spine-0']) assert.ok(list.includes(n), `map text lacks ${n}`);
      const runNode = (await placeOf(a, running.id)).node;
      const busy = await cellColour(page, runNode, 0);
      assert.ok(busy === '#2f6db5' || busy === '#f2c14e', `the running job's GPU is drawn ${busy}, not allocated`);
      // The half GPU: its cell's lower half in use, its upper half free; named in the text.
      const frac = await placeOf(a, half.id);
      const cellPx = await page.evaluate(() => window.hangarMap.cell - 2);
      const low = await cellColour(page, frac.node, frac.gpu, cellPx - 4);
      assert.ok(low === '#2f6db5' || low === '#f2c14e', `the half GPU's lower half is drawn ${low}, not in use`);
      assert.equal(await cellColour(page, frac.node, frac.gpu, 4), '#f4f6f8', 'the half GPU\'s upper half is not drawn free');
      const fracLine = await page.$eval(`#map-text li[data-node="${frac.node}"]`, (e) => e.innerText);
      assert.ok(fracLine.includes(`GPU ${frac.gpu} shared: job ${half.id} 0.50`), fracLine);
      const spare = ['node-1', 'node-2', 'node-3', 'node-4'].find((n) => n !== runNode && n !== frac.node);
      assert.equal(await cellColour(page, spare, 5), '#f4f6f8', 'a free cell is not drawn free');
      const timing = await page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/dashboard/map'))
        .map((e) => ({ names: e.serverTiming.map((t) => t.name), encoded: e.encodedBodySize, decoded: e.decodedBodySize })).pop());
      assert.ok(timing && timing.names.includes('collect') && timing.encoded < timing.decoded, JSON.stringify(timing));
      await page.waitForFunction(() => document.getElementById('feed-status').dataset.state === 'live', { timeout: 10000 });
      // The snapshot the page drew may predate the agents' first telemetry (utilisation and
      // temperature of the running jobs' GPUs); let the feed bring it up to date, then count
      // only what the fault makes it redraw.
      const before = await quietUpdates(page);
      await inject(dir, spare, '- {gpu: 5, kind: pcie_downgrade, gen: 3, width: 4}\n');
      await page.waitForFunction((n) => {
        const li = document.querySelector(`#map-text li[data-node="${n}"]`);
        return li && li.innerText.includes('GPU 5 suspect');
      }, { timeout: 20000 }, spare);
      assert.equal(await cellColour(page, spare, 5), '#e8772e', 'the suspect GPU is not drawn suspect');
      assert.equal(await cellColour(page, spare, 4), '#f4f6f8', 'its healthy neighbour changed');
      const updates = await page.$eval('#map', (c) => Number(c.dataset.updates || 0)) - before;
      assert.ok(updates >= 1 && updates < 4, `the feed redrew ${updates} nodes for one fault; expected only the changed node(s)`);
      await page.focus('#map');
      await page.keyboard.press('ArrowRight');
      const tip = await page.$eval('#map-tip', (e) => e.innerText);
      assert.match(tip, /^node-2 \(spine-0 \/ leaf-0, ready\): /, `keyboard selection: ${tip}`);
      const suspect = await page.$eval(`#map-text li[data-node="${spare}"]`, (e) => e.innerText);
      assert.match(suspect, /GPU 5 suspect/);
      await shot(page, 'map');
    });
    await check('node view: conditions name the suspect GPU; a shared GPU names its job and share', async () => {
      const spare = (await a.get('/v1/nodes')).nodes.find((n) => n.conditions.some((c) => c.includes('GPU 5 suspect'))).name;
      await open(page, base, `#/node/${spare}`, 'node');
      const text = await page.$eval('main', (m) => m.innerText);
      assert.ok(text.includes(`Node ${spare}`) && text.includes('GPU 5 suspect'), text);
      assert.match(text, /GPU 5\s+suspect/);
      await shot(page, 'node');
      const frac = await placeOf(a, half.id);
      await open(page, base, `#/node/${frac.node}`, 'node');
      const shared = await page.$eval('#node-gpus', (e) => e.innerText);
      assert.match(shared, new RegExp(`GPU ${frac.gpu}\\s.*#${half.id}: 0\\.50`), shared);
    });
    await check('job view: tasks, nodes and GPUs, events, logs', async () => {
      await open(page, base, `#/job/${running.id}`, 'job');
      const text = await page.$eval('main', (m) => m.innerText);
      assert.ok(text.includes('finetune-a') && text.includes('running'), text);
      assert.match(text, /0, 1, 2, 3, 4, 5, 6, 7/);
      await shot(page, 'job');
      await open(page, base, `#/job/${blocked.id}`, 'job');
      assert.ok((await page.$eval('#job-reason', (e) => e.innerText)).includes(why));
    });
    await check('every page shows its data within 1 s of load, not "Loading…"', async () => {
      const firstNode = 'node-1';
      for (const [hash, view] of [['#/', 'overview'], [`#/job/${running.id}`, 'job'], [`#/node/${firstNode}`, 'node'],
                                  ['#/queue', 'queue'], ['#/queues', 'queues'], ['#/usage', 'usage']]) {
        await page.goto('about:blank');
        await page.goto(`${base}/${hash}`, { waitUntil: 'domcontentloaded' });
        await new Promise((r) => setTimeout(r, 1000));
        const state = await page.evaluate(() => ({
          rendered: document.body.dataset.rendered,
          loading: !!document.getElementById('loading') && document.getElementById('loading').offsetParent !== null,
        }));
        assert.equal(state.rendered, view, `${hash} had not rendered its data 1 s after load (rendered=${state.rendered})`);
        assert.ok(!state.loading, `${hash} still shows "Loading…" 1 s after load`);
        if (view === 'overview') {
          const drawn = await chartsDrawn(page);
          for (const c of ['chart-utilisation', 'chart-queue', 'chart-waste']) {
            assert.ok(drawn[c] && drawn[c].points >= 1 && drawn[c].vertices >= 1,
              `the overview's ${c} had drawn no data 1 s after load: ${JSON.stringify(drawn)}`);
          }
        }
      }
      await page.goto(`${base}/#/job/${running.id}`, { waitUntil: 'domcontentloaded' });
      await page.waitForFunction(() => document.body.dataset.rendered === 'job', { timeout: 20000 });
      const cells = await page.$$eval('table tr', (rs) => rs.map((r) => r.innerText));
      assert.ok(!cells.some((c) => /\trunning\t0$/.test(c)), `a running task shows exit 0:\n${cells.join('\n')}`);
    });
    await check('queues and fair share; usage and waste', async () => {
      await open(page, base, '#/queues', 'queues');
      assert.ok((await page.$eval('main', (m) => m.innerText)).includes('Cluster: 32 GPUs'));
      await shot(page, 'queues');
      await open(page, base, '#/usage', 'usage');
      const text = await page.$eval('main', (m) => m.innerText);
      assert.ok(text.includes('GPU-hours by queue') && text.includes('default'), text);
      await shot(page, 'usage');
    });
    await check('services: ready of desired replicas, revisions and the request rate through the endpoint', async () => {
      const endpoint = (await a.get('/v1/services/web')).endpoint;
      let sending = true;
      const load = (async () => {
        while (sending) {
          await fetch(`http://${endpoint}/`).then((r) => r.text()).catch(() => {});
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      try {
        await open(page, base, '#/services', 'services');
        await page.waitForFunction(() => /[1-9]\d* req\/s/.test(document.getElementById('services').innerText), { timeout: 20000 });
        const row = await page.$eval('[data-service="web"]', (e) => e.closest('tr').innerText);
        assert.match(row, new RegExp(`^web\t${endpoint.replace(/\./g, '\\.')}\t1 / 1\t1 \\(complete\\)\t[1-9]\\d* req/s`), row);
        const text = await page.$eval('main', (m) => m.innerText);
        assert.ok(text.includes('web: revisions') && text.includes('web: replicas'), text);
        await shot(page, 'services');
      } finally {
        sending = false;
        await load;
      }
    });
    await check('goodput: the cluster, and a job interrupted once with its time line', async () => {
      await a.post(`/v1/jobs/${running.id}/requeue`, '');
      await waitFor('finetune-a running again', async () => {
        const j = await a.get(`/v1/jobs/${running.id}`);
        return j.state === 'running' && j.attempt === 1;
      }, 60000);
      await open(page, base, '#/goodput', 'goodput');
      const text = await page.$eval('main', (m) => m.innerText);
      assert.match(text, /Cluster: ETTR \d+\.\d% .* across \d+ jobs that started/, text);
      assert.ok(text.includes('finetune-a') && text.includes('user'), text);  // `requeue`'s cause
      const parts = await page.$$eval(`a[href="#/goodput/${running.id}"] rect`, (rs) => rs.map((r) => r.dataset.part));
      assert.ok(parts.includes('productive') && parts.includes('requeue_wait'), parts.join());
      await shot(page, 'goodput');
      await open(page, base, `#/goodput/${running.id}`, 'job-goodput');
      const job = await page.$eval('main', (m) => m.innerText);
      assert.match(job, /running: ETTR \d+\.\d% over/, job);
      assert.ok(job.includes('requeued by'), job);
      await shot(page, 'goodput-job');
    });
    await check('a session: who has it open, its last input and its idleness', async () => {
      // `hangar run` on a CPU task for 2 minutes (it fits beside the blocked jobs' hold), and a
      // program beside it with `hangar exec`: a session open on it.
      const env = { HANGAR_TOKEN: token };
      const cli = start(HANGAR, ['run', '--server', base, '--gpus', '0', '--time', '2m', '--name', 'notebook', '--', 'sleep', '120'],
        path.join(dir, 'run.log'), env);
      let exec = null;
      try {
        const id = await waitFor('the session running', async () => {
          const j = (await a.get('/v1/jobs?name=notebook&limit=5')).jobs.find((x) => x.interactive && x.state === 'running');
          return j ? j.id : 0;
        }, 60000);
        exec = start(HANGAR, ['exec', '--server', base, String(id), '--', 'sleep', '100'], path.join(dir, 'exec.log'), env);
        await waitFor('the exec open', async () => (await a.get(`/v1/jobs/${id}/sessions`)).sessions.length > 0, 30000);
        await open(page, base, `#/job/${id}`, 'job');
        const title = await page.$eval('main h2', (e) => e.innerText);
        assert.match(title, /notebook .* interactive session/, title);
        const who = await page.$eval('#job-session', (e) => e.innerText);
        assert.match(who, /^Attached: \S+ \(exec sleep, task 0, since \d{4}-/, who);
        const idle = await page.$eval('#job-idleness', (e) => e.innerText);
        assert.match(idle, /no GPUs; its queue has no idle policy\./, idle);
        await shot(page, 'job-session');
        await open(page, base, '#/', 'overview');
        assert.match(await page.$eval('#running-list', (e) => e.innerText), /notebook \(#\d+\) — \S+, interactive, /);
      } finally {
        if (exec) await stop(exec);
        await stop(cli);
      }
    });
    await check('no console errors', async () => {
      assert.deepEqual(errors, []);
    });
  } finally {
    await browser.close();
    await stop(dev);
  }
}

// The attack on `hangar dev` as it was made: a page served from 127.0.0.2 posts a job to the dev
// API with fetch(..., {mode: 'no-cors'}) -- a request the browser sends without asking the API --
// and as an HTML form would. No job may come of it.
async function crossOriginAttack(browser, base, a) {
  const before = (await a.get('/v1/jobs')).jobs.length;
  const job = 'name: pwned\ntasks:\n  - {gpus: 1, command: [/bin/true]}\n';
  const page = `<!doctype html><meta charset="utf-8"><body><form id="f" method="POST" action="${base}/v1/jobs"
    enctype="text/plain" target="sink"><input type="hidden" name="x" value="y"></form><iframe name="sink"></iframe>
    <script>
      fetch(${JSON.stringify(base + '/v1/jobs')}, { method: 'POST', mode: 'no-cors', body: ${JSON.stringify(job)} })
        .then(() => { window.sent = 'fetch'; }, (e) => { window.sent = 'fetch failed: ' + e; })
        .then(() => { document.getElementById('f').submit(); window.done = true; });
    </script>`;
  const server = http.createServer((req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end(page); });
  await new Promise((r) => server.listen(0, '127.0.0.2', r));
  const tab = await browser.newPage();
  try {
    await tab.goto(`http://127.0.0.2:${server.address().port}/`, { waitUntil: 'load' });
    await tab.waitForFunction(() => window.done === true, { timeout: 10000 });
    await new Promise((r) => setTimeout(r, 1000));  // the form's request
    assert.equal(await tab.evaluate(() => window.sent), 'fetch', 'the browser did not send the request');
  } finally {
    await tab.close();
    server.close();
  }
  const after = (await a.get('/v1/jobs')).jobs;
  assert.equal(after.length, before, `a job came of it: ${JSON.stringify(after.map((j) => j.name))}`);
}

// --auth tokens: the page asks for a token, refuses a wrong one, and shows a user what the API
// lets that user see: only their own pending job, at its true position behind another's.
async function runAuth(dir) {
  fs.writeFileSync(path.join(dir, 'cluster.yaml'),
    'name: tokens\nnode_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: [{name: gpu-a}, {name: gpu-b}]\n');
  const ctl = start(HANGAR, ['controller', '--cluster', path.join(dir, 'cluster.yaml'), '--api', '127.0.0.1:0', '--agents', '127.0.0.1:0',
    '--store', `sqlite://${dir}/state.db`, '--port-file', path.join(dir, 'ports.json'), '--auth', 'tokens',
    '--admin-token-file', path.join(dir, 'admin.token'), '--insecure'], path.join(dir, 'controller.log'));
  const ports = await waitFor('the port file', () => fs.existsSync(path.join(dir, 'ports.json')) && JSON.parse(fs.readFileSync(path.join(dir, 'ports.json'))), 30000);
  const base = `http://127.0.0.1:${ports.api}`;
  const admin = fs.readFileSync(path.join(dir, 'admin.token'), 'utf8').trim();
  const call = async (tok, method, p, body) => {
    const type = body && body.startsWith('{') ? 'application/json' : 'application/yaml';
    const r = await fetch(base + p, { method, body, headers: { Authorization: `Bearer ${tok}`, ...(body ? { 'Content-Type': type } : {}) } });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${p}: HTTP ${r.status} ${text}`);
    return JSON.parse(text);
  };
  const tokenOf = async (user) => (await call(admin, 'POST', '/v1/tokens', JSON.stringify({ user, role: 'user' }))).token;
  const bob = await tokenOf('bob');
  const alice = await tokenOf('alice');
  const job = (name) => `name: ${name}\ntasks:\n  - {gpus: 8, command: [sleep, "100"]}\n`;
  await call(bob, 'POST', '/v1/jobs', job('bobs-job'));
  const mine = await call(alice, 'POST', '/v1/jobs', job('alices-job'));
  const browser = await launchBrowser();
  const errors = [];
  const page = await newPage(browser, errors);
  try {
    await check('--auth tokens: a login, a wrong token refused, RBAC as on the API', async () => {
      await open(page, base, '#/queue', 'login');
      await page.type('#token', 'hgr_not-a-token');
      await page.click('#login button');
      await page.waitForFunction(() => document.querySelector('#login') && document.querySelector('#login').innerText.includes('was refused'), { timeout: 10000 });
      await page.$eval('#token', (e) => { e.value = ''; });
      await page.type('#token', alice);
      await page.click('#login button');
      await page.waitForFunction(() => document.body.dataset.rendered === 'queue', { timeout: 10000 });
      const rows = await page.$$eval('.qrow[data-job]', (rs) => rs.map((r) => r.innerText));
      assert.equal(rows.length, 1, rows.join('\n'));
      assert.ok(rows[0].includes('alices-job') && rows[0].includes(`#${mine.id}`), rows[0]);
      assert.match(rows[0], /#2 in default/, 'alice\'s job is second, behind bob\'s she may not see');
      assert.ok((await page.$eval('#who', (e) => e.innerText)).includes('alice (user)'));
      await shot(page, 'login-queue');
      // Only the refused logins' 401s may be in the console.
      assert.deepEqual(errors.filter((e) => !e.includes('401')), []);
    });
  } finally {
    await browser.close();
    await stop(ctl);
  }
}

fs.mkdirSync(OUT, { recursive: true });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangar-dashboard-'));
try {
  await run(dir);
  fs.mkdirSync(path.join(dir, 'tokens'));
  await runAuth(path.join(dir, 'tokens'));
  console.log(`all ${checks.length} checks passed; screenshots in ${OUT}`);
  fs.rmSync(dir, { recursive: true, force: true });
} catch (e) {
  console.error(`FAILED: ${e.stack || e}`);
  console.error(`logs kept in ${dir}`);
  process.exitCode = 1;
}
