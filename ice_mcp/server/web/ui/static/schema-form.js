// A form generated from a JSON Schema (a node type's model, the workflow's own fields, a tool's input schema): one
// field per property, each change handed back as (path, value) with undefined for "leave it out", so a field never
// touched never changes in the blueprint's text. Each field carries data-path, where validation pins its issues.
import { h } from './dom.js';

const deref = (schema, root) => {
  let s = schema || {};
  for (let hops = 0; s.$ref && hops < 10; hops++) s = (root.$defs || {})[s.$ref.split('/').pop()] || {};
  if (Array.isArray(s.allOf) && s.allOf.length === 1) s = { ...deref(s.allOf[0], root), ...s, allOf: undefined };
  return s;
};

// {kind, schema, nullable}: the control a property gets.
function kindOf(schema, root) {
  let s = deref(schema, root), nullable = false;
  if (Array.isArray(s.anyOf)) {
    const options = s.anyOf.map((o) => deref(o, root)).filter((o) => o.type !== 'null');
    nullable = options.length < s.anyOf.length;
    if (options.length !== 1) return { kind: 'json', schema: s, nullable };
    s = { ...options[0], default: s.default, description: s.description || options[0].description };
  }
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (s.const !== undefined) return { kind: 'const', schema: s };
  if (Array.isArray(s.enum)) return { kind: 'enum', schema: s, nullable };
  if (type === 'boolean') return { kind: 'boolean', schema: s };
  if (type === 'integer' || type === 'number') return { kind: 'number', schema: s, type };
  if (type === 'string') return { kind: 'string', schema: s };
  if (type === 'array' && deref(s.items, root).type === 'string') return { kind: 'strings', schema: s };
  if (type === 'object' && s.properties && s.additionalProperties !== true) return { kind: 'object', schema: s };
  return { kind: 'json', schema: s };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const shown = (value) => (value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value, null, 2));

// A value typed where JSON or a template may stand: JSON when it parses, else the text as it is.
export function looseValue(text) {
  if (!text.trim()) return undefined;
  try { return JSON.parse(text); } catch { return text; }
}

function control(name, path, prop, value, { root, required, multiline, onChange, choices, ids }) {
  const { kind, schema, type } = kindOf(prop, root);
  const id = `${ids}-${path.replace(/[^A-Za-z0-9_-]/g, '-')}`;
  const emit = (next) => onChange(path, next === undefined || (!required && same(next, schema.default) && value === undefined) ? undefined : next);
  if (kind === 'const') return null;
  if (kind === 'object') {
    const inner = { ...(value && typeof value === 'object' ? value : {}) };
    const sub = fields(schema, inner, {
      root, prefix: `${path}.`, multiline, choices, ids,
      onChange: (subPath, subValue) => {
        const key = subPath.slice(path.length + 1);
        if (subValue === undefined) delete inner[key]; else inner[key] = subValue;
        onChange(path, Object.keys(inner).length ? { ...inner } : undefined);
      },
    });
    return h('fieldset', { class: 'field group', dataset: { path } }, h('legend', {}, name), sub);
  }
  let input;
  if (choices && choices[path]) {
    const options = [...new Set([...(value ? [value] : []), ...choices[path]])];
    input = h('select', { id }, required ? null : h('option', { value: '' }, '—'), options.map((o) => h('option', { value: o, selected: o === value }, o)));
    input.addEventListener('change', () => emit(input.value || undefined));
  } else if (kind === 'enum') {
    input = h('select', { id }, h('option', { value: '' }, schema.default !== undefined ? `— (${schema.default})` : '—'),
      schema.enum.map((o, i) => h('option', { value: String(i), selected: same(o, value) }, String(o))));
    input.addEventListener('change', () => emit(input.value === '' ? undefined : schema.enum[Number(input.value)]));
  } else if (kind === 'boolean') {
    input = h('input', { id, type: 'checkbox', checked: value === undefined ? schema.default === true : Boolean(value) });
    input.addEventListener('change', () => emit(input.checked));
  } else if (kind === 'number') {
    input = h('input', { id, type: 'number', step: type === 'integer' ? '1' : 'any', value: value ?? null, placeholder: schema.default ?? '' });
    input.addEventListener('change', () => emit(input.value === '' ? undefined : Number(input.value)));
  } else if (kind === 'string') {
    const long = multiline.has(name) || (typeof value === 'string' && (value.length > 60 || value.includes('\n')));
    input = long ? h('textarea', { id, rows: '3' }, value ?? '') : h('input', { id, type: 'text', value: value ?? null, placeholder: schema.default ?? '' });
    input.addEventListener('change', () => emit(input.value === '' && !required ? undefined : input.value));
  } else if (kind === 'strings') {
    const list = Array.isArray(value) ? value : typeof value === 'string' ? [value] : [];
    input = h('input', { id, type: 'text', value: list.join(', '), placeholder: 'comma-separated' });
    input.addEventListener('change', () => {
      const items = input.value.split(',').map((s) => s.trim()).filter(Boolean);
      emit(items.length ? items : undefined);
    });
  } else {
    input = h('textarea', { id, rows: '3', class: 'json', placeholder: 'JSON (or a template)' }, shown(value));
    input.addEventListener('change', () => emit(looseValue(input.value)));
  }
  return h('label', { class: 'field', for: id, dataset: { path } },
    h('span', { class: 'field-name' }, name, required ? h('span', { class: 'required', title: 'required' }, ' *') : null),
    input, schema.description ? h('span', { class: 'muted hint' }, schema.description) : null,
    h('span', { class: 'field-issue', role: 'alert' }));
}

