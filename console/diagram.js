// A process version's diagram, drawn with the vendored bpmn-js viewer (its
// bpmn.io watermark stays visible, as its licence asks). One viewer per
// container; it is drawn again only when the version changes. Badges go
// beside their element where they cover no shape, label, flow or badge.

import { api } from './lib.js';

const shown = new Map(); // container id -> { key, viewer: a promise of the viewer or null }

/**
 * Draws `process` version `version` into `container`, unless already there.
 * Resolves to the viewer, or null when the version has no diagram (no BPMN
 * DI, or deployed before postfach kept its source). A second call while the
 * first still draws waits for the same viewer; it never answers "no diagram"
 * for one on its way.
 */
export function draw(container, process, version) {
  const key = `${process}@${version}`;
  const had = shown.get(container.id);
  if (had && had.key === key) return had.viewer;
  if (had) had.viewer.then((v) => v && v.destroy(), () => {});
  container.replaceChildren();
  const viewer = load(container, process, version);
  shown.set(container.id, { key, viewer });
  // a read that failed (not "no diagram") is tried again by the next refresh
  viewer.catch(() => {
    if (shown.get(container.id)?.viewer === viewer) shown.delete(container.id);
  });
  return viewer;
}

async function load(container, process, version) {
  const r = await api(`/processes/${encodeURIComponent(process)}/xml?version=${version}`);
  if (r.status === 404) return null;
  if (!r.ok) throw new Error(`the diagram of ${process} v${version}: HTTP ${r.status}`);
  const viewer = new window.BpmnJS({ container });
  try {
    await viewer.importXML(await r.text());
    viewer.get('canvas').zoom('fit-viewport');
  } catch (err) {
    viewer.destroy();
    return null;
  }
  return viewer;
}

/** Whether `viewer` drew an element with this id (models may leave shapes out). */
export function drawn(viewer, id) {
  return Boolean(viewer && viewer.get('elementRegistry').get(id));
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
 * every line of a flow; of the pools, lanes and expanded subprocesses that
 * hold them only the strip where their name is drawn. */
export function obstacles(viewer) {
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
    if (holds) {
      // a container is no obstacle, the name drawn inside it is: the left
      // strip of a pool or lane, the top strip of a subprocess
      const side = e.type === 'bpmn:Participant' || e.type === 'bpmn:Lane';
      out.push(side ? { x: e.x, y: e.y, w: 30, h: e.height } : { x: e.x, y: e.y, w: e.width, h: 24 });
      continue;
    }
    out.push({ x: e.x, y: e.y, w: e.width, h: e.height });
  }
  return out;
}

/** Where beside `shape` the badge `el` covers nothing in `taken` (see
 * [`obstacles`]): above, right, left, then further out; the first free place
 * wins and is taken. Returns the overlay position relative to the shape. */
export function place(shape, el, taken) {
  const size = measure(el);
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

