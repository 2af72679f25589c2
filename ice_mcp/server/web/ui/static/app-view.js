// The run view inside an MCP host (MCP Apps, io.modelcontextprotocol/ui): the tool result names a run, and the
// view follows it through the host's bridge with run_status, drawn by the /ui graph code (dag.js, inlined with
// this file into one module). Every text from the server goes into the page as text, never as HTML.
import { DagView } from './dag.js';
import { badge, fill, fmtCost, fmtDuration, h, readFields, sleep } from './dom.js';

const PROTOCOL_VERSION = '2026-01-26';  // the MCP Apps revision this view speaks
const POLL_MS = 1000;                   // run_status at most once a second
const IDLE_POLL_MS = 5000;              // while nothing changes it asks less and less often, down to this
const UNDER_WAY = new Set(['queued', 'running', 'input_required']);
const AS_NODE_STATE = { queued: 'pending', input_required: 'waiting' };  // a network's run statuses on its nodes
const main = document.getElementById('main');

// -- helpers (besides dom.js's) ------------------------------------------------------------

const pre = (text, cls) => h('pre', { class: cls || 'value' }, text);
const errorBox = (error) => h('div', { class: 'error-box', role: 'alert' }, error instanceof Error ? error.message : String(error));

// -- the bridge: JSON-RPC 2.0 over postMessage with the host (or its sandbox proxy) -------------------

class HostBridge {
  constructor(host) {
    this.host = host;
    this.nextId = 1;
    this.pending = new Map();
    this.notifications = {};
    this.requests = { ping: () => ({}) };
    window.addEventListener('message', (event) => this.receive(event));
  }

