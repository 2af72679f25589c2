// The blueprint editor (/ui/editor/NAME): the canvas, a form for the selected node or the workflow, the blueprint's
// text beside them, live validation by the server's own validator, versions, save, and a run started from here.
// The server does the blueprint work (parse, apply an edit to the text, validate, save) through `backend`
// (editor-http.js in /ui); this module only edits data and draws. editor-main.js starts it.
import { fill, h } from './dom.js';
import { EditorCanvas } from './editor-canvas.js';
import { addNode, clone, connect, deleteNode, disconnect, freshId, isContainer, locate, reconnect, setField } from './editor-model.js';
import { fields, inputsEditor, looseValue, mapEditor, pinIssues } from './schema-form.js';

const SYNC_MS = 250, PARSE_MS = 400, HEAD_POLL_MS = 1500;
const $ = (id) => document.getElementById(id);

const state = {
  name: null, version: null, text: '', savedText: null, blueprint: null, issues: [], ok: true,
  undo: [], redo: [], textBurst: false, session: {}, catalogue: null, seq: 0, pending: Promise.resolve(), timers: {},
};
const ui = window.__editor = { state };  // what the browser tests read

const say = (text, kind = 'info') => { const note = $('editor-note'); note.textContent = text; note.dataset.kind = kind; };
const dirty = () => state.savedText === null ? state.text.trim() !== '' : state.text !== state.savedText;
const types = () => state.catalogue.node_types;

// -- the document: graph edits go to the text through the server, text edits come back as data ---------------

function snapshot() {
  state.undo.push({ text: state.text, blueprint: clone(state.blueprint) });
  if (state.undo.length > 200) state.undo.shift();
  state.redo = [];
}

// One edit of the graph or a form: the drawing changes now, the text and the issues once the server answered.
function edit(change) {
  snapshot();
  const next = clone(state.blueprint);
  const answer = change(next);
  if (typeof answer === 'string') { state.undo.pop(); say(answer, 'error'); return; }
  state.blueprint = next;
  redraw();
  later('sync', SYNC_MS, syncText);
}

function later(key, ms, task) {
  clearTimeout(state.timers[key]);
  document.body.dataset.busy = 'yes';
  state.timers[key] = setTimeout(() => { delete state.timers[key]; queue(task); }, ms);
}

// The server's answers come in the order asked; body[data-busy] says whether any is still to come (tests wait on it).
function queue(task) {
  document.body.dataset.busy = 'yes';
  const mine = state.pending = state.pending.then(task).catch((error) => say(error.message, 'error')).then(() => {
    if (state.pending === mine && !Object.keys(state.timers).length) document.body.dataset.busy = 'no';
  });
  return mine;
}

// Everything typed or drawn so far reaches the server (before a save, a run, a diff).
async function flush() {
  for (const [key, task] of [['parse', parseText], ['sync', syncText]]) {
    if (state.timers[key]) { clearTimeout(state.timers[key]); delete state.timers[key]; queue(task); }
  }
  await state.pending;
}

async function syncText() {
  const seq = ++state.seq;
  const answer = await backend.sync(state.text, state.blueprint);
  if (seq !== state.seq) return;
  state.text = answer.text;
  setText(answer.text);
  showIssues(answer);
}

async function parseText() {
  const seq = ++state.seq;
  const text = $('editor-text').value;
  const answer = await backend.parse(text);
  if (seq !== state.seq) return;
  state.text = text;
  if (answer.blueprint) { state.blueprint = answer.blueprint; redraw(); }
  showIssues(answer);
}

function setText(text) {
  const area = $('editor-text');
  if (area.value === text) return;
  const { scrollTop } = area;
  area.value = text;
  area.scrollTop = scrollTop;
  markDirty();
}

function onTextInput() {
  if (!state.textBurst) { snapshot(); state.textBurst = true; }
  state.text = $('editor-text').value;
  markDirty();
  later('parse', PARSE_MS, async () => { state.textBurst = false; await parseText(); });
}

function restore(from, to) {
  if (!from.length) return;
  to.push({ text: state.text, blueprint: clone(state.blueprint) });
  const back = from.pop();
  state.blueprint = back.blueprint;
  state.text = back.text;
  setText(back.text);
  redraw();
  queue(async () => showIssues(await backend.parse(state.text)));
}

const undo = () => restore(state.undo, state.redo);
const redo = () => restore(state.redo, state.undo);

function markDirty() {
  const unsaved = dirty();
  $('editor-status').textContent = unsaved ? 'unsaved changes'
    : state.version ? `saved · v${state.version}` : state.savedText !== null ? 'as its file has it' : 'not saved';
  $('editor-status').dataset.dirty = unsaved ? 'yes' : 'no';
  $('undo').disabled = !state.undo.length;
  $('redo').disabled = !state.redo.length;
}

