// Instances: a list filtered and paged by the API's cursor, and the detail of
// one instance — its diagram with the current tokens and the path taken, the
// subscriptions it holds open, its jobs and incidents, the messages correlated
// into it or parked naming it, its variables and history, and the repairs
// (add, move, cancel a token) through the engine's guard: a refused repair
// shows the subscription it would have duplicated, as the API's 409 names it.

import { $, ApiError, cell, h, instanceLink, json, problem, route } from './lib.js';
import { may } from './session.js';
import { draw, drawn, obstacles, place } from './diagram.js';

const FILTERS = ['waiting_at', 'state', 'key', 'variable', 'value', 'started_from', 'started_before', 'has_incident', 'order'];
const list = { query: '', cursors: [], next: null };

/** The filter form shows the filters of the hash; submitting it sets them. */
function syncForm(params) {
  const form = $('instance-filter');
  for (const f of FILTERS) {
    const input = form.elements[f];
    if (!input || input === document.activeElement) continue;
    const v = params.get(f) || '';
    if (input.type === 'checkbox') input.checked = v === 'true';
    else if (input.type === 'datetime-local') input.value = v ? v.slice(0, 16) : '';
    else input.value = v;
  }
  form.onsubmit = (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams({ view: 'instances' });
    for (const f of FILTERS) {
      const input = form.elements[f];
      if (input.type === 'checkbox') {
        if (input.checked) p.set(f, 'true');
      } else if (input.value.trim()) {
        p.set(f, input.type === 'datetime-local' ? new Date(input.value).toISOString() : input.value.trim());
      }
    }
    location.hash = p.toString();
  };
}

export async function renderInstances() {
  const params = route();
  syncForm(params);
  const q = new URLSearchParams();
  for (const f of FILTERS) if (params.get(f)) q.set(f, params.get(f));
  q.set('limit', '50');
  const query = q.toString();
  if (query !== list.query) {
    list.query = query;
    list.cursors = [];
  }
  const cursor = list.cursors[list.cursors.length - 1];
  const page = await json(`/instances?${query}${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`);
  const body = $('instance-list').tBodies[0];
  body.replaceChildren();
  for (const i of page.instances) {
    body.appendChild(h('tr', { dataset: { instance: i.instance, state: i.state } },
      h('td', {}, instanceLink(i.instance)),
      cell(`${i.process} v${i.version}`),
      cell(i.state),
      cell(i.business_key || ''),
      cell(i.waiting_at.join(', ')),
      cell(i.incidents.join('; ')),
      cell(i.started_at),
    ));
  }
  list.next = page.next;
  $('no-instances').hidden = page.instances.length > 0;
  $('instances-next').hidden = !page.next;
  $('instances-first').hidden = list.cursors.length === 0;
  $('instances-next').onclick = () => { list.cursors.push(list.next); renderInstances().catch((e) => problem(e.message)); };
  $('instances-first').onclick = () => { list.cursors = []; renderInstances().catch((e) => problem(e.message)); };
}

// ---------- detail ----------

const detail = { id: null, elements: [], dirty: false };

/** The hash of this instance's detail, narrowed to `at` (or not). */
function detailHash(id, at) {
  const p = new URLSearchParams({ view: 'instance', id });
  if (at) p.set('at', at);
  return `#${p.toString()}`;
}

/** The tokens at `at` and every token that runs inside one of them (the
 * inner instances of a multi-instance body, what runs in a subprocess). */
function within(tokens, at) {
  const byId = new Map(tokens.map((t) => [t.token, t]));
  const inside = (t) => {
    for (let s = t, hops = 0; s && hops <= tokens.length; s = byId.get(s.scope), hops += 1) {
      if (s.element === at) return true;
      if (!s.scope) break;
    }
    return false;
  };
  return tokens.filter(inside);
}

function markers(viewer, d) {
  if (!viewer) return;
  const canvas = viewer.get('canvas');
  const registry = viewer.get('elementRegistry');
  for (const e of registry.getAll()) {
    canvas.removeMarker(e.id, 'pf-current');
    canvas.removeMarker(e.id, 'pf-passed');
  }
  for (const h2 of d.history) if (drawn(viewer, h2.element)) canvas.addMarker(h2.element, 'pf-passed');
  for (const t of d.tokens) if (drawn(viewer, t.element)) canvas.addMarker(t.element, 'pf-current');
  // on every element with tokens: how many run at it and inside it, a link
  // to exactly those rows (the inner instances of a body, a subprocess's inside)
  const overlays = viewer.get('overlays');
  overlays.remove({ type: 'postfach-tokens' });
  const taken = obstacles(viewer);
  const at = [...new Set(d.tokens.map((t) => t.element))];
  for (const element of at) {
    if (!drawn(viewer, element)) continue;
    const n = within(d.tokens, element).length;
    const b = h('a', {
      class: 'pf-badge pf-waiting pf-tokens',
      href: detailHash(d.instance, element),
      title: `${n} token(s) at ${element} and inside it`,
      dataset: { element, tokens: n },
    }, `${n} ⟶`);
    overlays.add(element, 'postfach-tokens', { position: place(registry.get(element), b, taken), html: b });
  }
  if (!detail.clicks) {
    detail.clicks = true;
    viewer.get('eventBus').on('element.click', (ev) => {
      const tokens = detail.tokens || [];
      if (tokens.some((t) => t.element === ev.element.id)) location.hash = detailHash(detail.id, ev.element.id);
    });
  }
}

