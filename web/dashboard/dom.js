// Small DOM helpers: h('tag', {attrs}, ...children) builds elements; text is always text, never HTML.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function table(caption, columns, rows) {
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((cell) => h('td', {}, cell))))));
}

export function jobLink(id, name) {
  return h('a', { href: `#/job/${id}` }, name ? `${name} (#${id})` : `#${id}`);
}

export function nodeLink(name) {
  return h('a', { href: `#/node/${encodeURIComponent(name)}` }, name);
}

export function when(ms) {
  if (!ms) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

export function inHowLong(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  if (s <= 0) return 'now';
  if (s < 90) return `in ${s} s`;
  if (s < 5400) return `in ${Math.round(s / 60)} min`;
  return `in ${(s / 3600).toFixed(1)} h`;
}

export function gpuCount(g) {
  return Number.isInteger(g) ? String(g) : g.toFixed(2);
}

// el.replaceChildren, skipping null and false (which replaceChildren would write as text).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}