// The fields of an object schema over `value`. options: {root, prefix, skip: Set, multiline: Set, onChange(path, v),
// choices: {path: [names]}, ids: the controls' id prefix ('field'), extra: show value's keys the schema does not name (so an unknown one can be pinned)}.
export function fields(schema, value, options) {
  const root = options.root || schema;
  const props = deref(schema, root).properties || {};
  const required = new Set(deref(schema, root).required || []);
  const skipped = (k) => Boolean(options.skip && options.skip.has(k));
  const keys = Object.keys(props).filter((k) => !skipped(k));
  if (options.extra) for (const k of Object.keys(value || {})) if (!props[k] && !keys.includes(k) && !skipped(k)) keys.push(k);
  return keys.map((key) => control(key, `${options.prefix || ''}${key}`, props[key] || {}, (value || {})[key], {
    root, required: required.has(key), multiline: options.multiline || new Set(), onChange: options.onChange, choices: options.choices,
    ids: options.ids || 'field',
  })).filter(Boolean);
}

// Issues pinned to their fields: the field whose data-path is the issue's path, else its nearest enclosing one.
export function pinIssues(form, issues) {
  for (const field of form.querySelectorAll('[data-path]')) {
    field.classList.remove('invalid');
    const slot = field.querySelector(':scope > .field-issue');
    if (slot) slot.textContent = '';
  }
  const unplaced = [];
  for (const issue of issues) {
    let path = issue.path || '', target = null;
    while (path && !target) {
      target = form.querySelector(`[data-path="${CSS.escape(path)}"]`);
      path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '';
    }
    if (!target) { unplaced.push(issue); continue; }
    target.classList.add('invalid');
    const slot = target.querySelector(':scope > .field-issue');
    if (slot) slot.textContent = slot.textContent ? `${slot.textContent}\n${issue.message}` : issue.message;
  }
  return unplaced;
}

const TYPES = ['string', 'number', 'integer', 'boolean', 'array', 'object'];

