// The cluster map on a canvas: spine -> leaf -> node -> GPU, one cell per GPU. Drawn once (small
// cells straight into the pixels), then only the nodes whose row changed are redrawn (update()).
// A GPU shared by fractions is filled from the bottom by the share in use; a MIG GPU shows its
// eight memory slices, each instance a block.
import { STATES, rampColour, packRgb } from './states.js';

const GPU_COLS = 4;

export class ClusterMap {
  // rows: the map's nodes ([name, spine, leaf, state, codes, utils, temps, jobs]).
  constructor(canvas, rows, width) {
    this.canvas = canvas;
    this.rows = rows;
    this.mode = 'state';
    this.selected = -1;
    this.layout(width);
  }

  layout(width) {
    const n = this.rows.length;
    const gpus = this.rows.reduce((m, r) => Math.max(m, r[4].length), 1);
    this.cell = n <= 16 ? 30 : n <= 64 ? 18 : n <= 1024 ? 8 : 4;
    const gap = this.cell <= 4 ? 2 : this.cell >= 18 ? 10 : 4;
    this.names = this.cell >= 18 ? 14 : 0;  // room for the node's name under its cells
    this.nodeW = GPU_COLS * this.cell + gap;
    this.nodeH = Math.ceil(gpus / GPU_COLS) * this.cell + gap + this.names;
    this.label = this.cell >= 8 ? 14 : 11;
    this.rects = new Array(n);
    this.groups = [];
    this.placeLeaves(width);
    this.canvas.width = width;
    this.canvas.height = this.height;
  }

  // Leaves flow left to right under their spine's heading; a leaf's nodes form a near-square block.
  placeLeaves(width) {
    const pad = 8;
    let y = 0;
    let i = 0;
    while (i < this.rows.length) {
      const spine = this.rows[i][1];
      y += this.label + 4;
      this.groups.push({ kind: 'spine', name: spine, x: 0, y: y - 4 });
      let x = 0;
      let rowH = 0;
      while (i < this.rows.length && this.rows[i][1] === spine) {
        const leaf = this.rows[i][2];
        let j = i;
        while (j < this.rows.length && this.rows[j][1] === spine && this.rows[j][2] === leaf) j++;
        const count = j - i;
        const perRow = Math.max(1, Math.min(count, Math.ceil(Math.sqrt(count * 2))));
        const w = perRow * this.nodeW + pad;
        const h = Math.ceil(count / perRow) * this.nodeH + this.label + pad;
        if (x + w > width && x > 0) {
          x = 0;
          y += rowH;
          rowH = 0;
        }
        this.groups.push({ kind: 'leaf', name: leaf, x, y: y + this.label - 3, w: w - pad, h: h - pad });
        for (let k = i; k < j; k++) {
          const p = k - i;
          this.rects[k] = { x: x + (p % perRow) * this.nodeW, y: y + this.label + Math.floor(p / perRow) * this.nodeH };
        }
        x += w;
        rowH = Math.max(rowH, h);
        i = j;
      }
      y += rowH + 4;
    }
    this.height = Math.max(40, y);
  }

  draw() {
    const ctx = this.canvas.getContext('2d');
    if (this.cell <= 8) {
      this.drawPixels(ctx);  // one putImageData for every cell: no per-cell canvas call
    } else {
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
      for (let k = 0; k < this.rows.length; k++) this.drawNode(ctx, k);
    }
    ctx.fillStyle = '#1b2733';
    ctx.textBaseline = 'alphabetic';
    for (const g of this.groups) {
      ctx.font = g.kind === 'spine' ? `bold ${this.label - 1}px sans-serif` : `${this.label - 3}px sans-serif`;
      ctx.fillText(g.name, g.x, g.y);
    }
    if (this.selected >= 0) this.drawNode(ctx, this.selected);
  }

