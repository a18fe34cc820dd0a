// The overview of a process version: its diagram with, on each element, what
// waits there and since when, ready jobs and incidents, and at message catch
// points the buffered and parked messages of that name. The figures come from
// GET /processes/{id}/statistics, which reads gauges, not records, so polling
// it costs the same with ten or a million waiting orders. Badges are placed
// beside their element where they cover no shape, no label and no other badge.

import { $, age, cell, h, json } from './lib.js';
import { draw, drawn } from './diagram.js';

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

/** A badge's size in diagram units (overlays scale with the canvas, so CSS
 * pixels at zoom 1), measured off-screen. */
function measure(el) {
  el.style.visibility = 'hidden';
  el.style.position = 'absolute';
  document.body.appendChild(el);
  const size = { w: el.offsetWidth, h: el.offsetHeight };
  el.remove();
  el.style.visibility = '';
  el.style.position = '';
  return size;
}

const GAP = 3;

function overlaps(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

/** What a badge must not cover: every flow node's shape, every label and
 * every line of a flow, not the pools, lanes and expanded subprocesses that
 * hold them. */
function obstacles(viewer) {
  const out = [];
  for (const e of viewer.get('elementRegistry').getAll()) {
    if (e.waypoints) {
      for (let i = 1; i < e.waypoints.length; i += 1) {
        const [a, b] = [e.waypoints[i - 1], e.waypoints[i]];
        const x = Math.min(a.x, b.x) - 2;
        const y = Math.min(a.y, b.y) - 2;
        out.push({ x, y, w: Math.abs(a.x - b.x) + 4, h: Math.abs(a.y - b.y) + 4 });
      }
      continue;
    }
    if (e.width == null || !e.parent) continue;
    const holds = (e.children || []).some((c) => c.type !== 'label' && !c.waypoints);
    if (holds) continue;
    out.push({ x: e.x, y: e.y, w: e.width, h: e.height });
  }
  return out;
}

/** Where beside `shape` a badge of `size` covers nothing in `taken`: above,
 * right, left, then further out; the first free place wins. Returns the
 * overlay position relative to the shape. */
function place(shape, size, taken) {
  const { width: w, height: h } = shape;
  const candidates = [
    [0, -size.h - GAP],
    [w - size.w, -size.h - GAP],
    [w + GAP, 0],
    [w + GAP, h - size.h],
    [-size.w - GAP, 0],
    [-size.w - GAP, h - size.h],
    [0, -2 * (size.h + GAP)],
    [w + GAP, -size.h - GAP],
    [-size.w - GAP, -size.h - GAP],
  ];
  for (const [dx, dy] of candidates) {
    const r = { x: shape.x + dx, y: shape.y + dy, w: size.w, h: size.h };
    if (!taken.some((t) => overlaps(r, t))) {
      taken.push({ x: r.x - GAP, y: r.y - GAP, w: r.w + 2 * GAP, h: r.h + 2 * GAP });
      return { left: dx, top: dy };
    }
  }
  // crowded all round: above, over whatever is there
  taken.push({ x: shape.x, y: shape.y - size.h - GAP, w: size.w, h: size.h });
  return { left: 0, top: -size.h - GAP };
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
    const add = (html) => overlays.add(e.element, 'postfach', { position: place(shape, measure(html), taken), html });
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