// A workflow's `inputs` (a JSON Schema object) as rows: name, type, required, default, description. Each change
// hands back the whole schema, every property keeping what the rows do not show (items, enum, minimum...).
export function inputsEditor(schema, onChange, path = 'inputs') {
  const base = schema && typeof schema === 'object' ? schema : { type: 'object', properties: {} };
  const rows = Object.entries(base.properties || {}).map(([name, prop]) => ({ name, prop: { ...prop }, required: (base.required || []).includes(name) }));
  const emit = () => {
    const properties = {}, required = [];
    for (const row of rows) {
      if (!row.name) continue;
      properties[row.name] = row.prop;
      if (row.required) required.push(row.name);
    }
    const next = { ...base, type: base.type || 'object', properties };
    if (required.length) next.required = required; else delete next.required;
    onChange(path, next);
  };
  const set = (prop, key, value) => { if (value === undefined || value === '') delete prop[key]; else prop[key] = value; };
  const body = h('tbody', {}, rows.map((row, i) => h('tr', { dataset: { input: row.name } },
    h('td', {}, h('input', { type: 'text', value: row.name, 'aria-label': 'input name', class: 'input-name', onchange: (e) => { row.name = e.target.value.trim(); emit(); } })),
    h('td', {}, h('select', { 'aria-label': `type of ${row.name}`, onchange: (e) => { set(row.prop, 'type', e.target.value); emit(); } },
      h('option', { value: '' }, 'any'), TYPES.map((t) => h('option', { value: t, selected: row.prop.type === t }, t)))),
    h('td', {}, h('input', { type: 'checkbox', checked: row.required, 'aria-label': `${row.name} is required`, onchange: (e) => { row.required = e.target.checked; emit(); } })),
    h('td', {}, h('input', { type: 'text', value: row.prop.default === undefined ? null : JSON.stringify(row.prop.default), placeholder: 'default', 'aria-label': `default of ${row.name}`,
      onchange: (e) => { set(row.prop, 'default', looseValue(e.target.value)); emit(); } })),
    h('td', {}, h('input', { type: 'text', value: row.prop.description ?? null, placeholder: 'description', 'aria-label': `description of ${row.name}`,
      onchange: (e) => { set(row.prop, 'description', e.target.value); emit(); } })),
    h('td', {}, h('button', { type: 'button', class: 'link', title: `remove ${row.name}`, onclick: () => { rows.splice(i, 1); emit(); } }, '×')))));
  return h('fieldset', { class: 'field group', dataset: { path } }, h('legend', {}, path),
    h('table', { class: 'rows' }, h('thead', {}, h('tr', {}, ['name', 'type', 'req.', 'default', 'description', ''].map((t) => h('th', {}, t)))), body),
    h('button', { type: 'button', class: 'add-row', id: `add-${path}`, onclick: () => { rows.push({ name: `input_${rows.length + 1}`, prop: { type: 'string' }, required: false }); emit(); } }, 'Add input'),
    h('span', { class: 'field-issue', role: 'alert' }));
}

// A map of names to templates (a workflow's `outputs`) as rows of name and value.
export function mapEditor(value, onChange, path = 'outputs') {
  const rows = Object.entries(value && typeof value === 'object' ? value : {}).map(([name, text]) => ({ name, text }));
  const emit = () => {
    const next = {};
    for (const row of rows) if (row.name) next[row.name] = row.text;
    onChange(path, rows.length ? next : undefined);
  };
  return h('fieldset', { class: 'field group', dataset: { path } }, h('legend', {}, path),
    rows.map((row, i) => h('div', { class: 'map-row', dataset: { key: row.name } },
      h('input', { type: 'text', value: row.name, 'aria-label': `${path} name`, class: 'map-key', onchange: (e) => { row.name = e.target.value.trim(); emit(); } }),
      h('input', { type: 'text', value: typeof row.text === 'string' ? row.text : JSON.stringify(row.text), 'aria-label': `${path} ${row.name}`, class: 'map-value',
        onchange: (e) => { row.text = e.target.value; emit(); } }),
      h('button', { type: 'button', class: 'link', title: `remove ${row.name}`, onclick: () => { rows.splice(i, 1); emit(); } }, '×'))),
    h('button', { type: 'button', class: 'add-row', id: `add-${path}`, onclick: () => { rows.push({ name: `out_${rows.length + 1}`, text: '' }); emit(); } }, 'Add output'),
    h('span', { class: 'field-issue', role: 'alert' }));
}