  // Every cell written straight into the canvas's pixels (small cells: no marks, no shares),
  // the same colours and free-cell outline as drawCell.
  drawPixels(ctx) {
    const w = this.canvas.width;
    const img = ctx.createImageData(w, this.canvas.height);
    const px = new Uint32Array(img.data.buffer);
    px.fill(0xffffffff);
    const c = this.cell - (this.cell >= 8 ? 2 : 1);
    const outline = packRgb('#9aa5b1');
    for (let k = 0; k < this.rows.length; k++) {
      const r = this.rects[k];
      const row = this.rows[k];
      const codes = row[4];
      for (let g = 0; g < codes.length; g++) {
        const x0 = r.x + (g % GPU_COLS) * this.cell;
        const y0 = r.y + Math.floor(g / GPU_COLS) * this.cell;
        const fill = packRgb(this.fillOf(codes[g], row[5][g], row[6][g]));
        const edge = codes[g] === 'f' ? outline : fill;
        for (let y = 0; y < c; y++) {
          const at = (y0 + y) * w + x0;
          const border = y === 0 || y === c - 1;
          for (let x = 0; x < c; x++) px[at + x] = border || x === 0 || x === c - 1 ? edge : fill;
        }
      }
    }
    ctx.putImageData(img, 0, 0);
  }

  fillOf(code, util, temp) {
    if (this.mode === 'util' && code !== 'o') return rampColour(util / 100);
    if (this.mode === 'temp' && code !== 'o') return rampColour((temp - 25) / 65);
    return (STATES[code] || STATES.o).fill;
  }

  drawNode(ctx, k) {
    const r = this.rects[k];
    const row = this.rows[k];
    const codes = row[4];
    ctx.fillStyle = '#ffffff';  // over the old cells and selection outline
    ctx.fillRect(r.x - 2, r.y - 2, this.nodeW, this.nodeH);
    const shares = sharesByGpu(row);
    for (let g = 0; g < codes.length; g++) {
      const x = r.x + (g % GPU_COLS) * this.cell;
      const y = r.y + Math.floor(g / GPU_COLS) * this.cell;
      this.drawCell(ctx, x, y, codes[g], row[5][g], row[6][g], shares.get(g));
    }
    const rowsH = Math.ceil(codes.length / GPU_COLS) * this.cell;
    if (this.names) {
      ctx.fillStyle = '#1b2733';
      ctx.font = '12px sans-serif';
      ctx.textBaseline = 'top';
      ctx.fillText(row[0], r.x, r.y + rowsH + 1, GPU_COLS * this.cell);
      ctx.textBaseline = 'alphabetic';
    }
    if (k === this.selected) {
      ctx.strokeStyle = '#000000';
      ctx.lineWidth = 2;
      ctx.strokeRect(r.x - 1, r.y - 1, GPU_COLS * this.cell + 1, rowsH + 1);
    }
  }

