// Threads and their checkpoints: the list of threads, a thread's timeline (every checkpoint,
// branches drawn as lanes), the state at a checkpoint with what changed from the one before,
// and time travel: fork from a checkpoint, or edit its state and carry on.

import { call, p } from "./api.js";
import { clear, conversation, diff, h, jsonTree, shortId, time } from "./dom.js";
import { clearRun, forkFrom, showError, showInterrupts, showValues, startRun } from "./run.js";
import { app, emit, guarded, notify } from "./state.js";

const $ = (id) => document.getElementById(id);
const HISTORY_LIMIT = 200;

let checkpoints = []; // the shown thread's history, oldest first
let selected = null; // the checkpoint id shown in detail

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
    h("span", { class: "thread-id" }, shortId(thread.thread_id)),
    h("span", { class: `chip status-${thread.status}` }, thread.status),
    h("span", { class: "muted small" }, time(thread.updated_at))))));
  if (!threads.length) list.append(h("li", { class: "muted small empty" }, "No threads yet: start a run."));
}

function markSelected() {
  for (const item of $("threads").querySelectorAll(".thread")) item.classList.toggle("selected", item.dataset.threadId === app.threadId);
}

/** Show a thread: its state, pending interrupts, last error, and its checkpoints. */
export async function selectThread(threadId, { keepRun = false } = {}) {
  app.threadId = threadId;
  markSelected();
  history.replaceState(null, "", `#${encodeURIComponent(app.assistant.assistant_id)}/${encodeURIComponent(threadId)}`);
  if (!keepRun) clearRun();
  const [thread, state] = await Promise.all([call("GET", p`/threads/${threadId}`), call("GET", p`/threads/${threadId}/state`)]);
  app.state = state;
  showValues(state.values);
  showInterrupts(state.interrupts ?? [], state.next ?? [], thread.status);
  if (thread.status === "error" && !keepRun) await showLastError(threadId);
  selected = null; // the newest checkpoint, until one is picked
  await loadTimeline();
}

