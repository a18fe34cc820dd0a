// Incidents: jobs out of attempts, each with its attempts and their errors,
// to retry once the cause is repaired. Read from the incident index, so the
// list costs the same however many jobs are waiting to run.

import { $, cell, h, instanceLink, json, problem } from './lib.js';
import { may } from './session.js';

async function retry(job, after) {
  try {
    const r = await json(`/jobs/${encodeURIComponent(job)}/retry`, {});
    $('jobs-done').textContent = `job ${job} retried: ${r.next}`;
    problem(null);
    await after();
  } catch (err) {
    problem(err.message);
  }
}

export async function renderJobs(after) {
  const { jobs } = await json('/jobs?incidents=true');
  $('incident-jobs').tBodies[0].replaceChildren(...jobs.map((j) => h('tr', { dataset: { job: j.job, state: j.state } },
    cell(j.job),
    h('td', {}, j.instance ? instanceLink(j.instance) : '—'),
    cell(j.element),
    cell(j.kind + (j.topic ? ` (${j.topic})` : '')),
    cell(j.attempts, 'num'),
    cell(j.history.map((a) => `${a.at}: ${a.error}`).join('\n'), 'attempts'),
    h('td', {}, may('operate') ? h('button', { class: 'retry', onclick: () => retry(j.job, after) }, 'Retry') : ''),
  )));
  $('no-incidents').hidden = jobs.length > 0;
}
