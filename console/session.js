// Who is at the screen: how this server wants to be called (no token, a
// pasted token, or a sign-in at its OpenID Connect issuer with the
// authorization code flow and PKCE), the token this tab holds, and what the
// token's roles grant — the views offer only those actions (the API decides
// all the same: an action it refuses is shown as refused). Tokens, and the
// code verifier and state of a sign-in under way, live in this tab's
// sessionStorage, never in a cookie.

const TOKEN = 'postfach-token';
const REFRESH = 'postfach-refresh';
const ID_TOKEN = 'postfach-id-token';
const PENDING = 'postfach-sign-in';

/** What `/console/session` answered: `auth` none | token | issuer. */
export const session = { auth: 'none', sign_in: null, caller: null, refused: null };

export function token() {
  return sessionStorage.getItem(TOKEN);
}

export function setToken(t) {
  sessionStorage.setItem(TOKEN, t);
}

/** Whether the actions that need permission `p` are offered. */
export function may(p) {
  if (session.auth === 'none') return true;
  return Boolean(session.caller && session.caller.may.includes(p));
}

/** The name the token gives its holder (then nobody types who they are). */
export function signedInAs() {
  return session.caller ? session.caller.name : null;
}

function b64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random() {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

function redirectUri() {
  return `${location.origin}/`;
}

/** Off to the issuer, with a fresh verifier whose challenge it keeps. */
export async function signIn() {
  const s = session.sign_in;
  const verifier = random();
  const state = random();
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, hash: location.hash }));
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: s.client_id,
    redirect_uri: redirectUri(),
    scope: 'openid',
    state,
    code_challenge: b64url(new Uint8Array(digest)),
    code_challenge_method: 'S256',
  });
  location.assign(`${s.authorization_endpoint}?${q}`);
}

async function tokenRequest(form) {
  const r = await fetch(session.sign_in.token_endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok || typeof body.access_token !== 'string') {
    throw new Error(`the issuer gave no token: ${body.error_description || body.error || `HTTP ${r.status}`}`);
  }
  sessionStorage.setItem(TOKEN, body.access_token);
  if (body.refresh_token) sessionStorage.setItem(REFRESH, body.refresh_token);
  if (body.id_token) sessionStorage.setItem(ID_TOKEN, body.id_token);
}

/** The issuer sent the browser back: trade its code for a token. */
async function finishSignIn(q) {
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || 'null');
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, '', `${location.pathname}${pending ? pending.hash : ''}`);
  if (q.has('error')) {
    throw new Error(`the issuer did not sign you in: ${q.get('error_description') || q.get('error')}`);
  }
  if (!pending || q.get('state') !== pending.state) {
    throw new Error('the sign-in came back with a state this tab did not send: sign in again');
  }
  await tokenRequest({
    grant_type: 'authorization_code',
    code: q.get('code'),
    redirect_uri: redirectUri(),
    client_id: session.sign_in.client_id,
    code_verifier: pending.verifier,
  });
}

/** A new access token for the refresh token, if the tab has one. */
export async function renew() {
  const refresh = sessionStorage.getItem(REFRESH);
  if (!refresh || !session.sign_in) return false;
  try {
    await tokenRequest({ grant_type: 'refresh_token', refresh_token: refresh, client_id: session.sign_in.client_id });
    return true;
  } catch {
    sessionStorage.removeItem(REFRESH);
    return false;
  }
}

/** Forget the tab's tokens, and end the session at the issuer when it can. */
export function signOut() {
  const idToken = sessionStorage.getItem(ID_TOKEN);
  for (const k of [TOKEN, REFRESH, ID_TOKEN]) sessionStorage.removeItem(k);
  const end = session.sign_in && session.sign_in.end_session_endpoint;
  if (!end) {
    location.reload();
    return;
  }
  const q = new URLSearchParams({ client_id: session.sign_in.client_id, post_logout_redirect_uri: redirectUri() });
  if (idToken) q.set('id_token_hint', idToken);
  location.assign(`${end}?${q}`);
}

async function read() {
  const headers = token() ? { Authorization: `Bearer ${token()}` } : {};
  const r = await fetch('/console/session', { headers });
  if (!r.ok) throw new Error(`/console/session: HTTP ${r.status}`);
  Object.assign(session, await r.json());
}

/** How to sign in and who this tab's token is; a sign-in under way finished. */
export async function loadSession() {
  await read();
  const q = new URLSearchParams(location.search);
  if (session.sign_in && (q.has('code') || q.has('error'))) {
    await finishSignIn(q);
    await read();
  }
  if (session.refused && await renew()) await read();
  return session;
}
