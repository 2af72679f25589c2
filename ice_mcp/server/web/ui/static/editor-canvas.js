// The editor's canvas: the blueprint's graph drawn by dag.js's DagView (laid out by dagre), plus what editing needs:
// nodes reachable by Tab, a port to drag a new edge from, a handle at each declared edge's end to drag it elsewhere,
// Delete and the arrow keys, and validation issues pinned to their nodes.
import { DagView } from './dag.js';
import { dagreLayered } from './layout.js';
import { toGraph } from './editor-model.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

export class EditorCanvas {
  // handlers: {select(full|null), connect(from, to), reconnect(from, to, target), remove(full), disconnect(from, to)}
  constructor(host, types, handlers) {
    this.host = host;
    this.types = types;
    this.on = handlers;
    this.selected = null;
    this.selectedEdge = null;
    this.issues = [];
    this.explicit = new Map();  // full id -> its declared dependencies (edges that can be moved or removed)
    this.dag = null;
    host.addEventListener('keydown', (event) => this.key(event));
  }

  show(blueprint) {
    const graph = toGraph(blueprint, this.types);
    this.explicit.clear();
    const walk = (nodes, prefix) => nodes.forEach((node) => {
      this.explicit.set(prefix + node.id, new Set(node.explicit));
      (node.scopes || []).forEach((scope) => walk(scope.nodes, `${prefix}${node.id}[${scope.index}].`));
    });
    walk(graph.nodes, '');
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.node : null;
    if (!this.dag) {
      this.dag = new DagView(this.host, graph, {
        layout: dagreLayered, allOpen: true,
        onSelect: (full) => this.select(full),
        decorate: (box, full, node) => this.decorate(box, full, node),
      });
      // A click on the background (pressed and released there, not a pan) leaves no node selected.
      let down = null;
      this.dag.viewport.addEventListener('pointerdown', (event) => {
        down = event.target.closest('.node, .edge-end, .port') ? null : [event.clientX, event.clientY];
      });
      this.dag.viewport.addEventListener('click', (event) => {
        if (down && Math.hypot(event.clientX - down[0], event.clientY - down[1]) < 4) this.select(null);
        down = null;
      });
    } else {
      this.dag.graph = graph;
      this.dag.redraw();
    }
    this.dag.selected = null;
    this.handles();
    this.pin(this.issues);
    if (this.selected && !this.dag.els.has(this.selected)) this.selected = null;
    if (this.selected) this.dag.els.get(this.selected).classList.add('selected');
    if (focused && this.dag.els.has(focused)) this.dag.els.get(focused).focus({ preventScroll: true });
  }

  fit() { if (this.dag) this.dag.fit(); }

  decorate(box, full, node) {
    box.tabIndex = 0;
    box.setAttribute('role', 'button');
    box.setAttribute('aria-label', `${node.type} node ${full}`);
    box.addEventListener('focus', () => { if (this.selected !== full) this.select(full); });
    box.addEventListener('click', (event) => { if (!event.target.closest('.port')) { event.stopPropagation(); this.select(full); } });
    const port = document.createElement('span');
    port.className = 'port no-pan';
    port.title = 'drag onto another node to connect';
    port.dataset.port = full;
    port.addEventListener('pointerdown', (event) => this.drag(event, port, (target) => this.on.connect(full, target)));
    box.append(port);
  }

  // A handle at the end of every declared dependency's edge: drag it onto another node to move the edge there.
  handles() {
    for (const edge of this.dag.drawnEdges) {
      if (!(this.explicit.get(edge.to) || new Set()).has(edge.from.split('.').pop())) continue;
      edge.path.classList.add('declared');
      const end = document.createElement('span');
      end.className = 'edge-end no-pan';
      end.tabIndex = -1;
      end.dataset.from = edge.from;
      end.dataset.to = edge.to;
      end.title = `${edge.from} → ${edge.to}: drag to another node to reconnect, or select and press Delete`;
      end.style.left = `${edge.x}px`;
      end.style.top = `${edge.y}px`;
      end.addEventListener('pointerdown', (event) => {
        this.selectEdge(edge.from, edge.to);
        this.drag(event, end, (target) => { if (target !== edge.to) this.on.reconnect(edge.from, edge.to, target); });
      });
      this.dag.canvas.append(end);
    }
  }