  drawCell(ctx, x, y, code, util, temp, shares) {
    const s = STATES[code] || STATES.o;
    const c = this.cell - (this.cell >= 8 ? 2 : 1);
    ctx.fillStyle = this.fillOf(code, util, temp);
    ctx.fillRect(x, y, c, c);
    if (shares && c >= 6 && this.mode === 'state' && (code === 'a' || code === 'i')) {
      drawShares(ctx, x, y, c, shares, s);
      return;
    }
    if (code === 'f') {
      ctx.strokeStyle = '#9aa5b1';
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 0.5, c - 1, c - 1);
    }
    if (c >= 7 && this.mode === 'state') this.drawMark(ctx, x, y, c, s);
  }

  // The pattern that tells a state apart without its colour.
  drawMark(ctx, x, y, c, s) {
    ctx.strokeStyle = s.ink;
    ctx.fillStyle = s.ink;
    ctx.lineWidth = c >= 12 ? 2 : 1;
    ctx.beginPath();
    if (s.mark === 'stripe') {
      ctx.moveTo(x, y + c);
      ctx.lineTo(x + c, y);
    } else if (s.mark === 'cross') {
      ctx.moveTo(x + 2, y + 2);
      ctx.lineTo(x + c - 2, y + c - 2);
      ctx.moveTo(x + c - 2, y + 2);
      ctx.lineTo(x + 2, y + c - 2);
    } else if (s.mark === 'bar') {
      ctx.moveTo(x + 2, y + c / 2);
      ctx.lineTo(x + c - 2, y + c / 2);
    } else if (s.mark === 'bang') {
      ctx.moveTo(x + c / 2, y + 2);
      ctx.lineTo(x + c / 2, y + c * 0.6);
      ctx.stroke();
      ctx.beginPath();
      ctx.arc(x + c / 2, y + c * 0.8, Math.max(1, c / 10), 0, Math.PI * 2);
      ctx.fill();
    } else if (s.mark === 'dot') {
      ctx.arc(x + c / 2, y + c / 2, Math.max(1, c / 6), 0, Math.PI * 2);
      ctx.fill();
    }
    ctx.stroke();
  }

  // Applies changed rows ([index, name, spine, leaf, ...]); redraws only the nodes that changed.
  // Returns how many nodes were redrawn.
  update(changes) {
    const ctx = this.canvas.getContext('2d');
    let drawn = 0;
    for (const ch of changes) {
      const k = ch[0];
      const row = ch.slice(1);
      if (k >= this.rows.length || this.rows[k][0] !== row[0]) return -1;  // a new layout: the caller redraws
      if (JSON.stringify(this.rows[k]) === JSON.stringify(row)) continue;
      this.rows[k] = row;
      this.drawNode(ctx, k);
      drawn++;
    }
    return drawn;
  }

  setMode(mode) {
    this.mode = mode;
    this.draw();
  }

  select(k) {
    const ctx = this.canvas.getContext('2d');
    const old = this.selected;
    this.selected = k;
    if (old >= 0) this.drawNode(ctx, old);
    if (k >= 0) this.drawNode(ctx, k);
  }

  // The node under canvas point (x, y), or -1.
  nodeAt(x, y) {
    for (let k = 0; k < this.rects.length; k++) {
      const r = this.rects[k];
      if (x >= r.x && x < r.x + this.nodeW && y >= r.y && y < r.y + this.nodeH) return k;
    }
    return -1;
  }

  // The node next to `k` in a direction, for the keyboard: left/right by fabric order, up/down
  // by the nearest node above or below.
  neighbour(k, key) {
    const n = this.rows.length;
    if (k < 0) return 0;
    if (key === 'ArrowRight') return Math.min(n - 1, k + 1);
    if (key === 'ArrowLeft') return Math.max(0, k - 1);
    const r = this.rects[k];
    const dir = key === 'ArrowDown' ? 1 : -1;
    let best = k;
    let bestD = Infinity;
    for (let j = 0; j < n; j++) {
      const q = this.rects[j];
      const dy = (q.y - r.y) * dir;
      if (dy <= 0) continue;
      const d = dy * 4 + Math.abs(q.x - r.x);
      if (d < bestD) {
        bestD = d;
        best = j;
      }
    }
    return best;
  }
}

// Row element 8: [gpu, job, milli, mig_start, mig_slices] per grant of part of a GPU.
export function sharesByGpu(row) {
  const out = new Map();
  for (const sh of row[8] || []) {
    if (!out.has(sh[0])) out.set(sh[0], []);
    out.get(sh[0]).push(sh);
  }
  return out;
}

// A shared GPU's cell: free background; MIG instances as blocks over its 8 memory slices, or the
// fractions in use filled from the bottom; a line between two jobs' parts.
function drawShares(ctx, x, y, c, shares, s) {
  ctx.fillStyle = STATES.f.fill;
  ctx.fillRect(x, y, c, c);
  ctx.fillStyle = s.fill;
  if (shares[0][3] >= 0) {
    for (const sh of shares) {
      const x0 = x + Math.round((sh[3] * c) / 8);
      const x1 = x + Math.round(((sh[3] + sh[4]) * c) / 8);
      ctx.fillRect(x0, y, Math.max(1, x1 - x0 - 1), c);
    }
  } else {
    let used = 0;
    for (const sh of shares) {
      const h0 = Math.round((used * c) / 1000);
      used = Math.min(1000, used + sh[2]);
      const h1 = Math.round((used * c) / 1000);
      ctx.fillRect(x, y + c - h1, c, Math.max(1, h1 - h0 - 1));
    }
  }
  ctx.strokeStyle = '#2f6db5';
  ctx.lineWidth = 1;
  ctx.strokeRect(x + 0.5, y + 0.5, c - 1, c - 1);
}
