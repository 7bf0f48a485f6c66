// What the page is looking at, shared by the panels, and a few events between them.

export const app = {
  /** The assistant picked: its JSON from /assistants, with `kind` ("agent" or "graph"). */
  assistant: null,
  /** Its input/output/state JSON Schemas (GET /assistants/{id}/schemas). */
  schemas: null,
  /** The thread shown, or null: the next run then starts a new one. */
  threadId: null,
  /** The thread's newest state (GET /threads/{id}/state), once loaded. */
  state: null,
  /** A checkpoint the next run starts from (time travel): {id, step}, or null. */
  forkFrom: null,
  /** The run streaming now: {runId, threadId, abort}, or null. */
  run: null,
};

const handlers = new Map();

export function on(name, handler) {
  if (!handlers.has(name)) handlers.set(name, []);
  handlers.get(name).push(handler);
}

export async function emit(name, ...args) {
  for (const handler of handlers.get(name) ?? []) await handler(...args);
}

let noticeTimer = null;
let noticeKey = null;

/** A short message at the top of the page: a hint fades; a failure stays until closed, or,
 * given a `key`, until dismiss(key) says its problem is gone. */
export function notify(text, kind = "error", key = null) {
  const notice = document.getElementById("notice");
  document.getElementById("notice-text").textContent = text;
  notice.className = `notice ${kind}`;
  notice.hidden = false;
  noticeKey = key;
  clearTimeout(noticeTimer);
  if (kind !== "error") noticeTimer = setTimeout(closeNotice, 6000);
}

/** Whether the notice shown is the one of the problem `key` names. */
export function showing(key) {
  return noticeKey === key && !document.getElementById("notice").hidden;
}

/** The problem `key` named is gone: its notice goes too (another one stays); true when it
 * was shown. */
export function dismiss(key) {
  if (!showing(key)) return false;
  closeNotice();
  return true;
}

export function closeNotice() {
  clearTimeout(noticeTimer);
  noticeKey = null;
  document.getElementById("notice").hidden = true;
}

/** Run `action`, showing its failure as a notice instead of losing it. A server that does not
 * answer has its own notice already (see connection.js), which goes once it answers. */
export async function guarded(action) {
  try {
    return await action();
  } catch (error) {
    if (error?.name !== "Unreachable") notify(error?.message ?? String(error));
    return undefined;
  }
}
