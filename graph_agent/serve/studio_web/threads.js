// Threads: the list of an assistant's threads with their status (read again while one is
// busy, so a run started anywhere is seen live), and showing one: its state, pending
// interrupts, last error and checkpoints (timeline.js).

import { call, p } from "./api.js";
import { clear, h, shortId, time } from "./dom.js";
import { clearRun, forkFrom, showError, showInterrupts, showValues } from "./run.js";
import { app, guarded } from "./state.js";
import { clearTimeline, loadTimeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
const BUSY_POLL_MS = 2000;

let busyPoll = null; // while a listed thread is busy: the timer that reads the list again

// ---------------------------------------------------------------- the thread list

/** The assistant's threads, newest first. */
export async function refreshThreads() {
  if (!app.assistant) return;
  const threads = await call("POST", "/threads/search", { metadata: { graph_id: app.assistant.assistant_id }, limit: 100 });
  threads.sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
  const list = $("threads");
  clear(list, threads.map((thread) => h("li", {},
    h("button", {
      type: "button",
      class: `thread${thread.thread_id === app.threadId ? " selected" : ""}`,
      dataset: { threadId: thread.thread_id, status: thread.status },
      onclick: () => guarded(() => selectThread(thread.thread_id)),
    },
    h("span", { class: "thread-id", title: thread.thread_id }, shortId(thread.thread_id)),
    h("span", { class: `chip status-${thread.status}` }, thread.status),
    h("span", { class: "muted small" }, time(thread.updated_at))))));
  if (!threads.length) list.append(h("li", { class: "muted small empty" }, "No threads yet: start a run."));
  pollWhileBusy(threads);
}

/** While a thread is busy (a run of this page, or of any client), read the list again every
 * few seconds, and the shown thread's checkpoints when it is the busy one and this page does
 * not stream its run. */
function pollWhileBusy(threads) {
  clearTimeout(busyPoll);
  busyPoll = null;
  const busy = threads.filter((thread) => thread.status === "busy").map((thread) => thread.thread_id);
  if (!busy.length) return;
  busyPoll = setTimeout(async () => {
    await guarded(refreshThreads);
    if (busy.includes(app.threadId) && app.run?.threadId !== app.threadId) await guarded(() => loadTimeline());
  }, BUSY_POLL_MS);
}

function markSelected() {
  for (const item of $("threads").querySelectorAll(".thread")) item.classList.toggle("selected", item.dataset.threadId === app.threadId);
}

/** Show a thread: its state, pending interrupts, last error, and its checkpoints. */
export async function selectThread(threadId, { keepRun = false } = {}) {
  if (threadId !== app.threadId) clearTimeline();
  app.threadId = threadId;
  markSelected();
  history.replaceState(null, "", `#${encodeURIComponent(app.assistant.assistant_id)}/${encodeURIComponent(threadId)}`);
  if (!keepRun) clearRun();
  const [thread, state] = await Promise.all([call("GET", p`/threads/${threadId}`), call("GET", p`/threads/${threadId}/state`)]);
  app.state = state;
  showValues(state.values);
  showInterrupts(state.interrupts ?? [], state.next ?? [], thread.status);
  if (thread.status === "error" && !keepRun) await showLastError(threadId);
  await loadTimeline();
}

/** A new thread for the next run: nothing selected until it starts. */
export function newThread() {
  app.threadId = null;
  app.state = null;
  clearTimeline();
  forkFrom(null);
  clearRun();
  markSelected();
  history.replaceState(null, "", `#${encodeURIComponent(app.assistant.assistant_id)}`);
  clear($("conversation"));
}

/** The error of the thread's last run, from its recorded events. */
async function showLastError(threadId) {
  const runs = await call("GET", p`/threads/${threadId}/runs` + "?limit=1");
  const last = runs[0];
  if (!last || last.status !== "error") return;
  const text = await call("GET", p`/threads/${threadId}/runs/${last.run_id}/stream`);
  const frames = String(text).split(/\r?\n\r?\n/);
  for (const frame of frames) {
    if (!/^event: error$/m.test(frame)) continue;
    const data = frame.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim()).join("\n");
    try {
      showError(JSON.parse(data));
    } catch {
      showError({ error: "Error", message: data });
    }
  }
}