  receive(event) {
    if (event.source !== this.host) return;  // only the frame that holds this view speaks for the host
    const message = event.data;
    if (!message || message.jsonrpc !== '2.0') return;
    if (message.method === undefined) {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.error) waiting.reject(new Error(message.error.message || 'the host refused the request'));
      else waiting.resolve(message.result || {});
    } else if (message.id !== undefined) {
      this.answer(message);
    } else if (this.notifications[message.method]) {
      this.notifications[message.method](message.params || {});
    }
  }

  async answer(message) {
    const handler = this.requests[message.method];
    let reply;
    if (!handler) reply = { error: { code: -32601, message: `Method not found: ${message.method}` } };
    else {
      try { reply = { result: (await handler(message.params || {})) || {} }; } catch (error) { reply = { error: { code: -32000, message: String(error.message || error) } }; }
    }
    this.post({ jsonrpc: '2.0', id: message.id, ...reply });
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.post({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method, params) { this.post({ jsonrpc: '2.0', method, params }); }

  // The host's origin is not known to a sandboxed frame (its own is opaque): the target is the parent itself.
  post(message) { this.host.postMessage(message, '*'); }
}

const bridge = new HostBridge(window.parent);

// A tool result's data: its structuredContent, else the JSON of its first text block that has some.
function resultData(result) {
  if (result && result.structuredContent) return result.structuredContent;
  for (const block of (result && result.content) || []) {
    if (block.type !== 'text') continue;
    try { return JSON.parse(block.text); } catch { /* prose: the next block may hold the JSON */ }
  }
  return null;
}

function resultText(result) {
  return ((result && result.content) || []).filter((b) => b.type === 'text').map((b) => b.text).join('\n');
}

async function callTool(name, args) {
  const result = await bridge.request('tools/call', { name, arguments: args });
  const data = resultData(result);
  if (result.isError) throw new Error((data && data.error && data.error.message) || resultText(result) || `${name} failed`);
  return data || {};
}

// Every run_status call of this view, following or opening a node, takes a slot at least POLL_MS after the last.
let nextSlot = 0;
async function runStatus(args) {
  const now = Date.now();
  const slot = Math.max(now, nextSlot);
  nextSlot = slot + POLL_MS;
  await sleep(slot - now);
  return callTool('run_status', args);
}

// -- following a run ------------------------------------------------------------------------------

class Follower {
  constructor(runId) {
    this.runId = runId;
    this.seen = -1;
    this.run = { run_id: runId, status: 'running' };
    this.stopped = false;
    this.delay = POLL_MS;
    this.timer = null;
    this.wake = null;
    this.dag = null;
    this.selected = null;
    this.nodeRequest = 0;
    this.network = null;  // a network: its workflows, {id: {status, run_id}}
    this.lastLook = false;
    this.head = h('div', { class: 'run-head' });
    this.questions = h('div', { class: 'questions', id: 'questions' });
    this.tools = h('div', { class: 'graph-tools' });
    this.counts = h('div', { class: 'counts', id: 'state-counts' });
    this.pane = h('div', { class: 'graph-pane' });
    this.side = h('aside', { class: 'side', id: 'side' });
    this.problemBox = h('div', { id: 'view-problem' });
    fill(main, h('section', { class: 'run app-run' }, this.head, this.problemBox, this.questions, this.tools, this.pane, this.side));
    this.renderHead();
    this.loop();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.wake) this.wake();
  }

  // Ask again soon (after the user acted), still within the once-a-second budget.
  soon() {
    this.delay = POLL_MS;
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(this.wake, 0);
  }

  async loop() {
    while (!this.stopped) {
      let answer = null;
      try {
        answer = await runStatus({ run_id: this.runId, seen: this.seen });
        fill(this.problemBox);
      } catch (error) {
        fill(this.problemBox, errorBox(error));
      }
      if (this.stopped) return;
      if (answer) {
        this.apply(answer);
        // Ended: stop once the run's last events are in too (a replica's journal may trail its record), or
        // after one more look.
        if (!UNDER_WAY.has(answer.status) && (answer.final !== false || this.lastLook)) { this.finished(); return; }
        this.lastLook = !UNDER_WAY.has(answer.status);
      }
      const changed = answer && (answer.more || (answer.events && answer.events.length) || answer.workflows);
      this.delay = changed ? POLL_MS : Math.min(Math.round(this.delay * 1.5), IDLE_POLL_MS);
      await new Promise((resolve) => { this.wake = resolve; this.timer = setTimeout(resolve, this.delay - POLL_MS); });
      this.timer = null;
    }
  }

  apply(answer) {
    if (answer.kind === 'network') { this.applyNetwork(answer); return; }
    this.seen = answer.seen;
    for (const key of ['workflow', 'status', 'cost_usd', 'duration_ms', 'error', 'outputs', 'questions']) {
      if (answer[key] !== undefined) this.run[key] = answer[key];
    }
    if (answer.graph !== undefined) this.drawGraph(answer.graph, answer.node_states || {});
    if (this.dag && answer.events.length) this.dag.apply(answer.events);
    this.renderHead();
    if (answer.questions !== undefined) this.renderQuestions();
    this.renderCounts();
    if (!this.selected) this.renderRun();
    else if (answer.events.some((event) => event.node_id === this.selected && event.type !== 'node_started')) this.openNode(this.selected);
  }

  applyNetwork(answer) {
    this.seen = answer.seen;
    Object.assign(this.run, { workflow: answer.workflow, status: answer.status, cost_usd: answer.cost_usd, network: true });
    if (answer.workflows) {
      const known = this.network ? Object.keys(this.network).join() : null;
      this.network = answer.workflows;
      if (known !== Object.keys(this.network).join()) {
        const nodes = Object.entries(this.network).map(([id]) => ({ id, type: 'workflow', detail: 'run', deps: [] }));
        this.drawGraph({ nodes }, {});
      }
      this.dag.seed(Object.fromEntries(Object.entries(this.network).map(([id, w]) => [id, AS_NODE_STATE[w.status] || w.status || 'pending'])));
    }
    this.renderHead();
    this.renderCounts();
    if (!this.selected) this.renderRun();
  }

  drawGraph(graph, states) {
    this.pane.replaceChildren();
    this.dag = null;
    if (!graph || !graph.nodes || !graph.nodes.length) {
      this.pane.append(h('p', { class: 'muted view-message' }, 'No graph: the blueprint of this run is not available here.'));
      return;
    }
    this.dag = new DagView(this.pane, graph, { onSelect: (full) => this.openNode(full) });
    this.dag.seed(states);
    const dag = this.dag;
    fill(this.tools,
      h('button', { type: 'button', onclick: () => dag.fit() }, 'Fit'),
      h('button', { type: 'button', onclick: () => dag.zoom(1.25) }, '+'),
      h('button', { type: 'button', onclick: () => dag.zoom(0.8) }, '−'),
      h('button', { type: 'button', onclick: () => dag.openAll(true) }, 'Open all'),
      h('button', { type: 'button', onclick: () => dag.openAll(false) }, 'Close all'),
      this.counts,
      graph.approximate ? h('span', { class: 'muted' }, 'drawn from the blueprint (it does not compile here)') : null,
      graph.truncated ? h('span', { class: 'muted' }, 'too many nodes: only part is drawn') : null);
  }

  renderHead() {
    const run = this.run;
    const cancel = UNDER_WAY.has(run.status) && !this.stopped
      ? h('button', { type: 'button', id: 'cancel-run', class: 'danger', onclick: (event) => this.cancel(event.target) }, 'Cancel run') : null;
    fill(this.head,
      h('h1', {}, run.workflow || (run.network ? 'network' : 'run')),
      h('span', { id: 'run-status' }, badge(run.status)),
      h('code', { class: 'mono', title: run.network ? 'network run id' : 'run id' }, this.runId),
      h('span', { class: 'facts' },
        run.duration_ms !== undefined && run.duration_ms !== null ? h('span', {}, fmtDuration(run.duration_ms)) : null,
        run.cost_usd !== undefined ? h('span', {}, fmtCost(run.cost_usd)) : null),
      h('span', { class: 'actions' }, cancel));
  }

  renderCounts() {
    if (!this.dag) return;
    fill(this.counts, Object.entries(this.dag.counts()).sort().map(([state, n]) => h('span', { class: `count state-${state}`, dataset: { state } }, `${n} ${state}`)));
  }

  renderRun() {
    const run = this.run;
    fill(this.side, h('h2', {}, 'Run'),
      run.error ? h('div', { class: 'run-error' }, h('div', { class: 'label' }, 'Error'), h('div', { class: 'error-text' }, run.error)) : null,
      run.network ? null : h('div', { class: 'label' }, 'Outputs'),
      run.network ? null : (run.outputs ? pre(run.outputs, 'value outputs') : h('p', { class: 'muted' }, UNDER_WAY.has(run.status) ? 'not yet' : 'none')),
      h('p', { class: 'muted hint' }, run.network ? 'Click a workflow to follow its run.' : 'Click a node to see its output, error, attempts and cost.'));
  }

  // A waiting `human` node's question, answered from here with run_respond.
  renderQuestions() {
    const questions = this.run.questions || {};
    fill(this.questions, Object.entries(questions).map(([path, question]) => questionForm(path, question, async (answer) => {
      await callTool('run_respond', { run_id: this.runId, node: path, answer, wait_seconds: 0 });
      this.soon();
    })));
  }

  async cancel(button) {
    button.disabled = true;
    try {
      await callTool('run_cancel', { run_id: this.runId });
      this.soon();
    } catch (error) {
      fill(this.problemBox, errorBox(error));
      button.disabled = false;
    }
  }

  back() {
    this.selected = null;
    if (this.dag) this.dag.select(null, null);
    this.renderRun();
  }

  async openNode(full) {
    this.selected = full;
    if (this.network) { this.showWorkflow(full); return; }
    const mine = ++this.nodeRequest;
    let detail;
    try {
      detail = await runStatus({ run_id: this.runId, node: full });
    } catch (error) {
      if (mine === this.nodeRequest) fill(this.side, errorBox(error));
      return;
    }
    if (mine !== this.nodeRequest || this.selected !== full) return;
    fill(this.side,
      h('div', { class: 'side-head' },
        h('button', { type: 'button', class: 'link', onclick: () => this.back() }, '← Run'),
        h('h2', { class: 'mono', id: 'node-title' }, full), badge(detail.status)),
      h('dl', { class: 'facts-list' },
        h('dt', {}, 'Attempts'), h('dd', { id: 'node-attempts' }, String(detail.attempts)),
        h('dt', {}, 'Duration'), h('dd', {}, fmtDuration(detail.duration_ms)),
        h('dt', {}, 'Cost'), h('dd', {}, detail.cost_usd === null ? '—' : fmtCost(detail.cost_usd))),
      detail.question ? h('div', {}, h('div', { class: 'label' }, 'Question'), h('p', {}, detail.question.question)) : null,
      detail.error ? h('div', { class: 'node-error', id: 'node-error' }, h('div', { class: 'label' }, 'Error'), pre(detail.error, 'value error')) : null,
      h('div', { class: 'label' }, 'Output'),
      detail.output !== null ? pre(detail.output, 'value node-output') : h('p', { class: 'muted' }, '—'));
  }

  showWorkflow(id) {
    const workflow = (this.network || {})[id] || {};
    fill(this.side,
      h('div', { class: 'side-head' },
        h('button', { type: 'button', class: 'link', onclick: () => this.back() }, '← Network'),
        h('h2', { class: 'mono', id: 'node-title' }, id), badge(workflow.status || 'pending')),
      workflow.run_id ? h('button', { type: 'button', id: 'follow-run', onclick: () => follow(workflow.run_id) }, 'Follow its run')
        : h('p', { class: 'muted' }, 'Not started yet.'));
  }

  finished() {
    this.renderHead();
    const text = `Run ${this.runId} (${this.run.workflow}) ${this.run.status}${this.run.error ? `: ${this.run.error}` : ''}`;
    bridge.request('ui/update-model-context', { content: [{ type: 'text', text }] }).catch(() => {});  // a courtesy: hosts may refuse
  }
}

