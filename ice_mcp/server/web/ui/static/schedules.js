// The schedules views: every schedule with its next fires, one schedule with its firings, and the link
// from a run to the schedule that started it. Like app.js, every server text goes in as text, never HTML.

const REFRESH_MS = 5000;  // how often an open schedules view reads again (next fires move, firings arrive)
const STALE_SECONDS = 90;  // a firing loop looks at least every 30 s: older than this, no server fires
const OUTCOMES = ['started', 'skipped_overlap', 'buffered', 'buffer_dropped', 'missed', 'paused', 'rate_limited'];

// `kit`: app.js's helpers (h, fill, api, errorBox, pre, badge).
export function makeSchedules(kit) {
  const { h, fill, api, errorBox, pre } = kit;
  const scheduleHref = (id) => `#/schedules/${encodeURIComponent(id)}`;
  const runHref = (id) => `#/runs/${encodeURIComponent(id)}`;
  const seconds = (iso) => (iso ? Date.parse(iso) / 1000 : null);

  function fmtAgo(iso) {
    const at = seconds(iso);
    if (at === null || Number.isNaN(at)) return '';
    const delta = Math.round(at - Date.now() / 1000);
    const size = Math.abs(delta);
    if (size < 2) return 'just now';
    const text = size < 60 ? `${size} s` : size < 3600 ? `${Math.floor(size / 60)} m`
      : size < 86400 ? `${Math.floor(size / 3600)} h ${Math.floor((size % 3600) / 60)} m` : `${Math.floor(size / 86400)} d`;
    return delta >= 0 ? `in ${text}` : `${text} ago`;
  }

  // "2026-11-30T09:00:00+01:00" as "2026-11-30 09:00:00 +01:00": the schedule's own zone, its offset shown.
  const fmtLocal = (local) => String(local || '').replace('T', ' ').replace(/([+-]\d\d:\d\d|Z)$/, ' $1');
  const fmtUtc = (iso) => (iso ? String(iso).replace('T', ' ').replace(/Z$/, ' UTC') : '—');

  function specWords(schedule) {
    const spec = schedule.spec || {};
    const rule = spec.cron !== undefined ? ['cron', spec.cron]
      : spec.every_seconds !== undefined ? ['every_seconds', String(spec.every_seconds)]
        : spec.rrule !== undefined ? ['rrule', spec.rrule] : null;
    const extras = [];
    if (spec.start_at) extras.push(`from ${fmtUtc(spec.start_at)}`);
    if (spec.end_at) extras.push(`until ${fmtUtc(spec.end_at)}`);
    if (spec.jitter_seconds) extras.push(`jitter ${spec.jitter_seconds} s`);
    return h('div', { class: 'spec' },
      schedule.description ? h('div', { class: 'spec-words' }, schedule.description) : null,
      h('div', { class: 'muted' },
        rule ? h('code', { class: 'spec-rule' }, `${rule[0]}: ${rule[1]}`) : null,
        ` · ${spec.timezone || 'UTC'}`,
        extras.length ? ` · ${extras.join(' · ')}` : null));
  }

  function stateBadge(schedule) {
    const paused = schedule.state && schedule.state.paused;
    return h('span', { class: `badge ${paused ? 'status-paused' : 'status-active'}`, dataset: { state: paused ? 'paused' : 'active' } },
      paused ? 'paused' : 'active');
  }

  function pausedNote(schedule) {
    const note = schedule.state && schedule.state.paused && schedule.state.note;
    return note ? h('div', { class: 'muted pause-note' }, note) : null;
  }

  function fires(list, cls) {
    if (!list || !list.length) return h('span', { class: 'muted' }, 'no more fires');
    return h('ol', { class: `fires ${cls || ''}` }, list.map((fire) => h('li', { title: `${fmtUtc(fire.at)}` },
      h('span', { class: 'mono fire-local' }, fmtLocal(fire.local)), h('span', { class: 'muted' }, ` ${fmtAgo(fire.at)}`))));
  }

  function counts(schedule) {
    const entries = Object.entries(schedule.counts || {}).filter(([, n]) => n)
      .sort(([a], [b]) => OUTCOMES.indexOf(a) - OUTCOMES.indexOf(b));
    if (!entries.length) return h('span', { class: 'muted' }, 'none yet');
    return h('span', { class: 'outcome-counts' }, entries.map(([outcome, n]) =>
      h('span', { class: `count outcome-${outcome}`, dataset: { outcome } }, `${n} ${outcome.replace('_', ' ')}`)));
  }

  function lastFired(firing) {
    if (!firing) return h('span', { class: 'muted' }, 'never');
    return h('span', { title: `slot ${fmtUtc(firing.slot)}` }, `${fmtAgo(firing.fired_at)} · ${firing.outcome.replace('_', ' ')}`);
  }

  // Whether any server fires this store's schedules, from when one last ran the firing loop.
  function loopLine(aliveAt) {
    const at = seconds(aliveAt);
    if (at === null) {
      return h('p', { class: 'loop-line stale', id: 'scheduler-alive' },
        'No server has run the firing loop on this store yet: schedules fire only while a server runs on it.');
    }
    const stale = Date.now() / 1000 - at > STALE_SECONDS;
    return h('p', { class: `loop-line ${stale ? 'stale' : 'alive'}`, id: 'scheduler-alive', title: fmtUtc(aliveAt) },
      `A server last ran the firing loop ${fmtAgo(aliveAt)} (${new Date(at * 1000).toLocaleString()})`,
      stale ? ': none runs now, so slots are not fired (a stdio server fires only while its client is open).' : '.');
  }

  // Reads `load` now and every REFRESH_MS while the view is open; draws again only when the answer changed.
  async function polled(load, draw, signal) {
    let last = null;
    const once = async () => {
      let data;
      try { data = await load(); } catch (error) { if (last === null) { last = ''; draw(null, error); } return; }
      if (signal.aborted) return;
      const text = JSON.stringify(data);
      if (text !== last) { last = text; draw(data, null); }
    };
    await once();
    const timer = setInterval(once, REFRESH_MS);
    signal.addEventListener('abort', () => clearInterval(timer));
  }

  // What a schedule runs: a workflow (its page) or a network (its runs: a network has no page of its own).
  function targetName(s) { return s.workflow || s.network; }
  function targetLink(s, extra) {
    const name = targetName(s);
    return s.workflow
      ? h('a', { href: `#/workflows/${encodeURIComponent(name)}`, ...extra }, name)
      : h('a', { href: `#/runs?workflow=${encodeURIComponent(name)}`, title: 'a network', ...extra }, `network ${name}`);
  }

  async function listView(main, query, signal) {
    const workflow = query.get('workflow') || '';
    const body = h('div', { id: 'schedules-body' });
    fill(main, h('section', { class: 'schedules' },
      h('div', { class: 'toolbar' }, h('h1', {}, 'Schedules'),
        workflow ? h('span', { class: 'muted' }, `of ${workflow} · `, h('a', { href: '#/schedules' }, 'all')) : null),
      body));
    await polled(() => api(`/ui/api/schedules${workflow ? `?workflow=${encodeURIComponent(workflow)}` : ''}`), (data, error) => {
      if (error) { fill(body, errorBox(error)); return; }
      const rows = data.schedules.map((s) => h('tr', { dataset: { schedule: s.id }, onclick: () => { location.hash = scheduleHref(s.id); } },
        h('td', {}, h('a', { href: scheduleHref(s.id), class: 'mono schedule-id' }, s.id)),
        h('td', {}, targetLink(s, { onclick: (e) => e.stopPropagation() })),
        h('td', { class: 'wrap' }, specWords(s)),
        h('td', { class: 'wrap' }, stateBadge(s), pausedNote(s)),
        h('td', {}, fires(s.next_fires, 'next-fires')),
        h('td', { class: 'wrap' }, counts(s)),
        h('td', {}, lastFired(s.last_firing))));
      fill(body,
        loopLine(data.scheduler_alive_at),
        data.note ? h('p', { class: 'muted', id: 'schedules-note' }, data.note) : null,
        h('table', { class: 'runs-table schedules-table' },
          h('thead', {}, h('tr', {}, ['Schedule', 'Runs', 'When', 'State', 'Next fires (schedule time)', 'Firings', 'Last fired'].map((t) => h('th', {}, t)))),
          h('tbody', {}, rows)),
        rows.length ? null : h('p', { class: 'muted empty' },
          'No schedules. Create one with the schedule_create tool, /rpc schedule.create, ice-mcp schedules create, or a blueprint\'s schedules:.'));
    }, signal);
  }

  function firingRow(firing) {
    return h('tr', { dataset: { slot: firing.slot, outcome: firing.outcome } },
      h('td', { class: 'mono' }, fmtUtc(firing.slot)),
      h('td', {}, h('span', { class: `badge outcome-${firing.outcome}` }, firing.outcome.replace('_', ' '))),
      h('td', {}, firing.run_id
        ? [h('a', { href: runHref(firing.run_id), class: 'mono firing-run', dataset: { run: firing.run_id } }, firing.run_id.slice(0, 12)),
          firing.run_status ? [' ', kit.badge(firing.run_status)] : null]
        : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'num' }, firing.count > 1 ? `${firing.count} slots` : String(firing.count ?? 1)),
      h('td', {}, firing.fired_at ? h('span', { title: fmtUtc(firing.fired_at) }, fmtAgo(firing.fired_at)) : '—'),
      h('td', { class: 'mono muted' }, firing.replica || ''));
  }

  async function detailView(main, id, signal) {
    const body = h('div', { id: 'schedule-body' });
    fill(main, h('section', { class: 'schedule' }, h('a', { href: '#/schedules', class: 'back' }, '← Schedules'), body));
    await polled(() => api(`/ui/api/schedules/${encodeURIComponent(id)}`), (s, error) => {
      if (error) { fill(body, errorBox(error)); return; }
      const policy = s.policy || {};
      const catchup = policy.catchup && typeof policy.catchup === 'object' ? policy.catchup : {};
      fill(body,
        h('div', { class: 'run-head' },
          h('h1', { class: 'schedule-title', id: 'schedule-title' }, s.id), stateBadge(s),
          h('span', { class: 'facts' },
            h('span', {}, 'runs ', targetLink(s)),
            h('a', { href: `#/runs?workflow=${encodeURIComponent(targetName(s))}` }, `all ${targetName(s)} runs`),
            h('span', {}, `revision ${s.revision}`),
            h('span', {}, s.origin === 'declared' ? `declared by its ${s.workflow ? 'blueprint' : 'manifest'}` : 'created at run time'))),
        pausedNote(s),
        loopLine(s.scheduler_alive_at),
        h('div', { class: 'schedule-body' },
          h('div', { class: 'schedule-main' },
            h('h2', {}, 'Firings'),
            s.firings.length
              ? h('table', { class: 'runs-table firings-table', id: 'firings' },
                h('thead', {}, h('tr', {}, ['Slot', 'Outcome', 'Run', 'Slots', 'Decided', 'By'].map((t) => h('th', {}, t)))),
                h('tbody', {}, s.firings.map(firingRow)))
              : h('p', { class: 'muted empty' }, 'No firings yet.'),
            h('p', { class: 'muted hint' }, 'A missed or paused row stands for a stretch of slots (its count); its slot is the last of them.')),
          h('aside', { class: 'side' },
            h('div', { class: 'label' }, 'When'), specWords(s),
            h('div', { class: 'label' }, 'Next fires (schedule time)'), fires(s.next_fires, 'next-fires'),
            h('div', { class: 'label' }, 'Firings by outcome'), counts(s),
            h('div', { class: 'label' }, 'Policy'),
            h('dl', { class: 'facts-list' },
              h('dt', {}, 'Overlap'), h('dd', {}, policy.overlap || '—'),
              h('dt', {}, 'Catch-up'), h('dd', {}, catchup.mode
                ? `${catchup.mode}${catchup.mode === 'all' && catchup.max_runs ? ` (at most ${catchup.max_runs} runs)` : ''}${catchup.window_seconds ? ` within ${catchup.window_seconds} s` : ''}`
                : '—'),
              h('dt', {}, 'On failure'), h('dd', {}, policy.pause_on_failure ? 'pause' : 'go on')),
            h('div', { class: 'label' }, 'Inputs'), pre(s.inputs_text))));
    }, signal);
  }

  // "schedule <id> · slot <slot>", linking to the schedule; null for a run a call started.
  function triggerLink(trigger, { stop = false } = {}) {
    if (!trigger || trigger.kind !== 'schedule' || !trigger.schedule_id) return null;
    const how = trigger.manual ? ' (triggered)' : trigger.backfill ? ' (backfill)' : '';
    return h('a', { href: scheduleHref(trigger.schedule_id), class: 'trigger-link', dataset: { schedule: trigger.schedule_id },
      title: trigger.previous_slot ? `previous slot ${trigger.previous_slot}` : null,
      onclick: stop ? (event) => event.stopPropagation() : null },
    `schedule ${trigger.schedule_id} · slot ${trigger.slot || '—'}${how}`);
  }

  return { listView, detailView, triggerLink };
}
