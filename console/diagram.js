// A process version's diagram, drawn with the vendored bpmn-js viewer (its
// bpmn.io watermark stays visible, as its licence asks). One viewer per
// container; it is drawn again only when the version changes.

import { api } from './lib.js';

const shown = new Map(); // container id -> { key, viewer }

/**
 * Draws `process` version `version` into `container`, unless already there.
 * Returns the viewer, or null when the version has no diagram (no BPMN DI, or
 * deployed before postfach kept its source).
 */
export async function draw(container, process, version) {
  const key = `${process}@${version}`;
  const had = shown.get(container.id);
  if (had && had.key === key) return had.viewer;
  if (had && had.viewer) had.viewer.destroy();
  container.replaceChildren();
  shown.set(container.id, { key, viewer: null });
  const r = await api(`/processes/${encodeURIComponent(process)}/xml?version=${version}`);
  if (!r.ok) return null;
  const viewer = new window.BpmnJS({ container });
  try {
    await viewer.importXML(await r.text());
    viewer.get('canvas').zoom('fit-viewport');
  } catch (err) {
    viewer.destroy();
    return null;
  }
  shown.set(container.id, { key, viewer });
  return viewer;
}

/** Whether `viewer` drew an element with this id (models may leave shapes out). */
export function drawn(viewer, id) {
  return Boolean(viewer && viewer.get('elementRegistry').get(id));
}
