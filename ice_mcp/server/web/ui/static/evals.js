// The evaluations views: every kept evaluation with its pass rate, and one evaluation's per-case table (failing
// cases first, each linking to its runs). Like app.js, every server text goes in as text, never HTML.

// `kit`: app.js's helpers (h, fill, api, errorBox, badge).
export function makeEvals(kit) {
  const { h, fill, api, errorBox, badge } = kit;
  const evalHref = (id) => `#/evals/${encodeURIComponent(id)}`;
  const runHref = (id) => `#/runs/${encodeURIComponent(id)}`;
  const pct = (value) => (value === null || value === undefined ? '—' : `${Math.round(value * 1000) / 10}%`);
  const ms = (value) => (value === null || value === undefined ? '—' : `${Math.round(value)} ms`);
  const usd = (value) => (value ? `$${Number(value).toFixed(6)}` : '$0');
  const json = (value) => JSON.stringify(value);

  function verdictBadge(verdict) {
    return h('span', { class: `badge verdict-${verdict}`, dataset: { verdict } }, verdict);
  }

  async function listView(main, signal) {
    const body = h('div', { id: 'evals-body' });
    fill(main, h('section', { class: 'evals' }, h('div', { class: 'toolbar' }, h('h1', {}, 'Evaluations')), body));
    let data;
    try { data = await api('/ui/api/evals'); } catch (error) { if (!signal.aborted) fill(body, errorBox(error)); return; }
    if (signal.aborted) return;
    const rows = data.evals.map((e) => h('tr', { dataset: { eval: e.eval_id, status: e.status }, onclick: () => { location.hash = evalHref(e.eval_id); } },
      h('td', {}, badge(e.status)),
      h('td', {}, e.target),
      h('td', {}, h('a', { href: evalHref(e.eval_id), class: 'mono' }, e.eval_id.slice(0, 12))),
      h('td', {}, e.dataset ? `${e.dataset.name} (${e.dataset.cases} × ${e.repetitions || 1})` : '—'),
      h('td', { class: 'num pass-rate' }, pct(e.pass_rate)),
      h('td', { class: 'num' }, e.cases_failed ?? '—'),
      h('td', {}, e.started_at ? new Date(e.started_at).toLocaleString() : '—'),
      h('td', { class: 'num' }, usd(e.cost_usd))));
    fill(body,
      h('table', { class: 'runs-table evals-table' },
        h('thead', {}, h('tr', {}, ['Status', 'Target', 'Evaluation', 'Dataset', 'Pass rate', 'Cases failed', 'Started', 'Cost'].map((t) => h('th', {}, t)))),
        h('tbody', {}, rows)),
      rows.length ? null : h('p', { class: 'muted empty' }, 'No evaluations yet. Run one with eval_run, /rpc eval.run or ice-mcp eval.'));
  }

  function scoreList(run) {
    if (run.status !== 'succeeded') {
      const error = run.error || {};
      return h('span', { class: 'muted' }, `${run.status}${error.message ? `: ${error.message}` : ''}`);
    }
    return h('ul', { class: 'scores' }, run.scores.map((s) => h('li', { dataset: { passed: String(s.passed) } },
      h('span', { class: s.passed ? 'score-pass' : 'score-fail' }, s.passed ? '✓' : '✗'), ` ${s.scorer}: ${s.reason}`,
      s.run_id ? [' (', h('a', { href: runHref(s.run_id), class: 'mono' }, 'judge'), ')'] : null)));
  }

  function caseRow(row) {
    const runs = row.runs.map((run) => (run.run_id
      ? h('a', { href: runHref(run.run_id), class: `mono case-run ${run.passed ? 'run-pass' : 'run-fail'}`, dataset: { run: run.run_id },
        title: `repetition ${run.repetition}: ${run.status}` }, run.run_id.slice(0, 8))
      : h('span', { class: 'muted run-fail', title: `repetition ${run.repetition}` }, run.status)));
    const first = row.runs.find((run) => !run.passed) || row.runs[0];
    return h('tr', { dataset: { case: row.id, verdict: row.verdict } },
      h('td', {}, verdictBadge(row.verdict)),
      h('td', { class: 'mono case-id' }, row.id),
      h('td', { class: 'num' }, `${row.passes}/${row.attempts}`),
      h('td', { class: 'wrap mono' }, json(row.inputs)),
      h('td', { class: 'wrap mono' }, json(row.expected)),
      h('td', { class: 'wrap mono' }, first && first.outputs !== null && first.outputs !== undefined ? json(first.outputs) : '—'),
      h('td', { class: 'wrap' }, first ? scoreList(first) : null),
      h('td', { class: 'runs-cell' }, runs.flatMap((link, i) => (i ? [' ', link] : [link]))));
  }

  async function detailView(main, id, signal) {
    const body = h('div', { id: 'eval-body' });
    fill(main, h('section', { class: 'evaluation' }, h('a', { href: '#/evals', class: 'back' }, '← Evaluations'), body));
    let r;
    try { r = await api(`/ui/api/evals/${encodeURIComponent(id)}`); } catch (error) { if (!signal.aborted) fill(body, errorBox(error)); return; }
    if (signal.aborted) return;
    const s = r.summary;
    const ks = Object.keys(s.pass_at_k);
    fill(body,
      h('div', { class: 'run-head' },
        h('h1', { id: 'eval-title' }, `${r.target.label} on ${r.dataset.name}`), badge(r.status),
        h('span', { class: 'facts' }, h('span', { class: 'mono' }, r.eval_id.slice(0, 12)),
          h('span', {}, `${s.cases} cases × ${r.repetitions}`),
          r.started_at ? h('span', {}, new Date(r.started_at).toLocaleString()) : null)),
      h('dl', { class: 'facts-list eval-summary', id: 'eval-summary' },
        h('dt', {}, 'Pass rate'), h('dd', { id: 'pass-rate' }, `${pct(s.pass_rate)} (${s.passed_attempts}/${s.attempts} runs)`),
        h('dt', {}, 'Cases'), h('dd', {}, `${s.cases_passed} passed, ${s.cases_failed} failed, ${s.cases_flaky} flaky`),
        h('dt', {}, 'pass@k'), h('dd', {}, ks.map((k) => `@${k} ${pct(s.pass_at_k[k])}`).join(' · ')),
        h('dt', {}, 'pass^k'), h('dd', {}, ks.map((k) => `^${k} ${pct(s.pass_hat_k[k])}`).join(' · ')),
        h('dt', {}, 'Latency'), h('dd', {}, `p50 ${ms(s.latency_ms.p50)} · p95 ${ms(s.latency_ms.p95)}`),
        h('dt', {}, 'Cost'), h('dd', {}, `${usd(s.cost_usd.total)} (p50 ${usd(s.cost_usd.p50)}, p95 ${usd(s.cost_usd.p95)} a run)`),
        h('dt', {}, 'Scorers'), h('dd', { class: 'mono' }, r.scorers.map((sc) => json(sc)).join(' '))),
      h('table', { class: 'runs-table cases-table', id: 'cases' },
        h('thead', {}, h('tr', {}, ['Verdict', 'Case', 'Passed', 'Inputs', 'Expected', 'Outputs', 'Scores', 'Runs'].map((t) => h('th', {}, t)))),
        h('tbody', {}, r.cases.map(caseRow))),
      h('p', { class: 'muted hint' }, 'Failing cases first, then flaky ones (some runs passed), then passing. Outputs and scores are those of the case\'s first failing run.'));
  }

  // A run an evaluation made (a case's run, a judge's, or the evaluation's own record): a link to its results.
  function triggerLink(trigger, { stop = false } = {}) {
    if (!trigger || !['eval', 'eval_case', 'eval_judge'].includes(trigger.kind) || !trigger.eval_id) return null;
    const what = trigger.kind === 'eval' ? 'evaluation results'
      : `${trigger.kind === 'eval_judge' ? 'judge of ' : ''}eval ${trigger.eval_id.slice(0, 8)} · case ${trigger.case} #${trigger.repetition}`;
    return h('a', { href: evalHref(trigger.eval_id), class: 'trigger-link', dataset: { eval: trigger.eval_id },
      onclick: stop ? (event) => event.stopPropagation() : null }, what);
  }

  return { listView, detailView, triggerLink };
}
