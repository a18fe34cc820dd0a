// Messages that did not reach an instance: parked ones with their reason and
// why (candidates of an ambiguous one as links, the raw bytes of a malformed
// one as text and hex, attributes with Pub/Sub's publish time and delivery
// attempt), to requeue or discard; and buffered ones with their expiry, page
// by page from the API's cursor.

import { $, cell, h, hexLines, instanceLink, json, problem } from './lib.js';
import { may, signedInAs } from './session.js';

const buffered = { cursor: null, next: null };
const parkedPage = { cursor: null, next: null };

function attributes(m) {
  return Object.entries(m.attributes || {}).map(([k, v]) => `${k}=${v}`).join('\n');
}

/** The payload of a malformed message: its text, and its bytes in hex on
 * demand (`open` when the operator had opened them before a redraw). */
function payload(m, open) {
  const td = h('td', { class: 'raw' });
  if (m.raw != null) {
    td.append(h('pre', { class: 'raw-text' }, m.raw));
    if (m.raw_hex) {
      td.append(h('details', { open }, h('summary', {}, 'hex'), h('pre', { class: 'raw-hex' }, hexLines(m.raw_hex))));
    }
  }
  return td;
}

function candidates(m) {
  const td = h('td', {});
  const places = m.candidate_elements || [];
  if (places.length) {
    // an ambiguous message: every place that waited for it, two of one instance too
    places.forEach((c, i) => {
      if (i > 0) td.append(', ');
      td.append(instanceLink(c.instance), ` at ${c.element}`);
    });
    return td;
  }
  (m.candidates || []).forEach((c, i) => {
    if (i > 0) td.append(', ');
    td.append(instanceLink(c));
  });
  return td;
}

async function act(path, body, after) {
  try {
    const answer = await json(path, body);
    $('done').textContent = `${path.split('/').pop()}: ${JSON.stringify(answer)}`;
    problem(null);
    sessionStorage.setItem('postfach-who', $('who').value.trim());
    $('parked').tBodies[0].replaceChildren();
    await after();
  } catch (err) {
    problem(err.message);
  }
}

/** Requeue, or discard with a reason and who: the API records both. */
function actions(m, after) {
  if (!may('operate')) return cell('');
  const id = encodeURIComponent(`${m.name}/${m.message_id}`);
  const why = h('input', { class: 'why', placeholder: 'why discard?' });
  return h('td', {},
    h('button', { class: 'requeue', onclick: () => act(`/messages/${id}/requeue`, {}, after) }, 'Requeue'),
    ' ', why, ' ',
    h('button', {
      class: 'discard',
      onclick: () => {
        const by = signedInAs() || $('who').value.trim();
        if (!why.value.trim() || !by) {
          problem('a discard needs a reason and who you are (the field "You" above)');
          return;
        }
        act(`/messages/${id}/discard`, { why: why.value.trim(), by }, after);
      },
    }, 'Discard'));
}

/** An operator typing a reason keeps the rows until the action is done. */
function typing(body) {
  return [...body.querySelectorAll('input.why')].some((i) => i.value || i === document.activeElement);
}

async function renderParked(after) {
  const body = $('parked').tBodies[0];
  if (typing(body)) return;
  const q = parkedPage.cursor ? `&after=${encodeURIComponent(parkedPage.cursor)}` : '';
  const { messages, next } = await json(`/messages?parked=true&limit=100${q}`);
  if (typing(body)) return; // they began while the answer was on its way
  // the hex an operator opened stays open through the redraw
  const opened = new Set([...body.querySelectorAll('details[open]')].map((d) => d.closest('tr').dataset.message));
  body.replaceChildren();
  for (const m of messages) {
    body.appendChild(h('tr', { dataset: { message: m.message_id, reason: m.reason || '' } },
      cell(m.message_id),
      cell(m.name),
      cell(m.key),
      cell(m.reason || ''),
      cell(m.note || ''),
      candidates(m),
      cell(m.accepted_at),
      cell(m.requeues, 'num'),
      cell(attributes(m), 'attrs'),
      payload(m, opened.has(m.message_id)),
      actions(m, after),
    ));
  }
  parkedPage.next = next;
  $('no-parked').hidden = messages.length > 0;
  $('parked-next').hidden = !next;
  $('parked-first').hidden = !parkedPage.cursor;
}

async function renderBuffered() {
  const q = buffered.cursor ? `&after=${encodeURIComponent(buffered.cursor)}` : '';
  const { messages, next } = await json(`/messages?buffered=true&limit=100${q}`);
  const body = $('buffered').tBodies[0];
  body.replaceChildren();
  for (const m of messages) {
    body.appendChild(h('tr', { dataset: { message: m.message_id } },
      cell(m.message_id),
      cell(m.name),
      cell(m.key),
      cell(m.accepted_at),
      cell(m.expires_at || ''),
      cell(attributes(m), 'attrs'),
    ));
  }
  buffered.next = next;
  $('no-buffered').hidden = messages.length > 0;
  $('buffered-next').hidden = !next;
  $('buffered-first').hidden = !buffered.cursor;
}

/** Both lists; `after` re-renders the page once an action is done. */
export async function renderMessages(after) {
  $('who').parentNode.hidden = Boolean(signedInAs()) || !may('operate');
  $('parked-next').onclick = () => { parkedPage.cursor = parkedPage.next; renderParked(after).catch((e) => problem(e.message)); };
  $('parked-first').onclick = () => { parkedPage.cursor = null; renderParked(after).catch((e) => problem(e.message)); };
  $('buffered-next').onclick = () => { buffered.cursor = buffered.next; renderBuffered().catch((e) => problem(e.message)); };
  $('buffered-first').onclick = () => { buffered.cursor = null; renderBuffered().catch((e) => problem(e.message)); };
  await renderParked(after);
  await renderBuffered();
}