/** A new thread for the next run: nothing selected until it starts. */
export function newThread() {
  app.threadId = null;
  app.state = null;
  checkpoints = [];
  selected = null;
  forkFrom(null);
  clearRun();
  markSelected();
  history.replaceState(null, "", `#${encodeURIComponent(app.assistant.assistant_id)}`);
  clear($("conversation"));
  clear($("timeline"));
  clear($("checkpoint"));
  $("timeline-count").textContent = "";
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

// ---------------------------------------------------------------- the timeline

/** Each checkpoint's lane: a checkpoint continues the lane its parent ends, else opens one. */
function lanes(list) {
  const tips = [];
  return list.map((checkpoint) => {
    const parent = checkpoint.parent_checkpoint?.checkpoint_id ?? null;
    let lane = parent === null ? -1 : tips.indexOf(parent);
    const branch = lane < 0 && parent !== null;
    if (lane < 0) {
      lane = parent === null && tips.length === 0 ? 0 : tips.length;
      tips.push(null);
    }
    tips[lane] = checkpoint.checkpoint.checkpoint_id;
    return { checkpoint, lane, branch, parent };
  });
}

/** Load and draw the shown thread's checkpoints, oldest at the top. */
export async function loadTimeline(select = null) {
  const threadId = app.threadId;
  if (!threadId) return;
  const newest = await call("POST", p`/threads/${threadId}/history`, { limit: HISTORY_LIMIT });
  checkpoints = [...newest].reverse();
  const head = newest[0]?.checkpoint?.checkpoint_id;
  const rows = lanes(checkpoints);
  const steps = new Map(checkpoints.map((item) => [item.checkpoint.checkpoint_id, item.metadata?.step]));
  const timeline = $("timeline");
  clear(timeline, rows.map(({ checkpoint, lane, branch, parent }) => {
    const id = checkpoint.checkpoint.checkpoint_id;
    const meta = checkpoint.metadata ?? {};
    const waiting = (checkpoint.tasks ?? []).some((task) => task.interrupts?.length);
    const failed = (checkpoint.tasks ?? []).some((task) => task.error);
    return h("li", {
      class: `cp lane-${lane % 6}${id === head ? " head" : ""}${branch ? " branch" : ""}`,
      dataset: { checkpoint: id, lane, step: meta.step ?? "" },
      style: `--lane: ${lane}`,
      onclick: () => guarded(() => showCheckpoint(id)),
    },
    h("span", { class: "dot" }),
    h("span", { class: "cp-main" },
      h("span", { class: "cp-step" }, `step ${meta.step ?? "?"}`),
      h("span", { class: "cp-writers" }, (meta.writers ?? []).join(", ") || meta.source || ""),
      branch ? h("span", { class: "chip branch-chip" }, `branch from step ${steps.get(parent) ?? "?"}`) : null,
      id === head ? h("span", { class: "chip head-chip" }, "newest") : null,
      waiting ? h("span", { class: "chip wait" }, "waiting") : null,
      failed ? h("span", { class: "chip bad" }, "error") : null),
    h("span", { class: "cp-sub muted small" },
      meta.source ? `${meta.source}` : "",
      checkpoint.next?.length ? ` · next: ${checkpoint.next.join(", ")}` : " · done",
      ` · ${time(checkpoint.created_at)}`));
  }));
  const branches = new Set(rows.map((row) => row.lane)).size;
  $("timeline-count").textContent = `${checkpoints.length} checkpoint${checkpoints.length === 1 ? "" : "s"}${branches > 1 ? ` · ${branches} branches` : ""}`;
  const wanted = select ?? (checkpoints.some((item) => item.checkpoint.checkpoint_id === selected) ? selected : head);
  if (wanted) await showCheckpoint(wanted);
  else clear($("checkpoint"));
}

function find(id) {
  return checkpoints.find((item) => item.checkpoint.checkpoint_id === id);
}

// ---------------------------------------------------------------- one checkpoint

/** The state at checkpoint `id`, what changed from its parent, and what can be done from it. */
export async function showCheckpoint(id) {
  selected = id;
  for (const row of $("timeline").querySelectorAll(".cp")) {
    row.classList.toggle("selected", row.dataset.checkpoint === id);
    if (row.dataset.checkpoint === id) row.scrollIntoView({ block: "nearest" });
  }
  const checkpoint = find(id);
  if (!checkpoint) return;
  const parentId = checkpoint.parent_checkpoint?.checkpoint_id;
  let parent = parentId ? find(parentId) : null;
  if (parentId && !parent) parent = await call("GET", p`/threads/${app.threadId}/state/${parentId}`);
  const meta = checkpoint.metadata ?? {};
  const values = checkpoint.values ?? {};
  const step = meta.step ?? "?";
  const canContinue = (checkpoint.next ?? []).length > 0;
  clear($("checkpoint"),
    h("div", { class: "cp-head" }, h("strong", {}, `Step ${step}`), " · ", h("code", { title: id }, shortId(id)), meta.source ? h("span", { class: "chip" }, meta.source) : null),
    h("div", { class: "actions cp-actions" },
      h("button", { type: "button", class: "fork", title: "Start the next run from this checkpoint, as a new branch", onclick: () => forkFrom({ id, step }) }, "Fork from here"),
      canContinue ? h("button", { type: "button", class: "continue", title: `Run ${checkpoint.next.join(", ")} again from here, as a new branch`, onclick: () => guarded(() => startRun({ input: null, checkpointId: id })) }, "Re-run from here") : null,
      h("button", { type: "button", class: "edit-state", onclick: () => editState(checkpoint) }, "Edit state")),
    h("section", { class: "cp-section" }, h("h3", {}, parent ? "Changes from the step before" : "The thread's first state"), diff(parent?.values ?? {}, values)),
    Array.isArray(values.messages) ? h("details", { class: "cp-section", open: true }, h("summary", {}, "Conversation"), h("div", { class: "conversation small-conv" }, conversation(values.messages, { showSystem: true }))) : null,
    h("details", { class: "cp-section state-json", open: !Array.isArray(values.messages) }, h("summary", {}, "State"), jsonTree(values, 1)),
    h("details", { class: "cp-section" }, h("summary", {}, "Checkpoint"), jsonTree({ checkpoint_id: id, parent: parentId ?? null, next: checkpoint.next, metadata: meta, tasks: checkpoint.tasks, created_at: checkpoint.created_at }, 1)));
}

/** Edit the state at a checkpoint (update_state): the edit is a new checkpoint after it. */
function editState(checkpoint) {
  const id = checkpoint.checkpoint.checkpoint_id;
  const values = checkpoint.values ?? {};
  const editor = h("textarea", { id: "state-editor", rows: 14, spellcheck: "false" }, JSON.stringify(values, null, 2));
  const nodes = [...document.querySelectorAll("#graph [data-node]")].map((item) => item.dataset.node).filter((name) => name !== "__start__" && name !== "__end__" && !name.includes("/"));
  const asNode = h("select", { id: "as-node" }, h("option", { value: "" }, "(as the node that wrote last)"), nodes.map((name) => h("option", { value: name }, name)));
  const save = async (carryOn) => {
    let edited;
    try {
      edited = JSON.parse(editor.value);
    } catch (error) {
      throw new Error(`the state is not valid JSON: ${error.message}`);
    }
    if (!edited || typeof edited !== "object" || Array.isArray(edited)) throw new Error("the state must be a JSON object");
    const changed = {};
    for (const [key, value] of Object.entries(edited)) if (JSON.stringify(values[key]) !== JSON.stringify(value)) changed[key] = value;
    if (!Object.keys(changed).length) {
      notify("Nothing changed: edit a value first.", "info");
      return;
    }
    const body = { values: changed, checkpoint_id: id };
    if (asNode.value) body.as_node = asNode.value;
    const answer = await call("POST", p`/threads/${app.threadId}/state`, body);
    const newId = answer?.checkpoint?.checkpoint_id ?? null;
    await loadTimeline(newId);
    await emit("state-edited", app.threadId);
    if (carryOn) await startRun({ input: null, checkpointId: newId });
  };
  clear($("checkpoint"),
    h("div", { class: "cp-head" }, h("strong", {}, "Edit the state"), " at step ", String(checkpoint.metadata?.step ?? "?"), " · ", h("code", {}, shortId(id))),
    h("p", { class: "muted small" }, "Change any value; the changed keys are written as a new checkpoint after this one (a list of messages: a message keeps its place by its id). The history before stays as it was."),
    editor,
    h("label", { class: "small" }, "Write it as ", asNode),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "primary save-continue", onclick: () => guarded(() => save(true)) }, "Save and continue"),
      h("button", { type: "button", class: "save", onclick: () => guarded(() => save(false)) }, "Save"),
      h("button", { type: "button", class: "quiet", onclick: () => guarded(() => showCheckpoint(id)) }, "Cancel")));
  editor.focus();
}
