// The editor's backend over /ui's HTTP API (the page's token as a bearer header). The in-chat editor App gives
// editor.js another backend with the same methods, over the host's tool calls.

const TOKEN_KEY = 'ice_mcp.token';

export class ApiError extends Error {
  constructor(status, code, message, details) { super(message); this.status = status; this.code = code; this.details = details; }
}

async function api(path, { method = 'GET', body } = {}) {
  const headers = body === undefined ? {} : { 'Content-Type': 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, { method, headers, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || `http_${response.status}`, error.message || `the server answered ${response.status}`, error.details);
  }
  return data;
}

const at = (name) => `/ui/api/editor/workflows/${encodeURIComponent(name)}`;
const post = (path, body) => api(path, { method: 'POST', body });

export const httpBackend = {
  session: () => api('/ui/api/session'),
  catalogue: () => api('/ui/api/editor/catalogue'),
  open: (name) => (name ? api(at(name)) : api('/ui/api/editor/blank')),
  parse: (text) => post('/ui/api/editor/parse', { text }),
  sync: (text, blueprint) => post('/ui/api/editor/sync', { text, blueprint }),
  save: (name, text, baseVersion) => post(`${at(name)}/save`, { text, base_version: baseVersion }),
  head: (name) => api(`${at(name)}/head`),
  versions: (name) => api(`${at(name)}/versions`),
  diff: (name, a, b) => api(`${at(name)}/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`),
  rollback: (name, version) => post(`${at(name)}/rollback`, { version }),
  start: (name, inputs) => post(`/ui/api/workflows/${encodeURIComponent(name)}/start`, { inputs }),
  runUrl: (runId) => `/ui#/runs/${encodeURIComponent(runId)}`,
  setToken: (token) => { if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY); },
};
