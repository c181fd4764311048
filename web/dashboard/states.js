// GPU states on the map (the server's one-letter codes, controller/web_ui.h), with a colour and
// a pattern each, so that no two are told apart by hue alone.
export const STATES = {
  f: { name: 'free', fill: '#f4f6f8', mark: 'none', ink: '#6b7785' },
  a: { name: 'allocated', fill: '#2f6db5', mark: 'none', ink: '#ffffff' },
  i: { name: 'allocated but idle', fill: '#f2c14e', mark: 'stripe', ink: '#4a3500' },
  v: { name: 'validating', fill: '#8fd3c8', mark: 'dot', ink: '#0b3d36' },
  s: { name: 'suspect', fill: '#e8772e', mark: 'bang', ink: '#ffffff' },
  d: { name: 'draining', fill: '#8a5fb8', mark: 'bar', ink: '#ffffff' },
  q: { name: 'quarantined', fill: '#7a1f2b', mark: 'cross', ink: '#ffffff' },
  o: { name: 'offline', fill: '#5b6470', mark: 'cross', ink: '#d0d5db' },
};

export const ORDER = ['f', 'a', 'i', 'v', 's', 'd', 'q', 'o'];

// Utilisation or temperature as a colour on a light-to-dark blue ramp (readable in greyscale).
export function rampColour(fraction) {
  const f = Math.max(0, Math.min(1, fraction));
  const l = Math.round(95 - f * 70);  // whole percents: 71 colours, each packed once
  return `hsl(215, 70%, ${l}%)`;
}

// '#rrggbb' or 'hsl(h, s%, l%)' as one canvas pixel (RGBA in little-endian memory order).
const packed = new Map();
export function packRgb(colour) {
  let v = packed.get(colour);
  if (v !== undefined) return v;
  let rgb;
  if (colour.startsWith('#')) rgb = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
  else rgb = hslToRgb(...colour.match(/[\d.]+/g).map(Number));
  v = ((255 << 24) | (rgb[2] << 16) | (rgb[1] << 8) | rgb[0]) >>> 0;
  packed.set(colour, v);
  return v;
}

function hslToRgb(hue, sat, light) {
  const s = sat / 100;
  const l = light / 100;
  const a = s * Math.min(l, 1 - l);
  const f = (n) => {
    const k = (n + hue / 30) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}

export function countCodes(codes) {
  const out = {};
  for (const c of codes) out[c] = (out[c] || 0) + 1;
  return out;
}

export function describeCounts(counts) {
  return ORDER.filter((c) => counts[c]).map((c) => `${counts[c]} ${STATES[c].name}`).join(', ');
}
