// The blueprint editor inside an MCP host (MCP Apps, io.modelcontextprotocol/ui): blueprint_edit's result gives
// the draft (its text, version, validation report); Validate calls blueprint_validate and Save calls
// blueprint_save through the host's bridge, then tells the model what was saved (ui/update-model-context).
// A sign-in that may not save gets blueprint_save's `forbidden` answer, shown as it is. Every text from the
// server goes into the page as text, never as HTML.

const PROTOCOL_VERSION = '2026-01-26';  // the MCP Apps revision this view speaks
const $ = (id) => document.getElementById(id);
const draft = { name: null, version: null };

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
    if (event.source !== this.host) return;
    const message = event.data;
    if (!message || message.jsonrpc !== '2.0') return;
    if (message.method === undefined) {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.error) waiting.reject(new Error(message.error.message || 'the host refused the request'));
      else waiting.resolve(message.result || {});
    } else if (message.id !== undefined) {
      const handler = this.requests[message.method];
      const reply = handler ? { result: handler(message.params || {}) || {} }
        : { error: { code: -32601, message: `Method not found: ${message.method}` } };
      this.post({ jsonrpc: '2.0', id: message.id, ...reply });
    } else if (this.notifications[message.method]) {
      this.notifications[message.method](message.params || {});
    }
  }

  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.post({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method, params) { this.post({ jsonrpc: '2.0', method, params }); }
  post(message) { this.host.postMessage(message, '*'); }
}

const bridge = new HostBridge(window.parent);

function resultData(result) {
  if (result && result.structuredContent) return result.structuredContent;
  for (const block of (result && result.content) || []) {
    if (block.type !== 'text') continue;
    try { return JSON.parse(block.text); } catch { /* prose */ }
  }
  return null;
}

// A tool's answer, or an Error carrying the tool error's code and details (version_conflict, forbidden, ...).
async function callTool(name, args) {
  const result = await bridge.request('tools/call', { name, arguments: args });
  const data = resultData(result) || {};
  if (result.isError) {
    const error = data.error || {};
    const failure = new Error(error.message || `${name} failed`);
    failure.code = error.code;
    failure.details = error.details || {};
    throw failure;
  }
  return data;
}

function status(text) { $('status').textContent = text; }

function showIssues(report) {
  const list = $('issues');
  list.replaceChildren();
  const issues = [...(report.errors || []).map((i) => [i, 'error']), ...(report.warnings || []).map((i) => [i, 'warning'])];
  for (const [issue, kind] of issues) {
    const item = document.createElement('li');
    item.className = kind;
    const where = document.createElement('span');
    where.className = 'where';
    where.textContent = issue.line ? `${issue.line}:${issue.column}` : (issue.path || issue.node_id || '');
    item.append(where, document.createTextNode(issue.message + (issue.suggestion ? ` (did you mean ${issue.suggestion}?)` : '')));
    if (issue.line) item.addEventListener('click', () => selectLine(issue.line));
    list.append(item);
  }
  return issues.length;
}

function selectLine(line) {
  const text = $('text');
  const lines = text.value.split('\n');
  const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
  text.focus();
  text.setSelectionRange(start, start + (lines[line - 1] || '').length);
}

function showDraft(data) {
  draft.name = data.name || null;
  draft.version = data.version ?? null;
  $('draft-name').textContent = draft.name || 'Blueprint';
  $('draft-version').textContent = draft.version ? `version ${draft.version}` : 'not saved yet';
  $('text').value = data.text || '';
  $('text').disabled = false;
  $('validate').disabled = false;
  $('save').disabled = !draft.name;
  const count = showIssues(data.report || {});
  status(data.report && data.report.ok ? 'Valid.' : `${count} problem${count === 1 ? '' : 's'}.`);
}

async function validate() {
  status('Validating…');
  try {
    const report = await callTool('blueprint_validate', { blueprint: $('text').value });
    const count = showIssues(report);
    status(report.ok ? 'Valid.' : `${count} problem${count === 1 ? '' : 's'}.`);
  } catch (error) {
    status(error.message);
  }
}

async function save() {
  status('Saving…');
  const args = { name: draft.name, text: $('text').value };
  if (draft.version) args.base_version = draft.version;
  try {
    const saved = await callTool('blueprint_save', args);
    draft.version = saved.version;
    $('draft-version').textContent = `version ${saved.version}`;
    showIssues(saved.report || {});
    status(saved.created ? `Saved as version ${saved.version}.` : `No change: version ${saved.version} stays.`);
    const text = `The user saved workflow ${draft.name} in the editor: version ${saved.version}`
      + (saved.previous_version ? ` (was ${saved.previous_version}).` : '.');
    bridge.request('ui/update-model-context', { content: [{ type: 'text', text }] }).catch(() => {});
  } catch (error) {
    if (error.code === 'version_conflict') {
      status(`Someone saved version ${error.details.current_version} since you opened version ${error.details.base_version}: `
        + 'copy your text, open the workflow again and merge.');
    } else if (error.code === 'invalid_blueprint') {
      showIssues({ errors: error.details.errors || [] });
      status(error.message);
    } else {
      status(error.message);
    }
  }
}

$('validate').addEventListener('click', validate);
$('save').addEventListener('click', save);

bridge.notifications['ui/notifications/tool-input'] = () => status('Opening the draft…');
bridge.notifications['ui/notifications/tool-result'] = (result) => {
  const data = resultData(result) || {};
  if (result.isError || typeof data.text !== 'string') status((data.error && data.error.message) || 'No draft to edit.');
  else showDraft(data);
};
bridge.notifications['ui/notifications/tool-cancelled'] = () => status('The call was cancelled.');
bridge.requests['ui/resource-teardown'] = () => ({});

async function connect() {
  await bridge.request('ui/initialize', {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: { name: 'ice_mcp blueprint editor', version: '1.0.0' },
    appCapabilities: { availableDisplayModes: ['inline'] },
  });
  bridge.notify('ui/notifications/initialized', {});
  new ResizeObserver(() => {
    const box = document.documentElement.getBoundingClientRect();
    bridge.notify('ui/notifications/size-changed', { width: Math.ceil(box.width), height: Math.ceil(box.height) });
  }).observe(document.body);
}

connect().catch((error) => status(`This editor needs an MCP Apps host: ${error.message}`));
