// The run view: runs list, one run's live graph and node details, the workflow catalogue, the schedules.
// Every text from the server goes into the page as text (textContent), never as HTML.
import { DagView } from './dag.js';
import { add, badge, fill, fmtCost, fmtDuration, h, readFields, sleep } from './dom.js';
import { makeSchedules } from './schedules.js';
import { makeEvals } from './evals.js';

const TOKEN_KEY = 'ice_mcp.token';
const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'over_budget', 'input_required'];
// A run is under way while queued (its workflow's limits), running, or waiting for a person's answer.
const underWay = (status) => status === 'queued' || status === 'running' || status === 'input_required';
const main = document.getElementById('main');
let session = { admin: false, can_start: false, mode: 'server', read_only: false };
let tokenNeeded = false;  // the server answered 401: it has a token, whatever the session said
let cleanup = null;
// What the load test reads: events applied, and the lag from an event's time to its drawing.
const stats = (window.__ice = { events: 0, batches: 0, lags: [], layoutMs: null, firstEventAt: null, lastEventAt: null });

// -- helpers -------------------------------------------------------------------------------

const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

function headers(extra = {}) {
  const all = { ...extra };
  if (token()) all.Authorization = `Bearer ${token()}`;
  return all;
}

const fmtTokens = (n) => (n ? Number(n).toLocaleString() : '0');
const fmtTime = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : '—');
const elapsed = (run) => (run.duration_ms ?? (run.started_at ? Date.now() - run.started_at * 1000 : null));

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, { method = 'GET', body } = {}) {
  const init = { method, cache: 'no-store', headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (response.status === 401) { needToken(); askToken(signIn(response)); }
  if (!response.ok) {
    const error = data && data.error;
    throw new ApiError(response.status, (error && error.code) || `http_${response.status}`,
      (error && error.message) || `the server answered ${response.status}`);
  }
  return data;
}

// Server-sent events over fetch() (EventSource cannot send the Authorization header). The stream is
// pushed by the server; after a dropped connection it resumes after the last event seen.
function follow(path, onData, { signal, onEnd, resumable = false } = {}) {
  let last = -1, backoff = 500;
  (async () => {
    while (!signal.aborted) {
      try {
        const url = resumable ? `${path}?after=${last}` : path;
        const response = await fetch(url, { headers: headers({ Accept: 'text/event-stream' }), signal, cache: 'no-store' });
        if (response.status === 401) { needToken(); askToken(signIn(response)); return; }
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        backoff = 500;
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let kind = 'message', data = '';
            for (const line of frame.split('\n')) {
              if (line.startsWith('event:')) kind = line.slice(6).trim();
              else if (line.startsWith('data:')) data += line.slice(5).trim();
            }
            if (kind === 'end') { if (onEnd) onEnd(); return; }
            if (!data) continue;
            const message = JSON.parse(data);
            if (message.last_seq !== undefined) last = message.last_seq;
            onData(message);
          }
        }
      } catch (error) {
        if (signal.aborted) return;
      }
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 10000);
    }
  })();
}

function errorBox(error) {
  return h('div', { class: 'error-box', role: 'alert' }, error instanceof Error ? error.message : String(error));
}

function pre(text, cls) {
  return h('pre', { class: cls || 'value' }, text);
}

const schedules = makeSchedules({ h, fill, api, errorBox, pre, badge });
const evals = makeEvals({ h, fill, api, errorBox, badge });
const triggerLink = (trigger, options) => schedules.triggerLink(trigger, options) || evals.triggerLink(trigger, options);

// -- token and session ------------------------------------------------------------------------

const dialog = document.getElementById('token-dialog');

function askToken(why) {
  if (dialog.open) return;  // the first reason given stays
  document.getElementById('token-why').textContent = why;
  dialog.showModal();
}

// A 401's reason: an OAuth server (its challenge names resource metadata) signs the page in with a link.
const signIn = (response) => ((response.headers.get('WWW-Authenticate') || '').includes('resource_metadata')
  ? 'This server signs you in with OAuth: ask your assistant for a link to this page (the ui_link tool).'
  : 'The server needs a token to show runs.');

// The Token button is there only when a token means something: the server has an admin or a server token.
function needToken() {
  tokenNeeded = true;
  document.getElementById('token-button').hidden = false;
}