// The form for one question: approve or reject a gate, or fill the fields of its answer schema.
function questionForm(path, question, send) {
  const message = h('div', {});
  const submit = async (answer) => {
    fill(message);
    for (const button of box.querySelectorAll('button')) button.disabled = true;
    try { await send(answer); fill(message, h('p', { class: 'muted' }, 'Answer sent.')); } catch (error) {
      fill(message, errorBox(error));
      for (const button of box.querySelectorAll('button')) button.disabled = false;
    }
  };
  let form;
  if (question.approval) {
    const reason = h('input', { type: 'text', name: 'reason', placeholder: 'reason (optional)', 'aria-label': 'reason' });
    const answer = (approved) => (reason.value ? { approved, reason: reason.value } : { approved });
    form = h('div', { class: 'answer-form' }, reason,
      h('div', { class: 'buttons' },
        h('button', { type: 'button', class: 'approve', onclick: () => submit(answer(true)) }, 'Approve'),
        h('button', { type: 'button', class: 'reject danger', onclick: () => submit(answer(false)) }, 'Reject')));
  } else {
    const fields = schemaFields(question.schema || {});
    const answer = () => { try { submit(fields.read()); } catch (error) { fill(message, errorBox(error)); } };
    // No <form>: hosts sandbox the view, most without allow-forms, which blocks a form's submit event.
    form = h('div', { class: 'answer-form', onkeydown: (event) => { if (event.key === 'Enter' && event.target.tagName === 'INPUT') answer(); } },
      fields.elements, h('div', { class: 'buttons' }, h('button', { type: 'button', class: 'answer', onclick: answer }, 'Answer')));
  }
  const box = h('div', { class: 'question', dataset: { question: path } },
    h('div', { class: 'label' }, `${path} asks`), h('p', { class: 'prompt' }, question.question || ''), form, message);
  return box;
}