// -- issues ---------------------------------------------------------------------------------------------

function showIssues(answer) {
  state.issues = (answer.issues || []).map((issue) => ({
    ...issue, node: issue.node ?? issue.node_id ?? null, pointer: issue.path ?? null, path: issue.field ?? '',
  }));
  state.ok = answer.ok ?? !state.issues.some((i) => i.severity !== 'warning');
  canvas.pin(state.issues);
  const list = $('issues');
  fill(list, state.issues.map((issue) => h('li', { class: `issue ${issue.severity || 'error'}`, dataset: { node: issue.node || '', path: issue.path || '' },
    onclick: () => showIssue(issue) },
    issue.node ? h('b', {}, issue.node, issue.path ? `.${issue.path}` : '', ': ') : null, issue.message,
    issue.line ? h('span', { class: 'muted' }, ` (line ${issue.line}${issue.column ? `:${issue.column}` : ''})`) : null)));
  $('validity').textContent = state.issues.length ? `${state.issues.length} issue${state.issues.length === 1 ? '' : 's'}` : 'valid';
  $('validity').dataset.ok = state.issues.length ? 'no' : 'yes';
  pinForm();
  markDirty();
}

function showIssue(issue) {
  if (issue.node) {
    const full = [...canvas.dag.els.keys()].find((f) => f === issue.node || f.split('.').pop() === issue.node);
    if (full) canvas.focusNode(full);
  }
  if (issue.line) {
    const area = $('editor-text');
    const lines = area.value.split('\n');
    const start = lines.slice(0, issue.line - 1).reduce((n, l) => n + l.length + 1, 0);
    area.focus();
    area.setSelectionRange(start, start + (lines[issue.line - 1] || '').length);
  }
}

function pinForm() {
  const form = $('side-form');
  const here = form.dataset.node;
  const mine = state.issues.filter((i) => (here ? i.node && (i.node === here || here.split('.').pop() === i.node) : !i.node));
  pinIssues(form, mine);
  for (const more of form.querySelectorAll('details')) if (more.querySelector('.invalid')) more.open = true;
}

// -- drawing and the side panel ---------------------------------------------------------------------------

function redraw() {
  canvas.show(state.blueprint);
  sidePanel();
  markDirty();
}

const canvasHandlers = {
  select: () => sidePanel(),
  connect: (from, to) => edit((bp) => connect(bp, from, to, types())),
  reconnect: (from, to, target) => edit((bp) => reconnect(bp, from, to, target, types())),
  disconnect: (from, to) => edit((bp) => { disconnect(bp, from, to, types()); }),
  remove: (full) => { canvas.selected = null; edit((bp) => { deleteNode(bp, full, types()); }); },
};

function sidePanel() {
  const form = $('side-form');
  const full = canvas.selected;
  const where = full ? locate(state.blueprint, full, types()) : null;
  if (!where) return workflowForm(form);
  const node = where.node, spec = types()[node.type];
  form.dataset.node = full;
  const set = (path, value) => {
    const [field, ...rest] = path.split('.');
    edit((bp) => {
      if (!rest.length) { canvas.selected = setField(bp, full, field, value, types()); return; }
      const target = locate(bp, full, types()).node;
      const inner = { ...(target[field] || {}) };
      if (value === undefined) delete inner[rest.join('.')]; else inner[rest.join('.')] = value;
      target[field] = inner;
    });
  };
  if (!spec) {
    fill(form, h('h2', {}, full), h('p', { class: 'error-box' }, `unknown node type ${JSON.stringify(node.type)}: edit it in the text`));
    return;
  }
  const skip = new Set(['type', ...spec.subgraphs.map((s) => s.field), ...(node.type === 'tool' ? ['tool_args'] : [])]);
  const options = { multiline: new Set(spec.multiline), onChange: set, choices: node.type === 'tool' ? { tool_name: state.catalogue.tools.map((t) => t.name) } : {} };
  // The type's own fields first; what every node has (retries, timeout, errors...) folded below them.
  const common = new Set(state.catalogue.common_fields.filter((f) => f !== 'id'));
  const more = h('details', { class: 'more-fields' }, h('summary', {}, 'Description, dependencies, retries, timeout, on error'),
    fields(spec.schema, node, { ...options, skip: new Set([...skip, ...Object.keys(spec.schema.properties || {}).filter((f) => !common.has(f))]) }));
  fill(form,
    h('div', { class: 'side-head' }, h('h2', {}, full), h('span', { class: 'badge' }, node.type),
      h('button', { type: 'button', id: 'delete-node', class: 'link', onclick: () => canvasHandlers.remove(full) }, 'Delete')),
    fields(spec.schema, node, { ...options, skip: new Set([...skip, ...common]), extra: true }),
    node.type === 'tool' ? toolArgs(node, set) : null, more);
  pinForm();
  if (more.querySelector('.invalid') || state.openMore) more.open = true;
  more.addEventListener('toggle', () => { state.openMore = more.open; });
}