function elementSelect(cls) {
  const select = h('select', { class: cls, onchange: () => { detail.dirty = true; } }, h('option', { value: '' }, '— element —'));
  for (const e of detail.elements) {
    select.appendChild(h('option', { value: e.element }, e.name ? `${e.name} (${e.element})` : e.element));
  }
  return select;
}

/** Shows what a repair did, or why the guard refused it. */
function repairOutcome(err, answer) {
  const box = $('repair-outcome');
  box.replaceChildren();
  box.hidden = false;
  delete box.dataset.conflictInstance;
  if (!err) {
    box.className = 'done';
    box.append(`done: ${JSON.stringify(answer)}`);
    return;
  }
  box.className = 'problem';
  box.append(err.message);
  const c = err instanceof ApiError && err.body && err.body.conflict;
  if (c) {
    box.dataset.conflictInstance = c.instance;
    box.append(h('div', { class: 'conflict' },
      'conflicting subscription: ', instanceLink(c.instance), ` waits at ${c.element} for message ${c.message} with key ${c.key}`));
  }
}

async function repair(path, body) {
  try {
    const answer = await json(path, body);
    repairOutcome(null, answer);
    detail.dirty = false;
  } catch (err) {
    repairOutcome(err);
  }
  await renderInstance(true);
}

async function retry(job) {
  try {
    const r = await json(`/jobs/${encodeURIComponent(job)}/retry`, {});
    repairOutcome(null, { retried: job, next: r.next });
  } catch (err) {
    repairOutcome(err);
  }
  await renderInstance(true);
}

/** Where a token runs: inside a subprocess, or as an inner instance of a
 * multi-instance body (its scope token rests at the same element), with
 * its local variables. */
function placeOf(t, tokens) {
  if (!t.scope) return '';
  const holder = tokens.find((o) => o.token === t.scope);
  const inner = holder && holder.element === t.element;
  const locals = Object.entries(t.locals || {})
    .map(([k, v]) => `${k} = ${JSON.stringify(v)}`)
    .join(', ');
  const where = inner ? `inner instance of token ${t.scope}` : `inside the subprocess of token ${t.scope}`;
  return locals ? ` (${where}; ${locals})` : ` (${where})`;
}

/** What a token waits for; a call activity's child instance as a link, and
 * for a token that others run inside (a multi-instance body, a subprocess) a
 * link to them. */
function waitsFor(t, tokens, instance) {
  const text = `${t.waits_for}${placeOf(t, tokens)}`;
  const child = /^called instance (\d+) to end$/.exec(t.waits_for);
  const inner = tokens.filter((o) => o.scope === t.token).length;
  if (inner > 0 && !child) {
    const shown = within(tokens, t.element).length - 1;
    return h('td', {}, text, ' ', h('a', {
      class: 'inner-link',
      href: detailHash(instance, t.element),
      dataset: { element: t.element },
    }, `show the ${shown} inside`));
  }
  if (!child) return cell(text);
  return h('td', {}, 'called ', instanceLink(child[1]), ' to end', placeOf(t, tokens));
}

/** Running an ad-hoc subprocess: activate one of its activities, or complete it. */
function adHocControls(id, a) {
  if (!a) return [];
  const pick = h('select', { class: 'activate-what' },
    ...a.activatable.map((e) => h('option', { value: e }, e)));
  const path = `/instances/${id}/tokens/${a.token}`;
  return [h('div', { class: 'ad-hoc' },
    ...(a.activatable.length
      ? [pick, ' ', h('button', {
        class: 'activate',
        onclick: () => pick.value && repair(`${path}/activate`, { element: pick.value }),
      }, 'Activate'), ' ']
      : []),
    h('button', { class: 'complete-ad-hoc', onclick: () => repair(`${path}/complete`, {}) }, 'Complete'))];
}

function tokenRow(id, t, tokens, adHoc) {
  const target = elementSelect('move-to');
  return h('tr', { dataset: { token: t.token, element: t.element } },
    cell(t.token, 'num'),
    cell(t.element),
    waitsFor(t, tokens, id),
    cell(t.since),
    !may('operate') ? cell('') : h('td', {},
      h('button', { class: 'cancel-token', onclick: () => repair(`/instances/${id}/tokens/${t.token}/cancel`, {}) }, 'Cancel'),
      ' ', target, ' ',
      h('button', {
        class: 'move-token',
        onclick: () => target.value && repair(`/instances/${id}/tokens/${t.token}/move`, { element: target.value }),
      }, 'Move'),
      ...adHocControls(id, (adHoc || []).find((a) => a.token === t.token))));
}