// Inputs for an object schema's properties (strings, numbers, booleans, enums; anything else as JSON).
function schemaFields(schema) {
  const required = new Set(schema.required || []);
  const readers = [];
  const elements = Object.entries(schema.properties || {}).map(([name, prop]) => {
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
    let control, read;
    if (Array.isArray(prop.enum)) {
      control = h('select', { name }, prop.enum.map((value, i) => h('option', { value: String(i) }, JSON.stringify(value))));
      read = () => prop.enum[Number(control.value)];
    } else if (type === 'boolean') {
      control = h('input', { name, type: 'checkbox', checked: prop.default === true });
      read = () => control.checked;
    } else if (type === 'number' || type === 'integer') {
      control = h('input', { name, type: 'number', step: type === 'integer' ? '1' : 'any' });
      read = () => (control.value === '' ? undefined : Number(control.value));
    } else if (type === 'string' || type === undefined) {
      control = h('input', { name, type: 'text' });
      read = () => (control.value === '' && !required.has(name) ? undefined : control.value);
    } else {
      control = h('textarea', { name, rows: '3', placeholder: 'JSON' });
      read = () => {
        if (!control.value.trim()) return undefined;
        try { return JSON.parse(control.value); } catch { throw new Error(`${name}: not valid JSON`); }
      };
    }
    readers.push([name, read]);
    return h('label', { class: 'field' },
      h('span', { class: 'field-name' }, prop.title || name, required.has(name) ? h('span', { class: 'required' }, ' *') : null),
      control, prop.description ? h('span', { class: 'muted hint' }, prop.description) : null);
  });
  const read = () => readFields(readers);
  return { elements, read };
}