  // Drags a dashed line from `source` and calls done(fullId) with the node it is dropped on.
  drag(event, source, done) {
    event.preventDefault();
    event.stopPropagation();
    const dag = this.dag;
    const toCanvas = (e) => {
      const rect = dag.viewport.getBoundingClientRect();
      return [(e.clientX - rect.left - dag.tx) / dag.scale, (e.clientY - rect.top - dag.ty) / dag.scale];
    };
    const [x0, y0] = toCanvas(event);
    const svg = dag.canvas.querySelector('svg.dag-edges');
    const line = document.createElementNS(SVG_NS, 'path');
    line.setAttribute('class', 'dragging-edge');
    svg.append(line);
    const move = (e) => { const [x, y] = toCanvas(e); line.setAttribute('d', `M${x0},${y0} L${x},${y}`); };
    const up = (e) => {
      window.removeEventListener('pointermove', move);
      window.removeEventListener('pointerup', up);
      line.remove();
      const under = document.elementsFromPoint(e.clientX, e.clientY).find((el) => el.classList && el.classList.contains('node'));
      if (under) done(under.dataset.node);
    };
    window.addEventListener('pointermove', move);
    window.addEventListener('pointerup', up);
  }

  select(full) {
    this.selectedEdge = null;
    for (const el of this.host.querySelectorAll('.edge-end.selected')) el.classList.remove('selected');
    if (this.selected && this.dag.els.has(this.selected)) this.dag.els.get(this.selected).classList.remove('selected');
    this.selected = full;
    if (full && this.dag.els.has(full)) this.dag.els.get(full).classList.add('selected');
    this.on.select(full);
  }

  selectEdge(from, to) {
    this.select(null);
    this.selectedEdge = { from, to };
    const end = this.host.querySelector(`.edge-end[data-from="${CSS.escape(from)}"][data-to="${CSS.escape(to)}"]`);
    if (end) { end.classList.add('selected'); end.focus({ preventScroll: true }); }
  }

  focusNode(full) {
    this.select(full);
    const box = this.dag.els.get(full);
    if (box) box.focus({ preventScroll: true });
  }

  key(event) {
    if (event.target.closest('input, textarea, select')) return;
    if (event.key === 'Delete' || event.key === 'Backspace') {
      if (this.selectedEdge) { event.preventDefault(); this.on.disconnect(this.selectedEdge.from, this.selectedEdge.to); }
      else if (this.selected) { event.preventDefault(); this.on.remove(this.selected); }
      return;
    }
    const step = { ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] }[event.key];
    if (!step) return;
    event.preventDefault();
    const boxes = [...this.dag.els.entries()];
    if (!this.selected || !this.dag.els.has(this.selected)) { if (boxes.length) this.focusNode(boxes[0][0]); return; }
    const centre = (el) => [el.offsetLeft + el.offsetWidth / 2, el.offsetTop + Math.min(el.offsetHeight, 46) / 2];
    const [cx, cy] = centre(this.dag.els.get(this.selected));
    let best = null, bestScore = Infinity;
    for (const [full, el] of boxes) {
      if (full === this.selected) continue;
      const [x, y] = centre(el);
      const along = (x - cx) * step[0] + (y - cy) * step[1];
      if (along <= 1) continue;
      const across = Math.abs((x - cx) * step[1]) + Math.abs((y - cy) * step[0]);
      const score = along + 2 * across;
      if (score < bestScore) { best = full; bestScore = score; }
    }
    if (best) this.focusNode(best);
  }

  // issues: [{node, message}]; a node is matched by its full id, else by its own id.
  pin(issues) {
    this.issues = issues;
    if (!this.dag) return;
    const byId = new Map();
    for (const full of this.dag.els.keys()) byId.set(full.split('.').pop(), full);
    for (const el of this.host.querySelectorAll('.node.has-issue')) {
      el.classList.remove('has-issue');
      el.querySelector('.node-issue')?.remove();
    }
    const found = new Map();
    for (const issue of issues) {
      if (!issue.node) continue;
      const full = this.dag.els.has(issue.node) ? issue.node : byId.get(String(issue.node).split('.').pop().replace(/\[\d+\]$/, ''));
      if (!full) continue;
      if (!found.has(full)) found.set(full, []);
      found.get(full).push(issue);
    }
    for (const [full, list] of found) {
      const box = this.dag.els.get(full);
      box.classList.add('has-issue');
      const mark = document.createElement('span');
      mark.className = 'node-issue';
      mark.textContent = String(list.length);
      mark.title = list.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('\n');
      box.append(mark);
    }
  }
}