document.getElementById('token-button').addEventListener('click', () => {
  askToken(session.admin ? 'You are using the admin token.'
    : session.admin_configured ? `Type the admin token to cancel, retry and start runs${session.token_configured ? ' (or the server token to view them)' : ''}.`
      : 'Type the server token (ICE_MCP_TOKEN) to see runs.');
});

dialog.addEventListener('close', async () => {
  const input = document.getElementById('token-input');
  if (dialog.returnValue === 'save' && input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  if (dialog.returnValue === 'forget') sessionStorage.removeItem(TOKEN_KEY);
  input.value = '';
  if (dialog.returnValue === 'save' || dialog.returnValue === 'forget') { await loadSession(); route(); }
});

async function loadSession() {
  try {
    session = await api('/ui/api/session');
  } catch (error) {
    session = { admin: false, can_start: false, mode: 'server', read_only: true };
  }
  const who = document.getElementById('who');
  who.textContent = session.admin ? 'admin' : (session.mode === 'viewer' ? 'viewer · read-only' : (session.read_only ? 'read-only server' : 'viewer'));
  who.title = session.role_note || '';  // what "viewer" may and may not do here, and how to do more
  who.dataset.admin = session.admin ? 'yes' : 'no';
  document.getElementById('token-button').hidden = !(tokenNeeded || (!session.oauth && (session.admin_configured || session.token_configured)));
}

// -- router ------------------------------------------------------------------------------------

function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const [path, query] = (location.hash || '#/runs').slice(1).split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll('[data-nav]')) link.classList.toggle('active', link.dataset.nav === (parts[0] || 'runs'));
  const controller = new AbortController();
  cleanup = () => controller.abort();
  if (parts[0] === 'runs' && parts[1]) runView(parts[1], controller.signal);
  else if (parts[0] === 'workflows' && parts[1]) workflowView(parts[1], controller.signal);
  else if (parts[0] === 'workflows') workflowsView(controller.signal);
  else if (parts[0] === 'schedules' && parts[1]) schedules.detailView(main, parts[1], controller.signal);
  else if (parts[0] === 'schedules') schedules.listView(main, new URLSearchParams(query || ''), controller.signal);
  else if (parts[0] === 'evals' && parts[1]) evals.detailView(main, parts[1], controller.signal);
  else if (parts[0] === 'evals') evals.listView(main, controller.signal);
  else runsView(new URLSearchParams(query || ''), controller.signal);
}

// -- runs list ---------------------------------------------------------------------------------

