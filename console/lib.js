// Shared helpers of the console pages: the API client (the bearer token from
// this tab's sessionStorage, in a header — never a cookie), safe element
// building (every value becomes a text node, never HTML), and formatting.

import { renew, session, token } from './session.js';

export const $ = (id) => document.getElementById(id);

/** Shows how to get a token: the issuer's sign-in, or the field to paste one. */
export function askForToken() {
  $('sign-in').hidden = session.auth !== 'issuer';
  $('token-form').hidden = session.auth !== 'token';
}

function send(path, body) {
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const init = { headers };
  if (body !== undefined) {
    init.method = 'POST';
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  return fetch(path, init);
}

/** A request to the API of this server; a POST when `body` is given. An
 * expired sign-in is renewed once with its refresh token. */
export async function api(path, body) {
  let r = await send(path, body);
  if (r.status === 401 && await renew()) r = await send(path, body);
  if (r.status === 401) {
    askForToken();
    throw new Error(session.auth === 'issuer'
      ? 'sign in to see this server (the button above)'
      : 'this server wants a bearer token: enter it above');
  }
  return r;
}

/** An API error, with the JSON body the server sent (a 409 names its conflict). */
export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export async function json(path, payload) {
  const r = await api(path, payload);
  const body = await r.json().catch(() => ({}));
  if (Array.isArray(body.missing)) for (const m of body.missing) missing.add(m.partition);
  if (!r.ok) throw new ApiError(body.error || `${path}: HTTP ${r.status}`, r.status, body);
  return body;
}

/**
 * The partitions a gateway could not reach for the answers read since the
 * last `missing.clear()`: a view that lacks them says so, rather than looking
 * complete.
 */
export const missing = new Set();

/** A duration in milliseconds, the way an operator reads it: 3d 4h, 12m, 40s. */
export function age(ms) {
  if (ms == null) return '';
  const s = Math.floor(ms / 1000);
  const parts = [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']];
  const out = [];
  let rest = s;
  for (const [n, unit] of parts) {
    if (rest >= n || (unit === 's' && out.length === 0)) {
      out.push(`${Math.floor(rest / n)}${unit}`);
      rest %= n;
    }
    if (out.length === 2) break;
  }
  return out.join(' ');
}

export function text(value) {
  return document.createTextNode(value == null ? '' : String(value));
}

/**
 * An element with attributes and children; strings become text nodes, so
 * nothing from the database is ever parsed as HTML.
 */
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    e.appendChild(c instanceof Node ? c : text(c));
  }
  return e;
}

export function cell(value, cls) {
  return h('td', { class: cls }, value);
}

/** A link to an instance's detail. */
export function instanceLink(id) {
  return h('a', { href: `#view=instance&id=${encodeURIComponent(id)}`, class: 'instance-link', dataset: { instance: id } }, `instance ${id}`);
}

/** The hash parameters of the current view. */
export function route() {
  return new URLSearchParams(location.hash.slice(1));
}

/** Who said the problem on show: an action ('action', a refused click or
 * form) or the refresh ('refresh', a failed read, partitions missing). */
const said = { by: null };

function show(message, by) {
  const p = $('problem');
  p.textContent = message || '';
  p.hidden = !message;
  said.by = message ? by : null;
}

/** What went wrong with what the person at the screen did; it stays until
 * their next action succeeds or they open another view, through refreshes
 * that find nothing wrong (a failed one shows its own problem instead).
 * `null` clears whatever is shown. */
export function problem(message) {
  show(message, 'action');
}

/** What the last refresh found wrong; a refresh that finds nothing wrong
 * clears only what a refresh said, never an action's problem. */
export function refreshProblem(message) {
  if (!message && said.by === 'action') return;
  show(message, 'refresh');
}

/** Bytes as hex, 16 to a line, for a payload that is not text. */
export function hexLines(hex) {
  const out = [];
  for (let i = 0; i < hex.length; i += 32) {
    out.push(hex.slice(i, i + 32).replace(/(..)/g, '$1 ').trim());
  }
  return out.join('\n');
}
