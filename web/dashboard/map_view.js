// The cluster map view: the canvas, its legend, and beside it the same facts as text (by leaf),
// for keyboards and screen readers. Hover or focus shows a node and its jobs; Enter or a click
// opens the node.
import { get } from './api.js';
import { fill, h, nodeLink, jobLink } from './dom.js';
import { ClusterMap, sharesByGpu } from './map.js';
import { STATES, ORDER, countCodes, describeCounts } from './states.js';

export async function mapView(main, ctx) {
  const data = await get('/v1/dashboard/map');
  const canvas = h('canvas', { id: 'map', tabindex: '0', role: 'img',
    'aria-label': 'Cluster map: one cell per GPU; the list beside it says the same in words' });
  const tip = h('div', { id: 'map-tip', role: 'status', 'aria-live': 'polite' }, 'Point at a node, or focus the map and use the arrow keys.');
  const mode = h('select', { id: 'map-mode', 'aria-label': 'Colour cells by' },
    h('option', { value: 'state' }, 'state'), h('option', { value: 'util' }, 'utilisation'),
    h('option', { value: 'temp' }, 'temperature'));
  const wrap = h('div', { class: 'map-canvas' }, canvas);
  const text = h('div', { class: 'map-text', id: 'map-text' });
  fill(main, h('h2', {}, `Cluster map: ${data.cluster}`),
    h('div', { class: 'map-tools' }, h('label', {}, 'Colour by ', mode), legend()), tip,
    h('div', { class: 'map-layout' }, wrap, text));
  const width = Math.max(320, Math.floor(wrap.clientWidth || 900));
  const map = new ClusterMap(canvas, data.nodes, width);
  map.draw();
  performance.mark('hangar:map-drawn');
  window.hangarMap = map;  // read by the browser test and the render benchmark (tests/web/)
  const list = new LeafList(text, map.rows);
  mode.addEventListener('change', () => map.setMode(mode.value));
  wire(canvas, map, tip);
  ctx.feedSince = data.snapshot;  // the feed sends what changed after the snapshot drawn
  ctx.onGpus = (changes) => {
    const drawn = map.update(changes);
    if (drawn < 0) return ctx.rerender();
    if (drawn > 0) list.update(changes.map((c) => c[0]));
    canvas.dataset.updates = String(Number(canvas.dataset.updates || 0) + drawn);
  };
}

function legend() {
  return h('ul', { class: 'legend', 'aria-label': 'Legend' }, ORDER.map((c) => h('li', {},
    h('span', { class: `swatch swatch-${c}`, 'aria-hidden': 'true' }), STATES[c].name)),
  h('li', {}, h('span', { class: 'swatch swatch-share', 'aria-hidden': 'true' }), 'shared: the fraction in use, or MIG slices'));
}

function wire(canvas, map, tip) {
  const show = (k) => {
    map.select(k);
    tip.replaceChildren(k < 0 ? 'Point at a node, or focus the map and use the arrow keys.' : h('span', {}, describe(map.rows[k])));
  };
  canvas.addEventListener('mousemove', (e) => {
    const r = canvas.getBoundingClientRect();
    const k = map.nodeAt((e.clientX - r.left) * canvas.width / r.width, (e.clientY - r.top) * canvas.height / r.height);
    if (k !== map.selected) show(k);
  });
  canvas.addEventListener('click', () => {
    if (map.selected >= 0) location.hash = `#/node/${encodeURIComponent(map.rows[map.selected][0])}`;
  });
  canvas.addEventListener('keydown', (e) => {
    if (e.key.startsWith('Arrow')) {
      e.preventDefault();
      show(map.neighbour(map.selected, e.key));
    } else if (e.key === 'Enter' && map.selected >= 0) {
      location.hash = `#/node/${encodeURIComponent(map.rows[map.selected][0])}`;
    }
  });
  canvas.addEventListener('focus', () => {
    if (map.selected < 0) show(0);
  });
}

