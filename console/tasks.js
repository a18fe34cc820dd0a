// The task list: open user tasks with who holds them, who may claim them, due
// date and age, linked to their instances.

import { $, age, cell, h, instanceLink, json } from './lib.js';

export async function renderTasks() {
  const { tasks } = await json('/tasks');
  $('task-list').tBodies[0].replaceChildren(...tasks.map((t) => h('tr', { dataset: { task: t.task } },
    cell(t.task),
    cell(t.name ? `${t.name} (${t.element})` : t.element),
    h('td', {}, instanceLink(t.instance)),
    cell(t.assignee || ''),
    cell([...t.candidate_users, ...t.candidate_groups.map((g) => `group ${g}`)].join(', ')),
    cell(t.due || ''),
    cell(t.priority || ''),
    cell(age(t.age_ms)),
  )));
  $('no-tasks').hidden = tasks.length > 0;
}
