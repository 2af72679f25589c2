// What the /ui page (app.js) and the run view inside an MCP host (app-view.js) both build pages with: elements made
// from text, never from HTML, and the few formats they show a run's numbers in.

export function h(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  return add(node, ...children);
}

// replaceChildren / append that skip the null of an absent optional part.
export function fill(node, ...children) {
  node.replaceChildren();
  return add(node, ...children);
}

export function add(node, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
export const badge = (status) => h('span', { class: `badge status-${status}`, dataset: { status } }, String(status).replace('_', ' '));
export const fmtCost = (usd) => (usd ? `$${usd < 0.01 ? usd.toFixed(5) : usd.toFixed(4)}` : '$0');

export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return s < 3600 ? `${Math.floor(s / 60)} m ${s % 60} s` : `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
}

// What a form's fields hold: each field's reader by name; a field left empty (undefined) is not in the object.
export function readFields(readers) {
  const values = {};
  for (const [name, reader] of readers) {
    const value = reader();
    if (value !== undefined) values[name] = value;
  }
  return values;
}