async function runsView(query, signal) {
  const filter = { workflow: query.get('workflow') || '', status: query.get('status') || '' };
  const rows = new Map();
  const workflowSelect = h('select', { id: 'filter-workflow', 'aria-label': 'workflow' }, h('option', { value: '' }, 'all workflows'));
  const statusSelect = h('select', { id: 'filter-status', 'aria-label': 'status' }, h('option', { value: '' }, 'any status'),
    STATUSES.map((s) => h('option', { value: s }, s.replace('_', ' '))));
  const tbody = h('tbody', { id: 'runs-body' });
  const empty = h('p', { class: 'muted empty' }, 'No runs yet. Start one from Workflows, or from any MCP client.');
  fill(main, h('section', { class: 'runs' },
    h('div', { class: 'toolbar' }, h('h1', {}, 'Runs'), workflowSelect, statusSelect, h('span', { class: 'live', title: 'updated as runs start and end' }, 'live')),
    h('table', { class: 'runs-table' },
      h('thead', {}, h('tr', {}, ['Status', 'Workflow', 'Run', 'Started', 'Duration', 'Cost', 'Tokens', 'Error'].map((t) => h('th', {}, t)))),
      tbody),
    empty));
  const setFilter = () => {
    const params = new URLSearchParams();
    if (workflowSelect.value) params.set('workflow', workflowSelect.value);
    if (statusSelect.value) params.set('status', statusSelect.value);
    location.hash = `#/runs${params.toString() ? `?${params}` : ''}`;
  };
  workflowSelect.addEventListener('change', setFilter);
  statusSelect.addEventListener('change', setFilter);
  const addWorkflow = (name) => {
    if (![...workflowSelect.options].some((o) => o.value === name)) workflowSelect.append(h('option', { value: name }, name));
  };
  const matches = (run) => (!filter.workflow || run.workflow === filter.workflow) && (!filter.status || run.status === filter.status);
  const render = () => {
    const sorted = [...rows.values()].sort((a, b) => (b.started_at || 0) - (a.started_at || 0));
    fill(tbody, ...sorted.map((run) => h('tr', { dataset: { run: run.run_id, status: run.status }, onclick: () => { location.hash = `#/runs/${encodeURIComponent(run.run_id)}`; } },
      h('td', {}, badge(run.status)),
      h('td', {}, run.workflow, run.version ? h('span', { class: 'muted' }, ` v${run.version}`) : null,
        run.trigger ? h('div', { class: 'trigger-line' }, triggerLink(run.trigger, { stop: true })) : null),
      h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(run.run_id)}`, class: 'mono' }, run.run_id.slice(0, 12)),
        run.retry_of ? h('span', { class: 'muted' }, ' retry') : null),
      h('td', {}, fmtTime(run.started_at)),
      h('td', { class: 'num', dataset: underWay(run.status) ? { ticking: run.run_id } : {} }, fmtDuration(elapsed(run))),
      h('td', { class: 'num' }, fmtCost(run.cost_usd)),
      h('td', { class: 'num' }, fmtTokens(run.tokens)),
      h('td', { class: 'error-cell' }, run.error ? run.error.message : ''))));
    empty.hidden = rows.size > 0;
  };
  try {
    const [listed, catalogue] = await Promise.all([
      api(`/ui/api/runs?limit=200${filter.workflow ? `&workflow=${encodeURIComponent(filter.workflow)}` : ''}${filter.status ? `&status=${encodeURIComponent(filter.status)}` : ''}`),
      api('/ui/api/workflows').catch(() => ({ workflows: [] })),
    ]);
    catalogue.workflows.forEach((w) => addWorkflow(w.name));
    for (const run of listed.runs) { rows.set(run.run_id, run); addWorkflow(run.workflow); }
  } catch (error) {
    add(main, errorBox(error));
  }
  if (filter.workflow) addWorkflow(filter.workflow);
  workflowSelect.value = filter.workflow;
  statusSelect.value = filter.status;
  render();
  // The clock of running rows: a display timer, the data itself comes pushed by the stream.
  const ticker = setInterval(() => {
    for (const cell of tbody.querySelectorAll('[data-ticking]')) {
      const run = rows.get(cell.dataset.ticking);
      if (run) cell.textContent = fmtDuration(elapsed(run));
    }
  }, 1000);
  signal.addEventListener('abort', () => clearInterval(ticker));
  follow('/ui/api/runs/stream', (message) => {
    for (const run of message.runs || []) {
      addWorkflow(run.workflow);
      if (matches(run)) rows.set(run.run_id, run); else rows.delete(run.run_id);
    }
    render();
  }, { signal });
}

// -- one run -----------------------------------------------------------------------------------

function rootCause(cause) {
  if (!cause) return null;
  return h('div', { class: 'root-cause' },
    h('div', { class: 'label' }, 'Root cause'),
    cause.path ? h('div', { class: 'mono path' }, cause.path.join(' > ')) : null,
    h('div', {}, h('code', {}, cause.code || 'error'), ' ', cause.message || ''));
}

async function runView(runId, signal) {
  let data;
  try {
    data = await api(`/ui/api/runs/${encodeURIComponent(runId)}`);
  } catch (error) {
    fill(main, h('p', {}, h('a', { href: '#/runs' }, '← Runs')), errorBox(error));
    return;
  }
  if (signal.aborted) return;
  if (data.run.run_id !== runId) {  // a short id (the list's): the address names the whole one from here on
    runId = data.run.run_id;
    history.replaceState(null, '', `#/runs/${encodeURIComponent(runId)}`);
  }
  let run = data.run, here = data.here, selected = null;
  const head = h('div', { class: 'run-head' });
  const side = h('aside', { class: 'side', id: 'side' });
  const pane = h('div', { class: 'graph-pane' });
  const counts = h('div', { class: 'counts', id: 'state-counts' });
  const tools = h('div', { class: 'graph-tools' });
  fill(main, h('section', { class: 'run' }, head, h('div', { class: 'run-body' }, h('div', { class: 'graph-col' }, tools, pane), side)));
  let dag = null;
  if (data.graph && data.graph.nodes.length) {
    dag = new DagView(pane, data.graph, { onSelect: (full) => { selected = full; showNode(full); } });
    stats.layoutMs = dag.layoutMs;
    stats.dag = dag;
    add(tools,
      h('button', { type: 'button', onclick: () => dag.fit() }, 'Fit'),
      h('button', { type: 'button', onclick: () => dag.zoom(1.25) }, '+'),
      h('button', { type: 'button', onclick: () => dag.zoom(0.8) }, '−'),
      h('button', { type: 'button', onclick: () => dag.openAll(true) }, 'Open all'),
      h('button', { type: 'button', onclick: () => dag.openAll(false) }, 'Close all'),
      counts,
      data.graph.approximate ? h('span', { class: 'muted' }, 'drawn from the blueprint (it does not compile here)') : null,
      data.graph.truncated ? h('span', { class: 'muted' }, 'too many nodes: only part is drawn') : null);
    // The run record's states and times first: nodes a retry reused have no events in this run.
    dag.seed(run.node_states || {}, run.node_durations || {});
  } else {
    add(pane, h('p', { class: 'muted' }, 'No graph: the blueprint of this run is not available here.'));
  }

  const renderHead = () => {
    const actions = h('span', { class: 'actions' });
    if (session.admin && underWay(run.status)) {
      add(actions, h('button', { type: 'button', id: 'cancel-run', class: 'danger',
        title: here ? 'cancel this run' : 'cancel this run (another process runs it: it hears through the store)',
        onclick: async (event) => {
          event.target.disabled = true;
          try { await api(`/ui/api/runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST', body: {} }); } catch (error) { side.prepend(errorBox(error)); event.target.disabled = false; }
        } }, 'Cancel run'));
    }
    if (session.admin && !underWay(run.status) && run.status !== 'succeeded') {
      add(actions, h('button', { type: 'button', id: 'retry-run', onclick: () => retry(null) }, 'Retry'));
    }
    // Without the right to cancel or retry, the page says why and how to have it, where the buttons would be.
    const barred = !session.admin && session.controls_note && run.status !== 'succeeded'
      ? h('p', { class: 'muted controls-note', id: 'controls-note' }, session.controls_note) : null;
    fill(head,
      h('a', { href: '#/runs', class: 'back' }, '← Runs'),
      h('h1', {}, h('a', { href: `#/workflows/${encodeURIComponent(run.workflow)}` }, run.workflow)),
      h('span', { id: 'run-status' }, badge(run.status)),
      h('code', { class: 'mono', title: 'run id' }, run.run_id),
      run.retry_of ? h('a', { href: `#/runs/${encodeURIComponent(run.retry_of)}`, class: 'muted' }, `retry of ${run.retry_of.slice(0, 12)}`) : null,
      triggerLink(run.trigger),
      run.trace_id ? h('code', { class: 'mono muted', id: 'run-trace', title: 'trace id (OpenTelemetry)' }, `trace ${run.trace_id}`) : null,
      h('span', { class: 'facts' },
        h('span', {}, `started ${fmtTime(run.started_at)}`),
        h('span', { id: 'run-duration' }, fmtDuration(elapsed(run))),
        h('span', {}, fmtCost(run.cost_usd)),
        h('span', {}, `${fmtTokens(run.tokens)} tokens`)),
      actions, barred);
  };

  const retry = async (fromNode) => {
    try {
      const body = fromNode ? { from_node: fromNode } : {};
      const started = await api(`/ui/api/runs/${encodeURIComponent(runId)}/retry`, { method: 'POST', body });
      location.hash = `#/runs/${encodeURIComponent(started.run_id)}`;
    } catch (error) {
      side.prepend(errorBox(error));
    }
  };

  const showRun = () => {
    if (selected) return;
    fill(side, h('h2', {}, 'Run'),
      run.error ? h('div', { class: 'run-error' }, h('div', { class: 'label' }, 'Error'), h('div', { class: 'error-text' }, run.error.message), rootCause(run.root_cause)) : null,
      h('div', { class: 'label' }, 'Inputs'), pre(run.inputs),
      h('div', { class: 'label' }, 'Outputs'), run.outputs === null ? h('p', { class: 'muted' }, underWay(run.status) ? 'not yet' : 'none') : pre(run.outputs, 'value outputs'),
      h('p', { class: 'muted hint' }, 'Click a node to see its inputs, output, error, attempts and cost.'));
  };

  let nodeRequest = 0;
  const showNode = async (full) => {
    const mine = ++nodeRequest;
    let detail;
    try {
      detail = await api(`/ui/api/runs/${encodeURIComponent(runId)}/node?id=${encodeURIComponent(full)}`);
    } catch (error) {
      fill(side, errorBox(error));
      return;
    }
    if (mine !== nodeRequest || signal.aborted) return;
    const topLevel = !/[.[]/.test(full);
    const tokens = detail.tokens && typeof detail.tokens === 'object'
      ? (detail.tokens.input_tokens || 0) + (detail.tokens.output_tokens || 0) : detail.tokens;
    fill(side,
      h('div', { class: 'side-head' },
        h('button', { type: 'button', class: 'link', onclick: () => { selected = null; dag && dag.select(null, null); showRun(); } }, '← Run'),
        h('h2', { class: 'mono', id: 'node-title' }, full), badge(detail.status)),
      h('dl', { class: 'facts-list' },
        h('dt', {}, 'Type'), h('dd', {}, detail.type || '—'),
        h('dt', {}, 'Attempts'), h('dd', { id: 'node-attempts' }, String(detail.attempts.length)),
        h('dt', {}, 'Duration'), h('dd', {}, fmtDuration(detail.duration_ms)),
        h('dt', {}, 'Cost'), h('dd', {}, detail.cost_usd === null ? '—' : fmtCost(detail.cost_usd)),
        h('dt', {}, 'Tokens'), h('dd', {}, tokens === null || tokens === undefined ? '—' : fmtTokens(tokens))),
      detail.reused_from ? h('p', { class: 'muted' }, 'Reused from run ', h('a', { href: `#/runs/${encodeURIComponent(detail.reused_from)}` }, detail.reused_from.slice(0, 12)), ' (not run again).') : null,
      detail.error ? h('div', { class: 'node-error', id: 'node-error' },
        h('div', { class: 'label' }, 'Error'),
        detail.root_cause ? rootCause(detail.root_cause) : null,
        pre(detail.error, 'value error')) : null,
      detail.question ? h('div', {}, h('div', { class: 'label' }, 'Question'), h('p', {}, detail.question)) : null,
      h('div', { class: 'label' }, 'Inputs (rendered)'),
      detail.inputs !== null ? pre(detail.inputs, 'value inputs') : h('p', { class: 'muted' }, detail.inputs_note || '—'),
      h('div', { class: 'label' }, 'Output'),
      detail.output !== null ? pre(detail.output, 'value node-output') : h('p', { class: 'muted' }, '—'),
      detail.attempts.length ? h('div', {}, h('div', { class: 'label' }, 'Attempts'),
        h('ol', { class: 'attempts' }, detail.attempts.map((a) => h('li', {}, `${a.outcome}${a.started_at ? ` · ${new Date(a.started_at * 1000).toLocaleTimeString()}` : ''}`,
          a.error ? h('div', { class: 'muted' }, `${a.error.code}: ${a.error.message}`) : null,
          a.delay_seconds ? h('div', { class: 'muted' }, `retried after ${a.delay_seconds} s`) : null)))) : null,
      detail.spec ? h('details', {}, h('summary', {}, 'Blueprint'), pre(detail.spec)) : null,
      session.admin && topLevel && !underWay(run.status)
        ? h('button', { type: 'button', id: 'retry-from', onclick: () => retry(full) }, 'Retry from this node') : null);
  };

  renderHead();
  showRun();
  const ticker = setInterval(() => {
    const cell = document.getElementById('run-duration');
    if (cell && underWay(run.status)) cell.textContent = fmtDuration(elapsed(run));
    if (dag) dag.tick();  // the clocks of running nodes
  }, 1000);
  signal.addEventListener('abort', () => clearInterval(ticker));

  // Live states: events pushed by the server are drawn once per animation frame.
  let pending = [], frame = 0, refreshSelected = false;
  const reload = async () => {
    try {
      const fresh = await api(`/ui/api/runs/${encodeURIComponent(runId)}`);
      run = fresh.run; here = fresh.here;
      renderHead();
      showRun();
    } catch (error) { /* the stream goes on; the header stays as it was */ }
  };
  const flush = () => {
    frame = 0;
    const batch = pending;
    pending = [];
    if (dag) dag.apply(batch);
    const now = Date.now() / 1000;
    for (const event of batch) {
      if (event.ts && !event.backlog) stats.lags.push(now - event.ts);
      if (event.type === 'run_finished') reload();
      if (selected && event.node_id === selected && event.type !== 'node_started') refreshSelected = true;
    }
    if (stats.lags.length > 20000) stats.lags.splice(0, stats.lags.length - 20000);
    stats.events += batch.length;
    stats.batches++;
    stats.lastEventAt = now;
    if (stats.firstEventAt === null) stats.firstEventAt = now;
    if (dag) {
      const c = dag.counts();
      fill(counts, ...Object.entries(c).sort().map(([state, n]) => h('span', { class: `count state-${state}`, dataset: { state } }, `${n} ${state}`)));
    }
    if (refreshSelected) { refreshSelected = false; showNode(selected); }
  };
  let backlog = true;  // the first message holds the events before the page looked: not counted as lag
  follow(`/ui/api/runs/${encodeURIComponent(runId)}/events`, (message) => {
    const events = message.events || [];
    if (backlog) { events.forEach((event) => { event.backlog = true; }); backlog = false; }
    if (!events.length) return;
    pending.push(...events);
    if (!frame) frame = requestAnimationFrame(flush);
  }, { signal, resumable: true, onEnd: () => { if (underWay(run.status)) reload(); } });
}

// -- workflows ---------------------------------------------------------------------------------

async function workflowsView(signal) {
  fill(main, h('section', { class: 'workflows' }, h('h1', {}, 'Workflows')));
  let data;
  try { data = await api('/ui/api/workflows'); } catch (error) { add(main, errorBox(error)); return; }
  if (signal.aborted) return;
  const list = h('div', { class: 'cards' }, data.workflows.map((w) => h('div', { class: 'card-slot' },
    h('a', { class: 'card', href: `#/workflows/${encodeURIComponent(w.name)}`, dataset: { workflow: w.name } },
      h('h2', {}, w.name, w.version ? h('span', { class: 'muted' }, ` v${w.version}`) : null),
      h('p', {}, w.description || h('span', { class: 'muted' }, 'no description')),
      h('p', { class: 'muted' }, `${w.nodes} node${w.nodes === 1 ? '' : 's'}`)),
    h('a', { class: 'edit-link', href: `/ui/editor/${encodeURIComponent(w.name)}`, dataset: { edit: w.name } }, 'Edit'))),
  h('a', { class: 'card new-card', href: '/ui/editor' }, h('h2', {}, 'New workflow'), h('p', { class: 'muted' }, 'draw one in the editor')));
  add(main.firstChild, data.workflows.length ? list : h('p', { class: 'muted' }, 'No workflows registered.'));
}

function schemaForm(schema) {
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const readers = [];
  const fields = Object.entries(properties).map(([name, prop]) => {
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
    const id = `input-${name}`;
    let control, read;
    if (Array.isArray(prop.enum)) {
      control = h('select', { id, name }, required.has(name) ? null : h('option', { value: '' }, '—'),
        prop.enum.map((value, i) => h('option', { value: String(i), selected: prop.default === value }, JSON.stringify(value))));
      read = () => (control.value === '' ? undefined : prop.enum[Number(control.value)]);
    } else if (type === 'boolean') {
      control = h('input', { id, name, type: 'checkbox', checked: prop.default === true });
      read = () => control.checked;
    } else if (type === 'number' || type === 'integer') {
      control = h('input', { id, name, type: 'number', step: type === 'integer' ? '1' : 'any', value: prop.default ?? null });
      read = () => (control.value === '' ? undefined : Number(control.value));
    } else if (type === 'string') {
      control = h('input', { id, name, type: 'text', value: prop.default ?? null });
      read = () => (control.value === '' && !required.has(name) ? undefined : control.value);
    } else {
      control = h('textarea', { id, name, rows: '3', placeholder: 'JSON' }, prop.default === undefined ? '' : JSON.stringify(prop.default, null, 2));
      read = () => {
        if (!control.value.trim()) return undefined;
        try { return JSON.parse(control.value); } catch { throw new Error(`${name}: not valid JSON`); }
      };
    }
    readers.push([name, read]);
    return h('label', { class: 'field', for: id },
      h('span', { class: 'field-name' }, name, required.has(name) ? h('span', { class: 'required', title: 'required' }, ' *') : null,
        type ? h('span', { class: 'muted' }, ` ${type}`) : null),
      control,
      prop.description ? h('span', { class: 'muted hint' }, prop.description) : null);
  });
  const raw = h('textarea', { id: 'inputs-json', rows: '4', placeholder: '{"name": "value"}' });
  const element = h('div', { class: 'schema-form' }, fields,
    h('details', {}, h('summary', {}, 'Inputs as JSON (replaces the fields above)'), raw));
  const read = () => {
    if (raw.value.trim()) {
      let value;
      try { value = JSON.parse(raw.value); } catch { throw new Error('the inputs are not valid JSON'); }
      if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('the inputs must be a JSON object');
      return value;
    }
    return readFields(readers);
  };
  return { element, read };
}

async function workflowView(name, signal) {
  let data;
  try { data = await api(`/ui/api/workflows/${encodeURIComponent(name)}`); } catch (error) {
    fill(main, h('p', {}, h('a', { href: '#/workflows' }, '← Workflows')), errorBox(error));
    return;
  }
  if (signal.aborted) return;
  const form = schemaForm(data.inputs);
  const message = h('div', { class: 'form-message' });
  const start = h('button', { type: 'submit', id: 'start-run', disabled: !data.can_start }, 'Start run');
  const why = data.can_start ? null : h('p', { class: 'muted', id: 'start-why' }, session.admin
    ? 'This server does not run this workflow (it may change data and the server is read-only).'
    : session.admin_configured ? 'Starting runs here needs the admin token (Token, top right).'
      : 'Starting runs here needs an admin token, and this viewer has none: start it with ICE_MCP_ADMIN_TOKEN set to a secret of yours, then type that secret into Token (top right).');
  const pane = h('div', { class: 'graph-pane diagram' });
  fill(main, h('section', { class: 'workflow' },
    h('a', { href: '#/workflows', class: 'back' }, '← Workflows'),
    h('h1', {}, data.name, data.version ? h('span', { class: 'muted' }, ` v${data.version}`) : null,
      ' ', h('a', { class: 'edit-link', href: `/ui/editor/${encodeURIComponent(data.name)}`, dataset: { edit: data.name } }, 'Edit')),
    h('p', {}, data.description || h('span', { class: 'muted' }, 'no description')),
    h('div', { class: 'workflow-body' },
      h('form', { class: 'start-form', onsubmit: async (event) => {
        event.preventDefault();
        fill(message);
        start.disabled = true;
        try {
          const started = await api(`/ui/api/workflows/${encodeURIComponent(name)}/start`, { method: 'POST', body: { inputs: form.read() } });
          location.hash = `#/runs/${encodeURIComponent(started.run_id)}`;
        } catch (error) {
          add(message, errorBox(error));
          start.disabled = !data.can_start;
        }
      } }, h('h2', {}, 'Inputs'), form.element, start, why, message),
      h('div', { class: 'graph-col' }, h('h2', {}, 'Diagram'), pane))));
  if (data.graph && data.graph.nodes.length) {
    const dag = new DagView(pane, data.graph, { onSelect: () => {} });
    stats.layoutMs = dag.layoutMs;
    stats.dag = dag;
  }
}

// A sign-in link from the `ui_link` tool (OAuth) ends in #ticket=...: trade it once for this page's cookie,
// taking it out of the address bar first.
async function redeemTicket() {
  const match = /^#ticket=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match) return;
  history.replaceState(null, '', `${location.pathname}${location.search}#/runs`);
  const response = await fetch('/ui/session', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ticket: match[1] }), cache: 'no-store' });
  if (!response.ok) askToken('That sign-in link has expired or was used already: ask for a new one (the ui_link tool).');
}

window.addEventListener('hashchange', route);
redeemTicket().then(loadSession).then(route);