function jobRow(j) {
  return h('tr', { dataset: { job: j.job, state: j.state } },
    cell(j.job),
    cell(j.element),
    cell(j.kind + (j.topic ? ` (${j.topic})` : '')),
    cell(j.state),
    cell(j.attempts, 'num'),
    cell(j.history.map((a) => `${a.at}: ${a.error}`).join('\n'), 'attempts'),
    cell(j.due_at),
    h('td', {}, j.state === 'incident' && may('operate')
      ? h('button', { class: 'retry', onclick: () => retry(j.job) }, 'Retry')
      : ''));
}

function fill(tableId, rows) {
  $(tableId).tBodies[0].replaceChildren(...rows);
}

/** The detail of the instance in the hash; `force` redraws even while edited. */
export async function renderInstance(forced) {
  let force = forced;
  const id = route().get('id');
  if (!id) return;
  const at = route().get('at');
  if (at !== detail.at) {
    detail.at = at; // narrowed or widened by a link: show it now
    force = true;
  }
  if (id !== detail.id) {
    detail.id = id;
    detail.dirty = false;
    $('repair-outcome').hidden = true;
    force = true; // another instance: nothing chosen here yet
  }
  const busy = () => !force && (detail.dirty || $('instance').contains(document.activeElement));
  if (busy()) return; // an operator is choosing a repair: the rows stay
  const d = await json(`/instances/${encodeURIComponent(id)}`);
  const stats = await json(`/processes/${encodeURIComponent(d.process)}/statistics?version=${d.version}`);
  if (busy() || route().get('id') !== id) return; // they began while the answers were on their way
  detail.elements = stats.elements;
  $('instance-title').textContent = `Instance ${d.instance} · ${d.process} v${d.version} · ${d.state}`;
  $('instance').dataset.state = d.state;
  $('instance-facts').textContent = [
    d.business_key ? `business key ${d.business_key}` : null,
    `started ${d.started_at}`,
    d.ended_at ? `ended ${d.ended_at}` : null,
  ].filter(Boolean).join(' · ');
  if (d.called_by) {
    // a child of a call activity: its parent is one click away
    $('instance-facts').append(' · called by ', instanceLink(d.called_by));
  }
  detail.tokens = d.tokens;
  const viewer = await draw($('instance-diagram'), d.process, d.version);
  if (viewer !== detail.viewer) {
    detail.viewer = viewer;
    detail.clicks = false;
  }
  $('instance-diagram').hidden = !viewer;
  markers(viewer, d);

  const shown = at ? within(d.tokens, at) : d.tokens;
  fill('tokens', shown.map((t) => tokenRow(d.instance, t, d.tokens, d.ad_hoc)));
  $('token-focus').replaceChildren(...(at
    ? [`Tokens at ${at} and inside it: ${shown.length} of ${d.tokens.length}. `,
      h('a', { href: detailHash(d.instance), class: 'all-tokens' }, 'Show all')]
    : []));
  $('token-focus').hidden = !at;
  $('add-token').replaceChildren(
    'Add a token before ', elementSelect('add-at'), ' ',
    h('button', {
      class: 'add-token',
      onclick: (ev) => {
        const at = ev.target.parentNode.querySelector('select.add-at').value;
        if (at) repair(`/instances/${d.instance}/tokens`, { element: at });
      },
    }, 'Add'));
  $('add-token').hidden = d.state === 'completed' || d.state === 'cancelled' || !may('operate');
  fill('subscriptions', d.subscriptions.map((s) => h('tr', { dataset: { name: s.name, key: s.key || '' } },
    cell(s.kind), cell(s.name), cell(s.key || ''), cell(s.element), cell(s.token, 'num'))));
  $('no-subscriptions').hidden = d.subscriptions.length > 0;
  fill('instance-jobs', d.jobs.map(jobRow));
  $('incidents').replaceChildren(...d.incidents.map((i) => h('li', {}, i)));
  fill('instance-messages', d.messages.map((m) => h('tr', { dataset: { message: m.message_id, state: m.state } },
    cell(m.message_id), cell(m.name), cell(m.key), cell(m.state), cell(m.reason || ''),
    cell(m.element || ''), cell(m.settled_at || m.accepted_at))));
  const compensable = d.compensable || [];
  fill('instance-compensable', compensable.map((c) => h('tr', { dataset: { element: c.element } },
    cell(c.element), cell(c.handler || 'what completed inside it'), cell(c.completed_at))));
  $('no-compensable').hidden = compensable.length > 0;
  $('instance-variables').textContent = JSON.stringify(d.variables, null, 2);
  fill('history', [...d.history].reverse().map((e) => h('tr', {},
    cell(e.at), cell(e.element), cell(e.event))));
}