// A tool node's arguments: one field per property of the chosen tool's input schema (a value or a template).
function toolArgs(node, set) {
  const tool = state.catalogue.tools.find((t) => t.name === node.tool_name);
  const schema = (tool && tool.input_schema) || { properties: {} };
  const args = node.tool_args && typeof node.tool_args === 'object' ? node.tool_args : {};
  const names = [...new Set([...Object.keys(schema.properties || {}), ...Object.keys(args)])];
  const required = new Set(schema.required || []);
  return h('fieldset', { class: 'field group', dataset: { path: 'tool_args' } },
    h('legend', {}, 'tool_args', tool ? h('span', { class: 'muted' }, ` of ${tool.name}`) : null),
    tool && tool.description ? h('p', { class: 'muted hint' }, tool.description) : null,
    names.map((arg) => {
      const prop = (schema.properties || {})[arg] || {};
      const value = args[arg];
      const input = h('input', { id: `arg-${arg}`, type: 'text', value: value === undefined ? null : typeof value === 'string' ? value : JSON.stringify(value),
        placeholder: prop.default !== undefined ? JSON.stringify(prop.default) : (prop.type || '') });
      input.addEventListener('change', () => set(`tool_args.${arg}`, prop.type === 'string' ? (input.value === '' ? undefined : input.value) : looseValue(input.value)));
      return h('label', { class: 'field', for: `arg-${arg}`, dataset: { path: `tool_args.${arg}` } },
        h('span', { class: 'field-name' }, arg, required.has(arg) ? h('span', { class: 'required' }, ' *') : null, prop.type ? h('span', { class: 'muted' }, ` ${prop.type}`) : null),
        input, prop.description ? h('span', { class: 'muted hint' }, prop.description) : null, h('span', { class: 'field-issue', role: 'alert' }));
    }),
    h('span', { class: 'field-issue', role: 'alert' }));
}

function workflowForm(form) {
  delete form.dataset.node;
  const set = (path, value) => edit((bp) => { if (value === undefined) delete bp[path]; else bp[path] = value; });
  const bp = state.blueprint;
  const top = fields(state.catalogue.workflow_schema, bp, { skip: new Set(['nodes', 'schema_version', 'inputs', 'outputs']),
    multiline: new Set(['description']), onChange: set, extra: true });
  fill(form, h('div', { class: 'side-head' }, h('h2', {}, 'Workflow'), h('span', { class: 'muted' }, 'select a node to edit it')),
    top.slice(0, 2), inputsEditor(bp.inputs, set), mapEditor(bp.outputs, set), top.slice(2));
  pinForm();
}

// A new node of the chosen type: its required fields empty (validation says what they need), inside the selected
// container, or beside the selected node.
function addChosenNode() {
  const type = $('add-type').value;
  const spec = types()[type];
  edit((bp) => {
    const node = { id: freshId(bp, type, types()), type };
    for (const field of spec.schema.required || []) {
      if (field in node) continue;
      const sub = spec.subgraphs.find((s) => s.field === field);
      node[field] = sub ? (sub.nested ? [[]] : []) : '';
    }
    let scope = '';
    const selected = canvas.selected;
    if (selected) {
      const where = locate(bp, selected, types());
      if (where && isContainer(where.node.type, types())) scope = `${selected}[0]`;
      else if (where) scope = where.scope ? selected.slice(0, selected.lastIndexOf('.')) : '';
    }
    const full = addNode(bp, node, scope, types());
    if (!full) return 'no place for a node there';
    canvas.selected = full;
    return undefined;
  });
  if (canvas.selected) canvas.focusNode(canvas.selected);
}

// -- saving and versions ----------------------------------------------------------------------------------

