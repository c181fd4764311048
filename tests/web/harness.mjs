// What the dashboard's browser test and render benchmark share: free loopback ports, a real
// `hangar` process in its own process group (killed on exit, even on failure), Debian's chromium
// through puppeteer-core, and a page that records console errors.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const children = new Set();

function killAll() {
  for (const c of children) {
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch (e) { /* already gone */ }
  }
  children.clear();
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => { killAll(); process.exit(130); });

// A free TCP port on 127.0.0.1 whose next port is free too (`hangar dev` gives agents port + 1).
export async function freePortPair() {
  for (let i = 0; i < 50; i++) {
    const p = await freePort(0);
    if (p < 65535 && (await freePort(p + 1)) === p + 1) return p;
  }
  throw new Error('no two consecutive free ports on 127.0.0.1');
}

function freePort(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(-1));
    s.listen(port, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

// Starts `args` in its own process group, output to `log`, with `env` added to ours.
export function start(cmd, args, log, env = {}) {
  const out = fs.openSync(log, 'a');
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', out, out], env: { ...process.env, ...env } });
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

// Ends a process group: SIGTERM, then SIGKILL after `graceMs`.
export async function stop(child, graceMs = 5000) {
  if (!children.has(child)) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch (e) {
    children.delete(child);
    return;
  }
  const done = new Promise((r) => child.once('exit', r));
  const timer = new Promise((r) => setTimeout(r, graceMs, 'timeout'));
  if ((await Promise.race([done, timer])) === 'timeout') {
    try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { /* gone */ }
    await done;
  }
  children.delete(child);
}

export async function waitFor(what, fn, timeoutMs = 30000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
}

// The REST API at `base`, with `token` (a `hangar dev` cluster's DIR/dev-token) when given. Job
// specs go as YAML: the API takes only JSON or YAML bodies.
export function api(base, token = '') {
  const auth = token ? { Authorization: `Bearer ${token}` } : {};
  return {
    async get(path) {
      const r = await fetch(base + path, { headers: auth });
      if (!r.ok) throw new Error(`GET ${path}: HTTP ${r.status} ${await r.text()}`);
      return r.json();
    },
    async post(path, body) {
      const r = await fetch(base + path, { method: 'POST', body, headers: { ...auth, 'Content-Type': 'application/yaml' } });
      const text = await r.text();
      if (r.status >= 300) throw new Error(`POST ${path}: HTTP ${r.status} ${text}`);
      return JSON.parse(text);
    },
  };
}

// `hangar dev`'s per-run token, once it has written it to DIR/dev-token.
export async function devToken(dir) {
  const file = path.join(dir, 'dev-token');
  return waitFor(`${file}`, () => fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim(), 30000);
}

// Debian's chromium; never a downloaded one. Throws (the test fails, it does not skip) without it.
export function chromiumPath() {
  for (const p of [process.env.CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser']) {
    if (p && fs.existsSync(p)) return p;
  }
  throw new Error('chromium is not installed: run scripts/install-deps.sh --test (Debian package chromium)');
}

export const CHROMIUM_FLAGS = ['--no-sandbox', '--headless=new', '--disable-gpu', '--no-first-run',
  '--disable-dev-shm-usage', '--disable-extensions', '--hide-scrollbars'];

export async function launchBrowser() {
  const browser = await puppeteer.launch({ executablePath: chromiumPath(), args: CHROMIUM_FLAGS, headless: true });
  const pid = browser.process() && browser.process().pid;
  process.on('exit', () => { if (pid) try { process.kill(pid, 'SIGKILL'); } catch (e) { /* gone */ } });
  return browser;
}

// A page that records console errors and uncaught exceptions into `errors`.
export async function newPage(browser, errors, width = 1400, height = 900) {
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    const f = r.failure();
    if (!f || f.errorText !== 'net::ERR_ABORTED') errors.push(`request failed: ${r.url()} ${f ? f.errorText : ''}`);
  });
  return page;
}

// `chromium --headless --dump-dom --virtual-time-budget=8000 url`: the DOM once the budget has
// passed; throws when chromium did not finish within `timeoutMs` (its process group is killed).
export async function dumpDom(url, timeoutMs = 60000) {
  const child = spawn(chromiumPath(), [...CHROMIUM_FLAGS, '--dump-dom', '--virtual-time-budget=8000', url],
    { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  children.add(child);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const done = new Promise((r) => child.once('exit', (code) => r(code)));
  const timer = new Promise((r) => setTimeout(r, timeoutMs, 'timeout'));
  const how = await Promise.race([done, timer]);
  if (how === 'timeout') {
    await stop(child, 0);
    throw new Error(`chromium --dump-dom did not finish within ${timeoutMs} ms (is a request held open during load?)`);
  }
  children.delete(child);
  try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { /* all gone */ }
  return out;
}
