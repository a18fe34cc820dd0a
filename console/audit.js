// The audit trail: who deployed, repaired, requeued, discarded, retried,
// cleaned up or acted on a user task, when, and on what — newest first, as
// `postfach audit` prints it. Every value is rendered as text.

import { $, cell, h, json } from './lib.js';

export async function renderAudit() {
  const who = $('audit-who').value.trim();
  const query = who ? `?who=${encodeURIComponent(who)}&limit=200` : '?limit=200';
  const { audit } = await json(`/audit${query}`);
  $('audit-list').tBodies[0].replaceChildren(...audit.map((e) => h('tr', { dataset: { seq: e.seq } },
    cell(e.at),
    cell(e.who),
    cell(e.operation),
    cell(e.target),
  )));
  $('no-audit').hidden = audit.length > 0;
}