async function save(baseVersion = state.version) {
  await flush();
  const name = state.blueprint && state.blueprint.name;
  if (!name) { say('the workflow needs a name before it is saved', 'error'); return; }
  try {
    if (baseVersion === null && state.savedText !== null && name === state.name) {
      // A file's workflow has no version to name as the base: whether someone saved it since is asked first.
      const head = await backend.head(name);
      if (head.version) return conflict({ message: `${name} was saved by someone else since you opened it (version ${head.version})`, details: { current_version: head.version } });
    }
    const answer = await backend.save(name, state.text, baseVersion);
    state.name = name;
    state.version = answer.version;
    state.savedText = state.text;
    state.seen = answer.version;
    if (location.pathname !== `/ui/editor/${encodeURIComponent(name)}`) history.replaceState(null, '', `/ui/editor/${encodeURIComponent(name)}`);
    $('conflict').hidden = true;
    say(`saved as version ${answer.version}`);
    document.body.dataset.saves = String((Number(document.body.dataset.saves) || 0) + 1);  // tests wait on it
    markDirty();
    if (!$('versions').hidden) await versions();
  } catch (error) {
    if (error.code === 'version_conflict') return conflict(error);
    say(error.message, 'error');
  }
}

function conflict(error) {
  const theirs = (error.details && (error.details.current_version ?? error.details.latest_version)) ?? null;
  const box = $('conflict');
  box.hidden = false;
  fill(box, h('span', {}, error.message || 'another editor saved a newer version'),
    h('button', { type: 'button', id: 'load-theirs', onclick: () => open(state.name) }, 'Load their version'),
    theirs ? h('button', { type: 'button', id: 'overwrite', onclick: () => save(theirs) }, 'Save mine over it') : null);
  say('not saved: the workflow changed since you opened it', 'error');
}

// Another editor's save, seen by polling the workflow's newest version.
async function watchHead() {
  if (state.name && state.savedText !== null && !document.hidden) {
    try {
      const head = await backend.head(state.name);
      if (head.version && head.version > (state.seen ?? 0)) {
        state.seen = head.version;
        const box = $('conflict');
        box.hidden = false;
        fill(box, h('span', { id: 'other-save' }, `Someone else saved version ${head.version} of ${state.name}.`),
          h('button', { type: 'button', id: 'load-theirs', onclick: () => open(state.name) }, 'Load it'));
      }
    } catch { /* the next poll tries again */ }
  }
  setTimeout(watchHead, HEAD_POLL_MS);
}

async function versions() {
  const panel = $('versions');
  panel.hidden = false;
  if (!state.name || !state.version) { fill(panel, h('p', { class: 'muted' }, 'Save the workflow to keep versions of it.')); return; }
  const data = await backend.versions(state.name);
  const list = data.versions || [];
  const pick = (label, value) => h('select', { id: `diff-${label}`, 'aria-label': `diff ${label}` },
    list.map((v) => h('option', { value: v.version, selected: v.version === value }, `v${v.version}`)));
  const a = pick('a', list.length > 1 ? list[1].version : state.version), b = pick('b', list.length ? list[0].version : state.version);
  const out = h('pre', { id: 'diff', class: 'value diff' });
  fill(panel, h('div', { class: 'side-head' }, h('h2', {}, 'Versions'), h('button', { type: 'button', class: 'link', onclick: () => { panel.hidden = true; } }, 'Close')),
    h('ol', { class: 'versions' }, list.map((v) => h('li', { dataset: { version: v.version } },
      h('b', {}, `v${v.version}`), ' ', h('span', { class: 'muted' }, v.created_at ? new Date(v.created_at).toLocaleString() : ''), v.runs ? h('span', { class: 'muted' }, ` · ${v.runs} run${v.runs === 1 ? '' : 's'}`) : null,
      v.version === state.version ? h('span', { class: 'muted' }, ' (open)') : null, ' ',
      h('button', { type: 'button', class: 'rollback', disabled: !state.session.admin || v.current, onclick: () => rollback(v.version) }, 'Roll back to this')))),
    h('div', { class: 'diff-pick' }, 'Diff ', a, ' → ', b, ' ', h('button', { type: 'button', id: 'show-diff', onclick: async () => {
      const d = await backend.diff(state.name, a.value, b.value);
      out.replaceChildren(...diffLines(d.diff));
    } }, 'Show')), out);
}

const diffLines = (text) => String(text || '(no difference)').split('\n').map((line) => h('span', { class: line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : '' }, line, '\n'));

async function rollback(version) {
  if (dirty() && !window.confirm('Discard your unsaved changes and roll back?')) return;
  try {
    const answer = await backend.rollback(state.name, version);
    await open(state.name);
    say(`rolled back: version ${answer.version} holds version ${version}'s text`);
    await versions();
  } catch (error) { say(error.message, 'error'); }
}

// -- running ----------------------------------------------------------------------------------------------