// -- the view's life: initialize, the tool's result, teardown ----------------------------------------

let follower = null;

function follow(runId) {
  if (follower) follower.stop();
  follower = new Follower(runId);
}

function say(text) {
  if (follower) return;
  fill(main, h('p', { class: 'muted view-message', id: 'view-message' }, text));
}

bridge.notifications['ui/notifications/tool-input'] = () => say('Starting the run…');
bridge.notifications['ui/notifications/tool-result'] = (result) => {
  const data = resultData(result) || {};
  const runId = data.run_id || data.network_id;
  if (runId) follow(runId);
  else say((data.error && data.error.message) || resultText(result) || 'The call started no run.');
};
bridge.notifications['ui/notifications/tool-cancelled'] = (params) => say(`The call was cancelled${params.reason ? `: ${params.reason}` : ''}.`);
bridge.notifications['ui/notifications/host-context-changed'] = (context) => useContext(context);
bridge.requests['ui/resource-teardown'] = () => { if (follower) follower.stop(); return {}; };

function useContext(context) {
  const size = context.containerDimensions;
  if (size) document.body.classList.toggle('fixed-height', size.height !== undefined);
}

// Tell the host how tall the view is whenever that changes (it sizes the frame to it).
function reportSize() {
  let last = '', frame = 0;
  const send = () => {
    frame = 0;
    const box = document.documentElement.getBoundingClientRect();  // the content's size: it shrinks too
    const width = Math.ceil(box.width), height = Math.ceil(box.height);
    if (`${width}x${height}` === last) return;
    last = `${width}x${height}`;
    bridge.notify('ui/notifications/size-changed', { width, height });
  };
  new ResizeObserver(() => { if (!frame) frame = requestAnimationFrame(send); }).observe(document.body);
}

async function connect() {
  const result = await bridge.request('ui/initialize', {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: { name: 'ice_mcp run view', version: '1.0.0' },
    appCapabilities: { availableDisplayModes: ['inline'] },
  });
  useContext(result.hostContext || {});
  bridge.notify('ui/notifications/initialized', {});
  reportSize();
}

connect().catch((error) => say(`This view needs an MCP Apps host: ${error.message}`));
