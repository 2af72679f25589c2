// A workflow graph drawn as a layered DAG: layout, drawing, open containers, live node states.
// No dependencies: a Sugiyama-style layering (longest path, barycenter ordering, rows) written for
// graphs of thousands of nodes (dagre took 6-14 s on 1,000 nodes; this takes milliseconds).

const NODE_W = 172, NODE_H = 46, GAP_X = 22, GAP_Y = 46, MAX_ROW = 24;
const PAD = 12, PART_HEAD = 26, SWEEPS = 6;
const SVG = 'http://www.w3.org/2000/svg';

export const STATE_OF = {
  node_started: 'running', node_retrying: 'retrying', node_succeeded: 'succeeded', node_failed: 'failed',
  node_skipped: 'skipped', node_cancelled: 'cancelled', node_waiting: 'waiting', node_answered: 'running',
};
const CONTAINER_ITER = /([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]\./g;
// States in which a node's clock runs: from its latest node_started to the event that ends it.
const TICKING = new Set(['running', 'retrying', 'waiting']);

// A node's clock: "0.4 s", "12 s", "3 m 05 s", "1 h 02 m".
export function clockText(seconds) {
  if (!(seconds >= 0)) return '';
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  const s = Math.floor(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} m ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} m`;
}

// Ranks, order and coordinates of one scope's nodes. size(i) gives node i's {w, h}.
export function layered(nodes, size) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const preds = nodes.map((node) => [...new Set((node.deps || []).filter((d) => index.has(d)).map((d) => index.get(d)))]);
  const succs = nodes.map(() => []);
  preds.forEach((ps, i) => ps.forEach((p) => succs[p].push(i)));
  // Longest-path layering (Kahn's order); nodes caught in a cycle (only in approximate graphs) go last.
  const rank = new Array(n).fill(0), waiting = preds.map((ps) => ps.length), queue = [];
  waiting.forEach((w, i) => { if (w === 0) queue.push(i); });
  for (let head = 0; head < queue.length; head++) {
    const v = queue[head];
    for (const s of succs[v]) {
      rank[s] = Math.max(rank[s], rank[v] + 1);
      if (--waiting[s] === 0) queue.push(s);
    }
  }
  if (queue.length < n) {
    const top = Math.max(0, ...rank) + 1;
    waiting.forEach((w, i) => { if (w > 0) rank[i] = top; });
  }
  const layers = [];
  for (let i = 0; i < n; i++) (layers[rank[i]] ||= []).push(i);
  for (let r = 0; r < layers.length; r++) layers[r] ||= [];
  // Barycenter sweeps: each node moves toward the mean position of its neighbours in other layers.
  const pos = new Float64Array(n);
  const settle = (layer) => layer.forEach((v, i) => { pos[v] = layer.length > 1 ? i / (layer.length - 1) : 0.5; });
  layers.forEach(settle);
  const sweep = (layer, neighbours) => {
    const key = new Map(layer.map((v) => {
      const nb = neighbours[v];
      if (!nb.length) return [v, pos[v]];
      let sum = 0;
      for (const u of nb) sum += pos[u];
      return [v, sum / nb.length];
    }));
    layer.sort((a, b) => key.get(a) - key.get(b) || a - b);
    settle(layer);
  };
  for (let it = 0; it < SWEEPS; it++) {
    for (let r = 1; r < layers.length; r++) sweep(layers[r], preds);
    for (let r = layers.length - 2; r >= 0; r--) sweep(layers[r], succs);
  }
  // Coordinates: wide layers wrap into rows of MAX_ROW; a node sits near the centre of its parents, and
  // every row stays within the width of the widest row (no drift to one side down a deep graph).
  const x = new Float64Array(n), y = new Float64Array(n), w = [], h = [];
  for (let i = 0; i < n; i++) { const s = size(i); w[i] = s.w; h[i] = s.h; }
  const rows = [];
  for (const layer of layers) for (let start = 0; start < layer.length; start += MAX_ROW) rows.push(layer.slice(start, start + MAX_ROW));
  const packed = (row) => row.reduce((sum, v) => sum + w[v], 0) + GAP_X * (row.length - 1);
  const half = Math.max(0, ...rows.map(packed)) / 2;
  let top = 0;
  for (const row of rows) {
    let right = -Infinity, drift = 0, counted = 0;
    for (const v of row) {
      let desired = null;
      if (preds[v].length) {
        let sum = 0;
        for (const p of preds[v]) sum += x[p] + w[p] / 2;
        desired = sum / preds[v].length - w[v] / 2;
      }
      const place = desired ?? (Number.isFinite(right) ? right + GAP_X : -half);
      x[v] = Number.isFinite(right) ? Math.max(place, right + GAP_X) : place;
      right = x[v] + w[v];
      if (desired !== null) { drift += desired - x[v]; counted++; }
    }
    const first = x[row[0]] + (counted ? drift / counted : 0), span = right - x[row[0]];
    const shift = (span >= 2 * half ? -span / 2 : Math.min(Math.max(first, -half), half - span)) - x[row[0]];
    let tall = 0;
    for (const v of row) { x[v] += shift; y[v] = top; tall = Math.max(tall, h[v]); }
    top += tall + GAP_Y;
  }
  let left = Infinity, width = 0;
  for (let i = 0; i < n; i++) left = Math.min(left, x[i]);
  for (let i = 0; i < n; i++) { x[i] -= left; width = Math.max(width, x[i] + w[i]); }
  const edges = [];
  nodes.forEach((node, v) => {
    const gates = new Map((node.gates || []).map(([cond, branch]) => [cond, branch ? 'true' : 'false']));
    for (const p of preds[v]) edges.push({ from: p, to: v, label: gates.get(nodes[p].id) || '' });
  });
  return { x, y, w, h, edges, width: n ? width : 0, height: n ? Math.max(0, top - GAP_Y) : 0 };
}

// An edge through the points a layout routed it by (the editor's dagre), smoothed through their midpoints.
function routed(points, ox, oy) {
  const p = points.map((pt) => [ox + pt.x, oy + pt.y]);
  let d = `M${p[0][0]},${p[0][1]}`;
  for (let i = 1; i < p.length - 1; i++) d += ` Q${p[i][0]},${p[i][1]} ${(p[i][0] + p[i + 1][0]) / 2},${(p[i][1] + p[i + 1][1]) / 2}`;
  const last = p[p.length - 1];
  return `${d} L${last[0]},${last[1] - 2}`;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

export class DagView {
  // graph: {nodes: [...]} from the server; options.onSelect(fullId, node) on a click. The blueprint editor
  // (editor.js) draws with the same class: options.layout replaces `layered` (same arguments and answer),
  // options.allOpen shows every container's inside, options.decorate(box, fullId, node) adds to each node drawn.
  constructor(host, graph, options = {}) {
    this.host = host;
    this.graph = graph;
    this.onSelect = options.onSelect || (() => {});
    this.layoutFn = options.layout || layered;
    this.allOpen = Boolean(options.allOpen);
    this.decorate = options.decorate || null;
    this.drawnEdges = [];           // {from, to, label, path, x, y}: each edge drawn now, its end at (x, y)
    this.states = new Map();       // full node id -> state
    this.iterations = new Map();   // full container id -> highest iteration started
    this.firstFailed = new Map();  // full container id -> first iteration with a failure
    this.open = new Set();
    this.choice = new Map();       // full container id -> iteration picked in its selector
    this.els = new Map();          // full node id -> element drawn now
    this.selects = new Map();      // full container id -> its iteration <select>
    this.startedAt = new Map();    // full node id -> its latest node_started time (server seconds), while it runs
    this.tookMs = new Map();       // full node id -> how long it took, once it ended
    this.clocks = new Map();       // full node id -> its clock element drawn now
    this.selected = null;
    this.following = null;
    this.scale = 1; this.tx = 0; this.ty = 0;
    this.viewport = el('div', 'dag');
    this.canvas = el('div', 'dag-canvas');
    this.viewport.append(this.canvas);
    host.append(this.viewport);
    this._pan();
    this.draw();
    this.fit();
  }

  // -- layout ------------------------------------------------------------------------------

  scopesShown(node, full) {
    return (node.scopes || []).map((scope) => {
      if (scope.kind === 'plain') return { scope, prefix: `${full}.`, label: scope.label };
      if (scope.kind === 'branch') return { scope, prefix: `${full}[${scope.index}].`, label: scope.label };
      const last = this.iterations.get(full);
      const pick = this.choice.get(full) ?? this.firstFailed.get(full) ?? last ?? scope.index;
      return { scope, prefix: `${full}[${pick}].`, label: scope.label, iteration: pick, full };
    });
  }

  layoutNodes(nodes, prefix) {
    const inner = new Map();
    const size = (i) => {
      const node = nodes[i], full = prefix + node.id;
      if (!node.scopes || !this.isOpen(full)) return { w: NODE_W, h: NODE_H };
      const content = this.layoutContent(node, full);
      inner.set(i, content);
      return { w: Math.max(NODE_W, content.w), h: NODE_H + content.h };
    };
    return { nodes, prefix, inner, ...this.layoutFn(nodes, size) };
  }

  layoutContent(node, full) {
    let x = PAD, tall = 0;
    const parts = this.scopesShown(node, full).map((shown) => {
      const layout = this.layoutNodes(shown.scope.nodes, shown.prefix);
      const part = { ...shown, layout, x, w: Math.max(layout.width, 120) };
      x += part.w + GAP_X + PAD;
      tall = Math.max(tall, layout.height);
      return part;
    });
    return { parts, w: x - GAP_X, h: PART_HEAD + tall + PAD };
  }

  // -- drawing -----------------------------------------------------------------------------

  draw() {
    const started = performance.now();
    this.els.clear();
    this.selects.clear();
    this.clocks.clear();
    this.drawnEdges = [];
    this.canvas.replaceChildren();
    this.layout = this.layoutNodes(this.graph.nodes || [], '');
    this.width = this.layout.width + 2 * PAD;
    this.height = this.layout.height + 2 * PAD;
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'dag-edges');
    svg.setAttribute('width', this.width);
    svg.setAttribute('height', this.height);
    const defs = document.createElementNS(SVG, 'defs');
    const marker = document.createElementNS(SVG, 'marker');
    for (const [k, v] of Object.entries({ id: 'arrow', viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' })) marker.setAttribute(k, v);
    const tip = document.createElementNS(SVG, 'path');
    tip.setAttribute('d', 'M0,0 L8,4 L0,8 z');
    marker.append(tip);
    defs.append(marker);
    svg.append(defs);
    const layer = document.createDocumentFragment();
    this.canvas.append(svg);
    this.drawLayout(this.layout, PAD, PAD, svg, layer);
    this.canvas.append(layer);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.height}px`;
    this.layoutMs = performance.now() - started;
    if (this.selected && this.els.has(this.selected)) this.els.get(this.selected).classList.add('selected');
  }

  drawLayout(layout, ox, oy, svg, layer) {
    const { nodes, prefix, x, y, w, h } = layout;
    for (const edge of layout.edges) {
      const x1 = ox + x[edge.from] + w[edge.from] / 2, y1 = oy + y[edge.from] + h[edge.from];
      const x2 = ox + x[edge.to] + w[edge.to] / 2, y2 = oy + y[edge.to];
      const bend = Math.max(18, (y2 - y1) / 2);
      const path = document.createElementNS(SVG, 'path');
      path.setAttribute('d', edge.points ? routed(edge.points, ox, oy)
        : `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2 - 2}`);
      path.setAttribute('marker-end', 'url(#arrow)');
      if (edge.label) path.setAttribute('class', `gate gate-${edge.label}`);
      svg.append(path);
      const end = edge.points ? edge.points[edge.points.length - 1] : null;
      this.drawnEdges.push({ from: prefix + nodes[edge.from].id, to: prefix + nodes[edge.to].id, label: edge.label, path,
        x: end ? ox + end.x : x2, y: end ? oy + end.y : y2 });
      if (edge.label) {
        const text = document.createElementNS(SVG, 'text');
        const mid = edge.points ? edge.points[Math.floor(edge.points.length / 2)] : null;
        text.setAttribute('x', mid ? ox + mid.x + 4 : (x1 + x2) / 2 + 4);
        text.setAttribute('y', mid ? oy + mid.y : (y1 + y2) / 2);
        text.setAttribute('class', 'gate-label');
        text.textContent = edge.label;
        svg.append(text);
      }
    }
    nodes.forEach((node, i) => {
      const full = prefix + node.id;
      const box = el('div', node.scopes ? 'node container' : 'node');
      box.dataset.node = full;
      box.dataset.type = node.type;
      box.dataset.state = this.states.get(full) || 'pending';
      box.style.left = `${ox + x[i]}px`;
      box.style.top = `${oy + y[i]}px`;
      box.style.width = `${w[i]}px`;
      box.style.height = `${h[i]}px`;
      box.title = node.description ? `${full}\n${node.description}` : full;
      const head = el('div', 'node-head');
      head.append(el('span', 'node-id', node.id), el('span', 'node-kind', node.detail ? `${node.type} · ${node.detail}` : node.type));
      const clock = el('span', 'node-clock');
      clock.dataset.clock = full;
      box.append(head, clock);
      this.clocks.set(full, clock);
      this.showClock(full, Date.now() / 1000);
      head.addEventListener('click', (event) => { event.stopPropagation(); this.select(full, node); });
      if (node.scopes && !this.allOpen) {
        const open = this.open.has(full);
        const toggle = el('button', 'toggle', open ? '−' : '+');
        toggle.type = 'button';
        toggle.title = open ? 'close' : 'show what is inside';
        toggle.setAttribute('aria-label', `${open ? 'close' : 'open'} ${full}`);
        toggle.addEventListener('click', (event) => { event.stopPropagation(); this.toggle(full); });
        const count = el('span', 'iterations', this.iterationText(full, node));
        count.dataset.iterations = full;
        box.append(toggle, count);
      }
      if (this.decorate) this.decorate(box, full, node);
      layer.append(box);
      this.els.set(full, box);
      const content = layout.inner.get(i);
      if (content) this.drawContent(content, ox + x[i], oy + y[i] + NODE_H, svg, layer);
    });
  }

  drawContent(content, ox, oy, svg, layer) {
    for (const part of content.parts) {
      const label = el('div', 'part-label');
      label.style.left = `${ox + part.x}px`;
      label.style.top = `${oy + 2}px`;
      label.append(el('span', '', part.label));
      if (part.full !== undefined) label.append(this.iterationPicker(part));
      if (part.scope.note) label.append(el('span', 'note', part.scope.note));
      layer.append(label);
      this.drawLayout(part.layout, ox + part.x, oy + PART_HEAD, svg, layer);
    }
  }

  iterationPicker(part) {
    const select = el('select', 'iteration');
    select.setAttribute('aria-label', `iteration of ${part.full}`);
    this.selects.set(part.full, { select, start: part.scope.index });
    this.fillPicker(part.full);
    select.value = String(part.iteration);
    select.addEventListener('change', () => { this.choice.set(part.full, Number(select.value)); this.redraw(); });
    return select;
  }

  fillPicker(full) {
    const entry = this.selects.get(full);
    if (!entry) return;
    const { select, start } = entry;
    const last = Math.max(this.iterations.get(full) ?? start, Number(select.value || start));
    for (let i = start + select.options.length; i <= last && select.options.length < 10000; i++) {
      const option = el('option', '', `iteration ${i}`);
      option.value = String(i);
      select.append(option);
    }
  }

  iterationText(full, node) {
    const last = this.iterations.get(full);
    if (last === undefined) return '';
    const kind = node.scopes && node.scopes[0].kind;
    if (kind === 'branch' || kind === 'plain') return '';
    const start = node.scopes[0].index;
    return `${last - start + 1} ${node.type === 'loop' ? 'items' : 'iterations'}`;
  }

  // -- interaction ------------------------------------------------------------------------

  isOpen(full) {
    return this.allOpen || this.open.has(full);
  }

  toggle(full) {
    if (this.open.has(full)) this.open.delete(full); else this.open.add(full);
    this.redraw();
  }

  redraw() {
    const { scale, tx, ty } = this;
    this.draw();
    this.scale = scale; this.tx = tx; this.ty = ty;
    this.transform();
  }

  openAll(open) {
    const walk = (nodes, prefix) => nodes.forEach((node) => {
      if (!node.scopes) return;
      const full = prefix + node.id;
      if (open) this.open.add(full); else this.open.delete(full);
      if (open) for (const shown of this.scopesShown(node, full)) walk(shown.scope.nodes, shown.prefix);
    });
    walk(this.graph.nodes || [], '');
    this.draw();
    this.fit();
  }

  select(full, node) {
    if (this.selected && this.els.has(this.selected)) this.els.get(this.selected).classList.remove('selected');
    this.selected = full;
    if (full && this.els.has(full)) this.els.get(full).classList.add('selected');
    if (full) this.onSelect(full, node);
  }

  // States known without events (the run record's); events that follow override them.
  seed(states, tookMs = {}) {
    for (const [id, state] of Object.entries(states)) {
      this.states.set(id, state);
      if (tookMs[id] !== undefined && !TICKING.has(state)) this.tookMs.set(id, tookMs[id]);
      const box = this.els.get(id);
      if (box) box.dataset.state = state;
      this.showClock(id, Date.now() / 1000);
    }
  }

  // Node states from events (slim events: type, node_id); returns how many nodes changed.
  apply(events) {
    let changed = 0;
    const containers = new Set();
    for (const event of events) {
      const state = STATE_OF[event.type];
      if (!state || !event.node_id) continue;
      const id = event.node_id;
      this.states.set(id, state);
      changed++;
      if (event.type === 'node_started' && event.ts) { this.startedAt.set(id, event.ts); this.tookMs.delete(id); }
      if (!TICKING.has(state)) {
        this.startedAt.delete(id);
        if (event.duration_ms !== undefined && event.duration_ms !== null) this.tookMs.set(id, event.duration_ms);
      }
      this.showClock(id, Date.now() / 1000);
      const box = this.els.get(id);
      if (box) box.dataset.state = state;
      CONTAINER_ITER.lastIndex = 0;
      let match;
      while ((match = CONTAINER_ITER.exec(id)) !== null) {
        const container = id.slice(0, match.index) + match[1];
        const iteration = Number(match[2]);
        if (iteration > (this.iterations.get(container) ?? -1)) {
          this.iterations.set(container, iteration);
          containers.add(container);
        }
        if (state === 'failed' && !(this.firstFailed.get(container) <= iteration)) this.firstFailed.set(container, iteration);
      }
    }
    let follow = false;
    for (const container of containers) {
      const badge = this.canvas.querySelector(`[data-iterations="${CSS.escape(container)}"]`);
      const node = this.els.get(container);
      if (badge && node) badge.textContent = this.iterationText(container, this.nodeAt(container));
      this.fillPicker(container);
      // An open loop follows its newest item unless the user picked one (or an item failed).
      if (this.open.has(container) && this.selects.has(container) && !this.choice.has(container)) follow = true;
    }
    if (follow && !this.following) {
      this.following = setTimeout(() => { this.following = null; this.redraw(); }, 250);  // at most 4 redraws a second
    }
    return changed;
  }

  // A running node's clock counts from its start; an ended one shows how long it took. `now`: seconds.
  showClock(full, now) {
    const clock = this.clocks.get(full);
    if (!clock) return;
    const since = this.startedAt.get(full), took = this.tookMs.get(full);
    const running = since !== undefined && TICKING.has(this.states.get(full));
    clock.textContent = running ? clockText(Math.max(0, now - since)) : (took !== undefined ? clockText(took / 1000) : '');
    clock.classList.toggle('ticking', running);
  }

  // Moves the clocks of the running nodes on (the run view calls it every second).
  tick(now = Date.now() / 1000) {
    for (const full of this.startedAt.keys()) this.showClock(full, now);
  }

  nodeAt(full) {
    let nodes = this.graph.nodes || [], found = null;
    for (const segment of full.split('.')) {
      const name = segment.replace(/\[\d+\]$/, '');
      found = nodes.find((node) => node.id === name);
      if (!found) return null;
      const index = /\[(\d+)\]$/.exec(segment);
      const scopes = found.scopes || [];
      const scope = scopes.find((s) => s.kind === 'branch' && index && s.index === Number(index[1])) || scopes[0];
      nodes = scope ? scope.nodes : [];
    }
    return found;
  }

  counts() {
    const counts = {};
    for (const state of this.states.values()) counts[state] = (counts[state] || 0) + 1;
    return counts;
  }

  // -- pan and zoom -------------------------------------------------------------------------

  transform() {
    this.canvas.style.transform = `translate(${this.tx}px, ${this.ty}px) scale(${this.scale})`;
  }

  fit() {
    const vw = this.viewport.clientWidth || 800, vh = this.viewport.clientHeight || 500;
    this.scale = Math.min(1, Math.max(0.3, Math.min(vw / this.width, vh / this.height)));
    this.tx = (vw - this.width * this.scale) / 2;  // centred: a graph wider than the view shows its middle
    this.ty = 0;
    this.transform();
  }

  zoom(factor, cx, cy) {
    const rect = this.viewport.getBoundingClientRect();
    const px = cx ?? rect.width / 2, py = cy ?? rect.height / 2;
    const scale = Math.min(2.5, Math.max(0.05, this.scale * factor));
    this.tx = px - ((px - this.tx) * scale) / this.scale;
    this.ty = py - ((py - this.ty) * scale) / this.scale;
    this.scale = scale;
    this.transform();
  }

  _pan() {
    let drag = null;
    this.viewport.addEventListener('wheel', (event) => {
      event.preventDefault();
      const rect = this.viewport.getBoundingClientRect();
      this.zoom(Math.exp(-event.deltaY * 0.0015), event.clientX - rect.left, event.clientY - rect.top);
    }, { passive: false });
    this.viewport.addEventListener('pointerdown', (event) => {
      if (event.target.closest('.node-head, button, select, .no-pan')) return;
      drag = { x: event.clientX - this.tx, y: event.clientY - this.ty };
      this.viewport.setPointerCapture(event.pointerId);
      this.viewport.classList.add('dragging');
    });
    this.viewport.addEventListener('pointermove', (event) => {
      if (!drag) return;
      this.tx = event.clientX - drag.x;
      this.ty = event.clientY - drag.y;
      this.transform();
    });
    const stop = () => { drag = null; this.viewport.classList.remove('dragging'); };
    this.viewport.addEventListener('pointerup', stop);
    this.viewport.addEventListener('pointercancel', stop);
  }
}
