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

/** A short message at the top of the page: a hint fades, an action that failed stays until
 * clicked away. */
export function notify(text, kind = "error") {
  const notice = document.getElementById("notice");
  notice.textContent = text;
  notice.className = `notice ${kind}`;
  notice.title = kind === "error" ? "click to close" : "";
  notice.hidden = false;
  clearTimeout(noticeTimer);
  if (kind !== "error") {
    noticeTimer = setTimeout(() => {
      notice.hidden = true;
    }, 6000);
  }
}

/** Run `action`, showing its failure as a notice instead of losing it. */
export async function guarded(action) {
  try {
    return await action();
  } catch (error) {
    notify(error?.message ?? String(error));
    return undefined;
  }
}