function describe(row) {
  const [name, spine, leaf, state, codes, , , jobs] = row;
  const jobsText = jobs.length ? ['; jobs: ', jobs.map((id, i) => [i ? ', ' : '', jobLink(id)])] : ['; no jobs'];
  const shared = sharedText(row);
  return [nodeLink(name), ` (${spine} / ${leaf}, ${state}): ${describeCounts(countCodes(codes))}`, ...jobsText,
    shared.length ? `; ${shared.join('; ')}` : ''];
}

// The GPUs shared by fractions or split by MIG, in words: "GPU 2 MIG: job 7 slices 0-3, job 8
// slices 4-5", "GPU 3 shared: job 12 0.50, job 13 0.25".
export function sharedText(row) {
  const out = [];
  for (const [g, list] of sharesByGpu(row)) {
    const mig = list[0][3] >= 0;
    const parts = list.map((s) => (mig ? `job ${s[1]} slices ${s[3]}-${s[3] + s[4] - 1}` : `job ${s[1]} ${(s[2] / 1000).toFixed(2)}`));
    out.push(`GPU ${g} ${mig ? 'MIG' : 'shared'}: ${parts.join(', ')}`);
  }
  return out;
}

// Per leaf: its GPUs by state; every node that is not plainly free or busy is named with what
// is wrong (the first ODD_CAP of a leaf, then how many more); the full node list is one click
// away (a <details> per leaf).
// A feed update re-renders only the leaves of the nodes that changed.
const ODD_CAP = 12;  // a leaf's nodes named beside the map (of 32 at 10,240 nodes)

class LeafList {
  constructor(el, rows) {
    this.rows = rows;
    this.leafOf = new Array(rows.length);
    this.leaves = [];
    const index = new Map();
    rows.forEach((row, k) => {
      const key = `${row[1]} / ${row[2]}`;
      if (!index.has(key)) {
        index.set(key, this.leaves.length);
        this.leaves.push({ key, nodes: [] });
      }
      this.leafOf[k] = index.get(key);
      this.leaves[index.get(key)].nodes.push(k);
    });
    this.items = this.leaves.map((leaf) => this.item(leaf));
    el.replaceChildren(h('h3', {}, 'By leaf switch'), h('ul', { class: 'leaves' }, this.items));
  }

  item(leaf) {
    const nodes = leaf.nodes.map((k) => this.rows[k]);
    const counts = countCodes(nodes.map((r) => r[4]).join(''));
    const odd = nodes.filter((r) => /[ivsdqo]/.test(r[4]) || r[3] !== 'ready' || (r[8] && r[8].length));
    const det = h('details', {}, h('summary', {}, `${leaf.key}: ${nodes.length} nodes; ${describeCounts(counts)}`));
    det.addEventListener('toggle', () => {
      if (det.open && det.children.length === 1) det.append(h('ul', {}, leaf.nodes.map((k) => nodeLine(this.rows[k]))));
    }, { once: true });
    const more = odd.length > ODD_CAP ? h('li', {}, `and ${odd.length - ODD_CAP} more: open the leaf`) : null;
    return h('li', {}, det, odd.length ? h('ul', { class: 'odd' }, odd.slice(0, ODD_CAP).map((r) => nodeLine(r)), more) : null);
  }

  update(changed) {
    for (const l of new Set(changed.map((k) => this.leafOf[k]))) {
      if (l === undefined) continue;
      const fresh = this.item(this.leaves[l]);
      this.items[l].replaceWith(fresh);
      this.items[l] = fresh;
    }
  }
}

function nodeLine(r) {
  const bad = [];
  for (let g = 0; g < r[4].length; g++) {
    if ('ivsdqo'.includes(r[4][g])) bad.push(`GPU ${g} ${STATES[r[4][g]].name}`);
  }
  const shared = sharedText(r);
  return h('li', { 'data-node': r[0] }, nodeLink(r[0]), `: ${r[3]}`, bad.length ? `; ${bad.join(', ')}` : `; ${describeCounts(countCodes(r[4]))}`,
    shared.length ? `; ${shared.join('; ')}` : null);
}
