// The postfach console: which view the hash names (overview, instances, one
// instance, messages, incidents, tasks, batches, audit), the process and version picked, and
// one refresh path that renders the current view every few seconds and
// records its outcome. Polling, not server-sent events: every view reads a
// snapshot in one request, so a page left open costs one small request per
// view every five seconds and needs no connection held open through proxies.

import { $, askForToken, h, json, missing, problem, refreshProblem, route } from './lib.js';
import { loadSession, may, session, setToken, signIn, signOut } from './session.js';
import { isCluster, renderCluster } from './cluster.js';
import { renderOverview } from './overview.js';
import { renderMessages } from './messages.js';
import { renderInstance, renderInstances } from './instances.js';
import { renderJobs } from './jobs.js';
import { renderTasks } from './tasks.js';
import { renderAudit } from './audit.js';
import { renderBatches } from './batches.js';

const REFRESH_MS = 5000;
const VIEWS = ['overview', 'instances', 'instance', 'messages', 'jobs', 'tasks', 'batches', 'audit', 'cluster'];
const state = { process: null, version: null, view: null };

function view() {
  const v = route().get('view');
  return VIEWS.includes(v) ? v : 'overview';
}

/** One refresh at a time: asked for while one runs, it runs once more after
 * it, so two never interleave their redraws of the same rows. */
const refreshing = { now: null, again: false };

function refresh() {
  if (refreshing.now) {
    refreshing.again = true;
    return refreshing.now;
  }
  refreshing.now = (async () => {
    do {
      refreshing.again = false;
      await refreshOnce();
    } while (refreshing.again);
    refreshing.now = null;
  })();
  return refreshing.now;
}

/** The current view's data, then the alarms; one place records the outcome. */
async function refreshOnce() {
  const current = view();
  for (const v of VIEWS) $(v).hidden = v !== current;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('current', a.dataset.view === current);
  $('pick').hidden = current !== 'overview';
  if (current === 'overview' && !state.process) return;
  if (current !== state.view) {
    state.view = current;
    problem(null); // what went wrong in another view is not this one's
  }
  missing.clear();
  try {
    switch (current) {
      case 'overview': await renderOverview(state.process, state.version); break;
      case 'instances': await renderInstances(); break;
      case 'instance': await renderInstance(false); break;
      case 'messages': await renderMessages(refresh); break;
      case 'jobs': await renderJobs(refresh); break;
      case 'tasks': await renderTasks(); break;
      case 'batches': await renderBatches(); break;
      case 'audit': await renderAudit(); break;
      case 'cluster': await renderCluster(); break;
    }
    await renderAlarms();
    $('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = 'true';
    document.body.dataset.view = current;
    refreshProblem(missing.size === 0 ? null
      : `partitions not reached: ${[...missing].sort((a, b) => a - b).join(', ')} — what they hold is not shown`);
  } catch (err) {
    refreshProblem(err.message);
  }
}

async function renderAlarms() {
  const { alarms } = await json('/alarms');
  $('alarms').replaceChildren(...alarms.filter((a) => a.active).map((a) => h('span', { class: 'alarm' }, `alarm ${a.name}`)));
}

function fillVersions(p) {
  const select = $('version');
  select.replaceChildren(...[...p.versions].reverse().map((v) => h('option', { value: v.version }, `${v.version} (${v.deployed_at})`)));
  state.version = p.latest_version;
  select.value = String(state.version);
}

/** Who the tab's token is, beside the way out; or the way in. */
function showSession() {
  const c = session.caller;
  $('signed-in').hidden = !c;
  if (c) {
    const roles = c.roles.length ? c.roles.join(', ') : 'no role';
    $('who-am-i').textContent = `${c.name} (${roles})`;
    $('who-am-i').dataset.may = c.may.join(' ');
  }
  if (!c && session.auth !== 'none') {
    askForToken();
    problem(session.auth === 'issuer'
      ? 'sign in to see this server (the button above)'
      : 'this server wants a bearer token: enter it above');
  }
  if (session.refused) problem(`the token was not accepted: ${session.refused}`);
}

async function start() {
  $('who').value = sessionStorage.getItem('postfach-who') || '';
  $('token-form').onsubmit = (ev) => {
    ev.preventDefault();
    setToken($('token').value.trim());
    $('token-form').hidden = true;
    start();
  };
  $('sign-in').onclick = () => signIn().catch((err) => problem(err.message));
  $('sign-out').onclick = () => signOut();
  try {
    await loadSession();
    showSession();
    if (!session.caller && session.auth !== 'none') return;
    if (!may('read')) {
      problem(`signed in as ${session.caller.name}: these roles grant no view of this server (reader, operator or admin do)`);
      return;
    }
    $('cluster-link').hidden = !(await isCluster());
    const { processes } = await json('/processes');
    if (processes.length === 0) {
      problem('nothing is deployed yet: postfach deploy FILE.bpmn');
      return;
    }
    const select = $('process');
    select.replaceChildren(...processes.map((p) => h('option', { value: p.process }, p.process)));
    const wanted = route().get('process');
    const first = processes.find((p) => p.process === wanted) || processes[0];
    state.process = first.process;
    select.value = first.process;
    fillVersions(first);
    select.onchange = () => {
      const p = processes.find((x) => x.process === select.value);
      state.process = p.process;
      fillVersions(p);
      location.hash = `process=${encodeURIComponent(p.process)}`;
    };
    $('version').onchange = () => {
      state.version = Number($('version').value);
      refresh();
    };
    window.onhashchange = refresh;
    $('audit-who').onchange = () => refresh();
    await refresh();
    if (!state.timer) state.timer = setInterval(refresh, REFRESH_MS);
  } catch (err) {
    problem(err.message);
  }
}

start();
