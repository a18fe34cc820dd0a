// The cluster view, when the console is served by a gateway: every partition
// with whether it is up and ready, its version, and what it holds (waiting
// tokens and the oldest wait, buffered and parked messages, due jobs,
// incidents) — the same figures as `postfach cluster status`. A console served
// by one partition (whose /health/live names no gateway) shows no such view.

import { $, age, cell, h, json } from './lib.js';

/** Whether the console talks to a gateway (its /health/live says so). */
export async function isCluster() {
  try {
    return (await json('/health/live')).gateway === true;
  } catch {
    return false;
  }
}

function yesNo(v) {
  return h('td', { class: v ? 'ok' : 'down' }, v ? 'yes' : 'no');
}

export async function renderCluster() {
  const { partitions } = await json('/cluster/status');
  const rows = partitions.map((p) => h('tr', { 'data-partition': p.partition, class: p.ready ? '' : 'missing' },
    cell(p.partition),
    yesNo(p.up),
    yesNo(p.ready),
    cell(p.version),
    cell(p.tokens_waiting),
    cell(age(p.oldest_wait_ms)),
    cell(p.buffered),
    cell(p.parked),
    cell(p.jobs_due),
    cell(p.incidents),
    cell(p.error || p.not_ready || ''),
  ));
  $('partitions').querySelector('tbody').replaceChildren(...rows);
  const down = partitions.filter((p) => !p.ready).map((p) => p.partition);
  $('cluster-summary').textContent = down.length === 0
    ? `${partitions.length} partitions, all ready`
    : `${partitions.length} partitions; not ready: ${down.join(', ')}`;
}
