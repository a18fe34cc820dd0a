// The task list: open user tasks with who holds them, who may claim them, due
// date and age, linked to their instances — and the actions of the person at
// the screen: claim, unclaim, and complete with the variables a form would
// send (a JSON object). The API decides; a refusal (someone else holds the
// task, 409) is shown as it answered. While a person types, the rows stay.

import { $, age, cell, h, instanceLink, json, problem } from './lib.js';
import { may, signedInAs } from './session.js';

const editing = { dirty: false };

/** Who acts: the name the token gives, else the one typed (no identity). */
function who() {
  return signedInAs() || $('task-who').value.trim();
}

async function act(task, action, body, after) {
  try {
    const answer = await json(`/tasks/${encodeURIComponent(task)}/${action}`, body);
    sessionStorage.setItem('postfach-who', who());
    $('tasks-done').textContent = `task ${answer.task} ${answer.done}`;
    editing.dirty = false;
    problem(null);
  } catch (err) {
    problem(err.message);
  }
  await after(true);
}

/** The variables typed for a completion: a JSON object, or a problem said. */
function variables(text) {
  if (!text.trim()) return {};
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new Error(`the variables are not JSON: ${err.message}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new Error('the variables must be a JSON object, like {"freigegeben": true}');
  }
  return v;
}

function actions(t, after) {
  if (!may('work')) return cell('');
  const vars = h('textarea', {
    class: 'variables',
    rows: 2,
    cols: 28,
    placeholder: '{"freigegeben": true}',
    oninput: () => { editing.dirty = true; },
  });
  const needWho = (then) => () => {
    if (!who()) {
      problem('say who you are first (the field "You" above): the task records who acted');
      return;
    }
    then();
  };
  return h('td', { class: 'task-actions' },
    t.assignee
      ? h('button', { class: 'unclaim', onclick: needWho(() => act(t.task, 'unclaim', { user: who() }, after)) }, 'Unclaim')
      : h('button', { class: 'claim', onclick: needWho(() => act(t.task, 'claim', { user: who() }, after)) }, 'Claim'),
    ' ', vars, ' ',
    h('button', {
      class: 'complete',
      onclick: needWho(() => {
        let v;
        try {
          v = variables(vars.value);
        } catch (err) {
          problem(err.message);
          return;
        }
        act(t.task, 'complete', { user: who(), variables: v }, after);
      }),
    }, 'Complete'),
    t.form_key ? h('div', { class: 'muted' }, `form ${t.form_key}`) : null);
}

/** The open tasks; `force` redraws even while a person is typing. */
export async function renderTasks(force) {
  $('task-who').parentNode.hidden = Boolean(signedInAs()) || !may('work');
  if (!$('task-who').value) $('task-who').value = sessionStorage.getItem('postfach-who') || '';
  const busy = () => !force && (editing.dirty || $('task-list').contains(document.activeElement));
  if (busy()) return;
  const { tasks } = await json('/tasks');
  if (busy()) return; // they began typing while the answer was on its way
  $('task-list').tBodies[0].replaceChildren(...tasks.map((t) => h('tr', { dataset: { task: t.task, assignee: t.assignee || '' } },
    cell(t.task),
    cell(t.name ? `${t.name} (${t.element})` : t.element),
    h('td', {}, instanceLink(t.instance)),
    cell(t.assignee || ''),
    cell([...t.candidate_users, ...t.candidate_groups.map((g) => `group ${g}`)].join(', ')),
    cell(t.due || ''),
    cell(t.priority || ''),
    cell(age(t.age_ms)),
    actions(t, renderTasks),
  )));
  $('no-tasks').hidden = tasks.length > 0;
}
