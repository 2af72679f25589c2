// The blueprint editor's model: a blueprint as plain data (what the server's parse gives), its graph as dag.js draws
// it, and the edits the canvas makes. No DOM here, so the /ui editor and the in-chat editor App share it.
//
// A node's full id is its path: `id` at the top, `loop[0].inner` for the first sub-graph of `loop`,
// `par[1].x` for a node of a parallel's second branch (the n-th sub-graph, over every sub-graph field in order).

const REF = /\b([A-Za-z_][A-Za-z0-9_]*)\s*\./g;
const SKIP_REFS = new Set(['id', 'description', 'metadata', 'type', 'dependencies']);

export const clone = (value) => JSON.parse(JSON.stringify(value));

// types: {name: {subgraphs: [{field, nested}], label: [field...]}} from /ui/api/editor/catalogue.
export function innerGraphs(node, types) {
  const graphs = [];
  for (const { field, nested } of (types[node.type] && types[node.type].subgraphs) || []) {
    const value = node[field];
    if (!Array.isArray(value)) continue;
    if (nested) value.forEach((list, i) => { if (Array.isArray(list)) graphs.push({ field, sub: i, label: `${field} ${i}`, nodes: list }); });
    else graphs.push({ field, sub: null, label: field, nodes: value });
  }
  return graphs;
}

export function isContainer(type, types) {
  return Boolean(types[type] && (types[type].subgraphs || []).length);
}

function detailOf(node, types) {
  for (const field of (types[node.type] && types[node.type].label) || []) {
    if (typeof node[field] === 'string' && node[field]) return node[field];
  }
  return '';
}

// What a node's own fields read of its siblings (templates and expressions), as the server's blueprint graph infers.
function refsOf(node, ids, types) {
  const subgraphs = new Set(((types[node.type] && types[node.type].subgraphs) || []).map((s) => s.field));
  const found = new Set();
  for (const [key, value] of Object.entries(node)) {
    if (SKIP_REFS.has(key) || subgraphs.has(key)) continue;
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    for (const match of (text || '').matchAll(REF)) if (ids.has(match[1]) && match[1] !== node.id) found.add(match[1]);
  }
  return found;
}

const asList = (value) => (typeof value === 'string' ? [value] : Array.isArray(value) ? value : []);

// The graph of one scope: [{id, type, detail, deps, explicit, gates, scopes}], the shape dag.js draws.
export function scopeGraph(nodes, types) {
  const list = (nodes || []).filter((node) => node && typeof node === 'object' && typeof node.id === 'string');
  const ids = new Set(list.map((node) => node.id));
  const gates = new Map();
  for (const node of list) {
    for (const [field, branch] of [['true_path', true], ['false_path', false]]) {
      for (const target of asList(node[field])) {
        if (!gates.has(target)) gates.set(target, []);
        gates.get(target).push([node.id, branch]);
      }
    }
  }
  return list.map((node) => {
    const explicit = asList(node.dependencies).filter((d) => ids.has(d));
    const gated = (gates.get(node.id) || []).map(([cond]) => cond);
    const deps = [...new Set([...explicit, ...refsOf(node, ids, types), ...gated])].sort();
    const item = { id: node.id, type: String(node.type || '?'), detail: detailOf(node, types), deps, explicit };
    if (gates.has(node.id)) item.gates = gates.get(node.id);
    if (node.description) item.description = node.description;
    const graphs = innerGraphs(node, types);
    if (isContainer(node.type, types)) {
      item.scopes = graphs.map((graph, i) => ({ kind: 'branch', label: graph.label, index: i, nodes: scopeGraph(graph.nodes, types) }));
      if (!item.scopes.length) item.scopes = [{ kind: 'branch', label: 'empty', index: 0, nodes: [], note: 'add a node inside' }];
    }
    return item;
  });
}

export function toGraph(blueprint, types) {
  return { nodes: scopeGraph((blueprint && blueprint.nodes) || [], types) };
}

// Where a full id lives: {list, index, node, scope} (scope: the full id of its container, '' at the top), or null.
export function locate(blueprint, full, types) {
  let list = blueprint.nodes || [], scope = '', found = null;
  const segments = String(full).split('.');
  for (let s = 0; s < segments.length; s++) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?$/.exec(segments[s]);
    if (!match) return null;
    const index = list.findIndex((node) => node && node.id === match[1]);
    if (index < 0) return null;
    found = { list, index, node: list[index], scope };
    if (s === segments.length - 1) return match[2] === undefined ? found : null;
    const graph = innerGraphs(found.node, types)[Number(match[2] ?? 0)];
    if (!graph) return null;
    list = graph.nodes;
    scope = segments.slice(0, s + 1).join('.');
  }
  return found;
}

