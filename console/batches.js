// Durable batches: each batch's operation, state and progress, newest first,
// as `postfach batches` prints them; a batch picked shows its refused items
// with their reasons (`postfach batch status ID`). Every value is rendered as
// text.

import { $, cell, h, json, route } from './lib.js';

function progress(b) {
  const items = Number(b.items) || 0;
  const reached = Number(b.reached) || 0;
  const bar = h('progress', { max: String(Math.max(items, 1)), value: String(items ? reached : 1) });
  return h('td', {}, bar, ` ${reached} of ${items}`);
}

export async function renderBatches() {
  const { batches } = await json('/batches');
  $('batch-list').tBodies[0].replaceChildren(...batches.map((b) => h('tr', { dataset: { batch: b.batch, state: b.state } },
    h('td', {}, h('a', { href: `#view=batches&batch=${encodeURIComponent(b.batch)}` }, String(b.batch))),
    cell(b.operation),
    cell(b.state, `state-${b.state}`),
    progress(b),
    cell(String(b.done)),
    cell(String(b.refused)),
    cell(b.by ?? ''),
    cell(b.created_at),
  )));
  $('no-batches').hidden = batches.length > 0;
  const picked = route().get('batch');
  $('batch-detail').hidden = !picked;
  if (!picked) return;
  const b = await json(`/batches/${encodeURIComponent(picked)}`);
  $('batch-title').textContent = `Batch ${b.batch}: ${b.operation}, ${b.state} — ${b.done} done, ${b.refused} refused of ${b.items}`;
  const refused = b.refused_items || [];
  $('batch-refused').tBodies[0].replaceChildren(...refused.map((r) => h('tr', {},
    cell(String(r.position)),
    cell(r.item),
    cell(r.reason),
  )));
  $('no-refused').hidden = refused.length > 0;
}
