// The postfach console: a process version's diagram with, on each element,
// what waits there and since when, its ready jobs and incidents, and at message
// catch points the buffered and parked messages of that name. Everything comes
// from the HTTP API of the same server; the figures from
// GET /processes/{id}/statistics, which reads gauges, not records, so polling
// it every few seconds costs the same with ten or a million waiting orders.

const REFRESH_MS = 5000;
const state = { process: null, version: null, viewer: null, shown: null };
const $ = (id) => document.getElementById(id);

function token() {
  return sessionStorage.getItem('postfach-token');
}

async function api(path, body) {
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const init = { headers };
  if (body !== undefined) {
    init.method = 'POST';
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 401) {
    $('token-form').hidden = false;
    throw new Error('this server wants a bearer token: enter it above');
  }
  return r;
}

async function json(path, payload) {
  const r = await api(path, payload);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}

/** A duration in milliseconds, the way an operator reads it: 3d 4h, 12m, 40s. */
export function age(ms) {
  if (ms == null) return '';
  const s = Math.floor(ms / 1000);
  const parts = [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']];
  const out = [];
  let rest = s;
  for (const [n, unit] of parts) {
    if (rest >= n || (unit === 's' && out.length === 0)) {
      out.push(`${Math.floor(rest / n)}${unit}`);
      rest %= n;
    }
    if (out.length === 2) break;
  }
  return out.join(' ');
}

function problem(text) {
  const p = $('problem');
  p.textContent = text || '';
  p.hidden = !text;
}

function text(value) {
  return document.createTextNode(value == null ? '' : String(value));
}

function cell(value, cls) {
  const td = document.createElement('td');
  if (cls) td.className = cls;
  td.appendChild(text(value));
  return td;
}

function parkedText(parked) {
  return Object.entries(parked || {}).map(([reason, n]) => `${n} ${reason}`).join(', ');
}

function renderTable(stats) {
  const body = $('elements').tBodies[0];
  body.replaceChildren();
  for (const e of stats.elements) {
    const tr = document.createElement('tr');
    tr.dataset.element = e.element;
    tr.dataset.waiting = e.waiting;
    tr.dataset.incidents = e.incidents;
    tr.append(
      cell(e.name ? `${e.name} (${e.element})` : e.element),
      cell(e.kind),
      cell(e.waiting, 'num'),
      cell(age(e.oldest_wait_ms)),
      cell(e.jobs_ready, 'num'),
      cell(e.incidents, 'num'),
      cell(e.message || ''),
      cell(e.message ? e.buffered : '', 'num'),
      cell(parkedText(e.parked)),
    );
    body.appendChild(tr);
  }
}

function badge(kind, label, title) {
  const div = document.createElement('div');
  div.className = `pf-badge pf-${kind}`;
  div.title = title;
  div.appendChild(text(label));
  return div;
}

function renderOverlays(stats) {
  if (!state.viewer) return;
  const overlays = state.viewer.get('overlays');
  const registry = state.viewer.get('elementRegistry');
  overlays.remove({ type: 'postfach' });
  for (const e of stats.elements) {
    if (!registry.get(e.element)) continue; // not drawn (no shape in the DI)
    const add = (position, html) => overlays.add(e.element, 'postfach', { position, html });
    if (e.waiting > 0) {
      const b = badge('waiting', `${e.waiting} · ${age(e.oldest_wait_ms)}`,
        `${e.waiting} waiting here, the oldest since ${e.oldest_wait_since}`);
      b.dataset.element = e.element;
      b.dataset.waiting = e.waiting;
      add({ bottom: 10, left: -10 }, b);
    }
    if (e.incidents > 0) {
      add({ top: -10, right: 10 }, badge('incidents', `${e.incidents} ⚠`, `${e.incidents} incident(s)`));
    }
    if (e.jobs_ready > 0) {
      add({ top: -10, left: -10 }, badge('jobs', `${e.jobs_ready} ready`, `${e.jobs_ready} job(s) waiting to run`));
    }
    const parked = Object.values(e.parked || {}).reduce((a, b) => a + b, 0);
    if (e.message && (e.buffered > 0 || parked > 0)) {
      add({ top: -24, left: 0 }, badge('messages', `✉ ${e.buffered} buffered · ${parked} parked`,
        `${e.message}: ${e.buffered} buffered; parked: ${parkedText(e.parked) || 'none'}`));
    }
  }
}

async function renderAlarms() {
  const { alarms } = await json('/alarms');
  const box = $('alarms');
  box.replaceChildren();
  for (const a of alarms.filter((a) => a.active)) {
    const span = document.createElement('span');
    span.className = 'alarm';
    span.appendChild(text(`alarm ${a.name}`));
    box.appendChild(span);
  }
}

async function showDiagram() {
  const key = `${state.process}@${state.version}`;
  if (state.shown === key) return;
  state.shown = key;
  $('diagram').replaceChildren();
  state.viewer = null;
  const r = await api(`/processes/${encodeURIComponent(state.process)}/xml?version=${state.version}`);
  if (!r.ok) {
    $('no-diagram').hidden = false;
    $('diagram').hidden = true;
    return;
  }
  const viewer = new window.BpmnJS({ container: $('diagram') });
  try {
    await viewer.importXML(await r.text());
    // a collaboration or a file with several processes: show this one
    viewer.get('canvas').zoom('fit-viewport');
    state.viewer = viewer;
    $('no-diagram').hidden = true;
    $('diagram').hidden = false;
  } catch (err) {
    viewer.destroy();
    $('no-diagram').hidden = false;
    $('diagram').hidden = true;
  }
}

function view() {
  return new URLSearchParams(location.hash.slice(1)).get('view') === 'messages' ? 'messages' : 'overview';
}

async function renderParked() {
  const body = $('parked').tBodies[0];
  // an operator typing a reason keeps the rows until the action is done
  const typing = [...body.querySelectorAll('input.why')].some((i) => i.value || i === document.activeElement);
  if (typing) return;
  const { messages } = await json('/messages?parked=true');
  body.replaceChildren();
  for (const m of messages) {
    const tr = document.createElement('tr');
    tr.dataset.message = m.message_id;
    tr.dataset.reason = m.reason || '';
    const attrs = Object.entries(m.attributes || {}).map(([k, v]) => `${k}=${v}`).join('\n');
    const raw = cell(m.raw || '');
    raw.className = 'raw';
    tr.append(
      cell(m.message_id),
      cell(m.name),
      cell(m.key),
      cell(m.reason || ''),
      cell(m.note || ''),
      cell((m.candidates || []).map((c) => `instance ${c}`).join(', ')),
      cell(m.accepted_at),
      cell(attrs),
      raw,
      actions(m),
    );
    body.appendChild(tr);
  }
  $('no-parked').hidden = messages.length > 0;
}

/** Requeue, or discard with a reason and who: the API records both. */
function actions(m) {
  const td = document.createElement('td');
  const id = encodeURIComponent(`${m.name}/${m.message_id}`);
  const requeue = document.createElement('button');
  requeue.className = 'requeue';
  requeue.appendChild(text('Requeue'));
  requeue.onclick = () => act(`/messages/${id}/requeue`, {});
  const why = document.createElement('input');
  why.className = 'why';
  why.placeholder = 'why discard?';
  const discard = document.createElement('button');
  discard.className = 'discard';
  discard.appendChild(text('Discard'));
  discard.onclick = () => {
    const by = $('who').value.trim();
    if (!why.value.trim() || !by) {
      problem('a discard needs a reason and who you are (the field "You" above)');
      return;
    }
    act(`/messages/${id}/discard`, { why: why.value.trim(), by });
  };
  td.append(requeue, ' ', why, ' ', discard);
  return td;
}

async function act(path, body) {
  try {
    const answer = await json(path, body);
    $('done').textContent = `${path.split('/').pop()}: ${JSON.stringify(answer)}`;
    sessionStorage.setItem('postfach-who', $('who').value.trim());
    $('parked').tBodies[0].replaceChildren();
    await refresh();
  } catch (err) {
    problem(err.message);
  }
}

/** The current view's data, then the alarms; one place records the outcome. */
async function refresh() {
  const current = view();
  $('overview').hidden = current !== 'overview';
  $('messages').hidden = current !== 'messages';
  if (current === 'overview' && !state.process) return;
  try {
    if (current === 'messages') {
      await renderParked();
    } else {
      await showDiagram();
      const stats = await json(`/processes/${encodeURIComponent(state.process)}/statistics?version=${state.version}`);
      renderTable(stats);
      renderOverlays(stats);
    }
    await renderAlarms();
    $('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = 'true';
    problem(null);
  } catch (err) {
    problem(err.message);
  }
}

function fillVersions(p) {
  const select = $('version');
  select.replaceChildren();
  for (const v of [...p.versions].reverse()) {
    const o = document.createElement('option');
    o.value = v.version;
    o.appendChild(text(`${v.version} (${v.deployed_at})`));
    select.appendChild(o);
  }
  state.version = p.latest_version;
  select.value = String(state.version);
}

async function start() {
  $('who').value = sessionStorage.getItem('postfach-who') || '';
  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('postfach-token', $('token').value.trim());
    $('token-form').hidden = true;
    start();
  });
  try {
    const { processes } = await json('/processes');
    if (processes.length === 0) {
      problem('nothing is deployed yet: postfach deploy FILE.bpmn');
      return;
    }
    const select = $('process');
    select.replaceChildren();
    for (const p of processes) {
      const o = document.createElement('option');
      o.value = p.process;
      o.appendChild(text(p.process));
      select.appendChild(o);
    }
    const wanted = new URLSearchParams(location.hash.slice(1)).get('process');
    const first = processes.find((p) => p.process === wanted) || processes[0];
    state.process = first.process;
    select.value = first.process;
    fillVersions(first);
    select.onchange = () => {
      const p = processes.find((x) => x.process === select.value);
      state.process = p.process;
      fillVersions(p);
      location.hash = `process=${encodeURIComponent(p.process)}`;
      refresh();
    };
    $('version').onchange = () => {
      state.version = Number($('version').value);
      refresh();
    };
    window.addEventListener('hashchange', refresh);
    await refresh();
    setInterval(refresh, REFRESH_MS);
  } catch (err) {
    problem(err.message);
  }
}

start();