function runDialog() {
  const dialog = $('run-dialog');
  const values = {};
  const schema = (state.blueprint && state.blueprint.inputs) || { properties: {} };
  for (const [key, prop] of Object.entries(schema.properties || {})) if (prop && prop.default !== undefined) values[key] = prop.default;
  const message = h('div', { class: 'form-message' });
  fill($('run-fields'), dirty() ? h('p', { class: 'muted' }, 'This runs the saved version: save first to run your changes.') : null,
    fields(schema, values, { ids: 'input', onChange: (path, value) => { if (value === undefined) delete values[path]; else values[path] = value; } }), message);
  dialog.returnValue = '';
  dialog.showModal();
  $('run-start').onclick = async (event) => {
    event.preventDefault();
    try {
      const started = await backend.start(state.name, values);
      state.savedText = state.text;  // leaving for the run view is no loss: nothing unsaved is asked about
      location.href = backend.runUrl(started.run_id);
    } catch (error) { fill(message, h('div', { class: 'error-box' }, error.message)); }
  };
}

// -- opening ----------------------------------------------------------------------------------------------

async function open(name) {
  const data = await backend.open(name);
  state.name = name || null;
  state.version = data.version ?? null;
  state.seen = state.version;
  state.text = data.text;
  state.savedText = name ? data.text : null;
  state.blueprint = data.blueprint || { nodes: [] };
  state.undo = []; state.redo = [];
  $('editor-text').value = data.text;
  $('conflict').hidden = true;
  document.title = `ice_mcp · edit ${name || 'a new workflow'}`;
  $('editor-name').textContent = name || 'new workflow';
  canvas.selected = null;
  redraw();
  canvas.fit();
  showIssues(data);
  rights();
}

// What this session may do: save and roll back (admin), start runs (can_start); a viewer sees and edits unsaved.
function rights() {
  const canSave = state.session.admin;
  $('who').textContent = canSave ? 'admin' : 'viewer · read-only';
  $('token-button').hidden = !(state.session.admin_configured || state.session.token_configured);
  $('save').disabled = !canSave;
  $('save').title = canSave ? 'save as a new version (Ctrl+S)' : (state.session.role_note || 'saving needs the admin token');
  $('run').disabled = !state.session.can_start || state.savedText === null;  // a registered workflow runs
}

function keys(event) {
  const mod = event.ctrlKey || event.metaKey;
  if (!mod) return;
  const inText = event.target.closest('input, textarea, select');
  if (event.key.toLowerCase() === 's') { event.preventDefault(); save(); return; }
  if (inText || event.key.toLowerCase() !== 'z') return;  // the text pane keeps its own undo
  event.preventDefault();
  if (event.shiftKey) redo(); else undo();
}

let canvas, backend;

// Starts the editor on the page's elements (editor.html's ids) with a backend (editor-http.js's methods).
export async function startEditor(given, name) {
  backend = given;
  state.name = name || null;
  tokenDialog();
  state.session = await backend.session().catch(() => ({ admin: false }));
  state.catalogue = await backend.catalogue();
  canvas = new EditorCanvas($('canvas'), types(), canvasHandlers);
  ui.canvas = canvas;
  fill($('add-type'), Object.keys(types()).map((t) => h('option', { value: t }, t)));
  $('add-node').addEventListener('click', addChosenNode);
  $('undo').addEventListener('click', undo);
  $('redo').addEventListener('click', redo);
  $('save').addEventListener('click', () => save());
  $('show-versions').addEventListener('click', () => versions().catch((e) => say(e.message, 'error')));
  $('run').addEventListener('click', runDialog);
  $('fit').addEventListener('click', () => canvas.fit());
  $('editor-text').addEventListener('input', onTextInput);
  document.addEventListener('keydown', keys);
  window.addEventListener('beforeunload', (event) => { if (dirty()) { event.preventDefault(); event.returnValue = ''; } });
  try { await open(state.name); } catch (error) { say(error.message, 'error'); return; }
  ui.ready = true;
  document.body.dataset.ready = 'yes';
  document.body.dataset.busy = 'no';
  watchHead();
}

function tokenDialog() {
  const dialog = $('token-dialog');
  if (!dialog) return;
  $('token-button').addEventListener('click', () => dialog.showModal());
  dialog.addEventListener('close', () => {
    const input = $('token-input');
    if (dialog.returnValue === 'save' && input.value.trim()) backend.setToken(input.value.trim());
    if (dialog.returnValue === 'forget') backend.setToken(null);
    input.value = '';
    if (dialog.returnValue === 'save' || dialog.returnValue === 'forget') {
      backend.session().catch(() => ({ admin: false })).then((session) => { state.session = session; rights(); });
    }
  });
}
