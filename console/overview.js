// The overview of a process version: its diagram with, on each element, what
// waits there and since when, ready jobs and incidents, and at message catch
// points the buffered and parked messages of that name. The figures come from
// GET /processes/{id}/statistics, which reads gauges, not records, so polling
// it costs the same with ten or a million waiting orders. Badges are placed
// beside their element where they cover no shape, no label and no other badge.

import { $, age, cell, h, json } from './lib.js';
import { draw, drawn, obstacles, place } from './diagram.js';

function parkedText(parked) {
  return Object.entries(parked || {}).map(([reason, n]) => `${n} ${reason}`).join(', ');
}

/** Open the instance list filtered to an element. */
function waitingLink(e) {
  return h('a', { href: `#view=instances&waiting_at=${encodeURIComponent(e.element)}` }, String(e.waiting));
}

function renderTable(stats) {
  const body = $('elements').tBodies[0];
  body.replaceChildren();
  for (const e of stats.elements) {
    body.appendChild(h('tr', { dataset: { element: e.element, waiting: e.waiting, incidents: e.incidents } },
      cell(e.name ? `${e.name} (${e.element})` : e.element),
      cell(e.kind),
      h('td', { class: 'num' }, e.waiting > 0 ? waitingLink(e) : '0'),
      cell(age(e.oldest_wait_ms)),
      cell(e.jobs_ready, 'num'),
      cell(e.incidents, 'num'),
      cell(e.message || ''),
      cell(e.message ? e.buffered : '', 'num'),
      cell(parkedText(e.parked)),
    ));
  }
}

function badge(kind, label, title) {
  return h('div', { class: `pf-badge pf-${kind}`, title }, label);
}

function renderOverlays(viewer, stats) {
  if (!viewer) return;
  const overlays = viewer.get('overlays');
  const registry = viewer.get('elementRegistry');
  overlays.remove({ type: 'postfach' });
  const taken = obstacles(viewer);
  for (const e of stats.elements) {
    if (!drawn(viewer, e.element)) continue;
    const shape = registry.get(e.element);
    const add = (html) => overlays.add(e.element, 'postfach', { position: place(shape, html, taken), html });
    if (e.waiting > 0) {
      const b = badge('waiting', `${e.waiting} · ${age(e.oldest_wait_ms)}`,
        `${e.waiting} waiting here, the oldest since ${e.oldest_wait_since}`);
      b.dataset.element = e.element;
      b.dataset.waiting = e.waiting;
      b.addEventListener('click', () => { location.hash = `view=instances&waiting_at=${encodeURIComponent(e.element)}`; });
      add(b);
    }
    if (e.incidents > 0) {
      add(badge('incidents', `${e.incidents} ⚠`, `${e.incidents} incident(s)`));
    }
    if (e.jobs_ready > 0) {
      add(badge('jobs', `${e.jobs_ready} ready`, `${e.jobs_ready} job(s) waiting to run`));
    }
    const parked = Object.values(e.parked || {}).reduce((a, b) => a + b, 0);
    if (e.message && (e.buffered > 0 || parked > 0)) {
      const b = badge('messages', `✉ ${e.buffered} buffered · ${parked} parked`,
        `${e.message}: ${e.buffered} buffered; parked: ${parkedText(e.parked) || 'none'}`);
      b.addEventListener('click', () => { location.hash = 'view=messages'; });
      add(b);
    }
  }
}

/** Draws the diagram (once per version) and puts the current figures on it. */
export async function renderOverview(process, version) {
  const viewer = await draw($('diagram'), process, version);
  $('no-diagram').hidden = Boolean(viewer);
  $('diagram').hidden = !viewer;
  const stats = await json(`/processes/${encodeURIComponent(process)}/statistics?version=${version}`);
  renderTable(stats);
  renderOverlays(viewer, stats);
}