// The list new nodes go into: the top, or a container's sub-graph (`loop[0]`), made when it is missing.
export function scopeList(blueprint, scope, types) {
  if (!scope) return (blueprint.nodes ||= []);
  const match = /^(.*)\[(\d+)\]$/.exec(scope);
  const where = locate(blueprint, match ? match[1] : scope, types);
  if (!where) return null;
  const sub = Number(match ? match[2] : 0);
  const graphs = innerGraphs(where.node, types);
  if (graphs[sub]) return graphs[sub].nodes;
  const first = ((types[where.node.type] && types[where.node.type].subgraphs) || [])[0];
  if (!first) return null;
  if (first.nested) { where.node[first.field] = [...(where.node[first.field] || []), []]; return where.node[first.field].at(-1); }
  return (where.node[first.field] = []);
}

export function allIds(blueprint, types) {
  const ids = new Set();
  const walk = (nodes) => (nodes || []).forEach((node) => {
    if (!node) return;
    ids.add(node.id);
    innerGraphs(node, types).forEach((graph) => walk(graph.nodes));
  });
  walk(blueprint.nodes);
  return ids;
}

export function freshId(blueprint, type, types) {
  const ids = allIds(blueprint, types);
  let n = 1;
  while (ids.has(`${type}_${n}`)) n++;
  return `${type}_${n}`;
}

// Adds `spec` to a scope; returns the new node's full id (or null when the scope is not there).
export function addNode(blueprint, spec, scope, types) {
  const list = scopeList(blueprint, scope, types);
  if (!list) return null;
  list.push(spec);
  const match = /^(.*?)(\[\d+\])?$/.exec(scope || '');
  return scope ? `${match[1]}${match[2] || '[0]'}.${spec.id}` : spec.id;
}

function dropRefs(list, id) {
  for (const node of list) {
    for (const field of ['dependencies', 'true_path', 'false_path']) {
      if (node[field] === undefined) continue;
      const kept = asList(node[field]).filter((d) => d !== id);
      if (kept.length === asList(node[field]).length) continue;
      if (kept.length) node[field] = kept; else delete node[field];
    }
  }
}

export function deleteNode(blueprint, full, types) {
  const where = locate(blueprint, full, types);
  if (!where) return false;
  where.list.splice(where.index, 1);
  dropRefs(where.list, where.node.id);
  return true;
}

// An edge `from -> to` is `from` in `to`'s dependencies; both must be in one scope. Returns an error text or null.
export function connect(blueprint, from, to, types) {
  const a = locate(blueprint, from, types), b = locate(blueprint, to, types);
  if (!a || !b) return 'no such node';
  if (a.list !== b.list) return 'only nodes of the same scope can be connected';
  if (a.node === b.node) return 'a node cannot depend on itself';
  const deps = asList(b.node.dependencies);
  if (deps.includes(a.node.id)) return null;
  b.node.dependencies = [...deps, a.node.id];
  return null;
}

export function disconnect(blueprint, from, to, types) {
  const a = locate(blueprint, from, types), b = locate(blueprint, to, types);
  if (!a || !b || b.node.dependencies === undefined) return false;
  const deps = asList(b.node.dependencies);
  if (!deps.includes(a.node.id)) return false;
  const kept = deps.filter((d) => d !== a.node.id);
  if (kept.length) b.node.dependencies = kept; else delete b.node.dependencies;
  return true;
}

// Moves the end of the edge `from -> to` onto `target`: `from` leaves `to`'s dependencies and joins `target`'s.
export function reconnect(blueprint, from, to, target, types) {
  const probe = clone(blueprint);
  if (!disconnect(probe, from, to, types)) return 'that edge is not a declared dependency';
  const error = connect(probe, from, target, types);
  if (error) return error;
  disconnect(blueprint, from, to, types);
  return connect(blueprint, from, target, types);
}

// Sets one field of a node (undefined removes it); renaming its id renames the references of its siblings.
export function setField(blueprint, full, field, value, types) {
  const where = locate(blueprint, full, types);
  if (!where) return null;
  const node = where.node;
  if (field === 'id' && value !== node.id) {
    for (const sibling of where.list) {
      for (const key of ['dependencies', 'true_path', 'false_path']) {
        if (sibling[key] !== undefined) sibling[key] = asList(sibling[key]).map((d) => (d === node.id ? value : d));
      }
    }
  }
  if (value === undefined) delete node[field]; else node[field] = value;
  const segments = String(full).split('.');
  if (field === 'id') segments[segments.length - 1] = value;
  return segments.join('.');
}
