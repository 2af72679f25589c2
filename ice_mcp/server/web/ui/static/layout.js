// The editor's automatic layout: one scope's nodes placed by dagre (vendored, dagre.min.js: the page loads it as a
// classic script, an MCP App inlines it before this), answered in the shape dag.js's own `layered` answers, so
// DagView draws an edited blueprint exactly as it draws a run.
// A scope of more than DAGRE_MAX nodes is laid out by dag.js's own layering instead: dagre takes ~1.7 s on 500 nodes
// and ~15 s on 1,000 in headless Chromium here, too slow to redraw on every edit; dag.js's takes milliseconds.
/* global dagre */
import { layered } from './dag.js';

const NODE_SEP = 28, RANK_SEP = 46, DAGRE_MAX = 200;

// nodes: [{id, deps, gates}]; size(i) -> {w, h}. Returns {x, y, w, h, edges, width, height} (top-left corners),
// each edge with the points dagre routed it by.
export function dagreLayered(nodes, size) {
  const n = nodes.length;
  if (n > DAGRE_MAX) return layered(nodes, size);
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: 'TB', nodesep: NODE_SEP, ranksep: RANK_SEP, marginx: 0, marginy: 0 });
  graph.setDefaultEdgeLabel(() => ({}));
  const w = [], h = [];
  for (let i = 0; i < n; i++) {
    const s = size(i);
    w[i] = s.w; h[i] = s.h;
    graph.setNode(String(i), { width: s.w, height: s.h });
  }
  const edges = [];
  nodes.forEach((node, v) => {
    const gates = new Map((node.gates || []).map(([cond, branch]) => [cond, branch ? 'true' : 'false']));
    for (const dep of new Set(node.deps || [])) {
      if (!index.has(dep) || dep === node.id) continue;
      const p = index.get(dep);
      graph.setEdge(String(p), String(v));
      edges.push({ from: p, to: v, label: gates.get(dep) || '' });
    }
  });
  dagre.layout(graph);
  const x = new Float64Array(n), y = new Float64Array(n);
  let left = Infinity, top = Infinity;
  for (let i = 0; i < n; i++) {
    const placed = graph.node(String(i));
    x[i] = placed.x - w[i] / 2; y[i] = placed.y - h[i] / 2;
    left = Math.min(left, x[i]); top = Math.min(top, y[i]);
  }
  let width = 0, height = 0;
  for (let i = 0; i < n; i++) {
    x[i] -= left; y[i] -= top;
    width = Math.max(width, x[i] + w[i]); height = Math.max(height, y[i] + h[i]);
  }
  for (const edge of edges) {
    const routedBy = graph.edge(String(edge.from), String(edge.to));
    if (routedBy && routedBy.points && routedBy.points.length > 1) edge.points = routedBy.points.map((pt) => ({ x: pt.x - left, y: pt.y - top }));
  }
  return { x, y, w, h, edges, width, height };
}
