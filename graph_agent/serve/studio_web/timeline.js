// A thread's checkpoints: the timeline (every checkpoint, branches drawn as lanes, following a
// run as it saves them, from the run's own stream; the arrow keys move between them), the state
// at a checkpoint with what changed from the one before, and time travel: fork from a
// checkpoint, or edit its state and carry on.

import { call, p } from "./api.js";
import { clear, conversation, diff, h, jsonTree, shortId, time } from "./dom.js";
import { forkFrom, startRun } from "./run.js";
import { app, emit, guarded, notify } from "./state.js";

const $ = (id) => document.getElementById(id);
const HISTORY_LIMIT = 200;

let checkpoints = []; // the shown thread's history, oldest first
let picked = null; // the checkpoint a person picked; null: the newest, as it changes
let shown = null; // the checkpoint shown in detail (and its row selected)

/** Forget the shown thread's checkpoints (another thread, or a new one, is shown). */
export function clearTimeline() {
  checkpoints = [];
  picked = null;
  shown = null;
  clear($("timeline"));
  clear($("checkpoint"));
  $("timeline-count").textContent = "";
}

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

function row({ checkpoint, lane, branch, parent }, head, steps) {
  const id = checkpoint.checkpoint.checkpoint_id;
  const meta = checkpoint.metadata ?? {};
  const waiting = (checkpoint.tasks ?? []).some((task) => task.interrupts?.length);
  const failed = (checkpoint.tasks ?? []).some((task) => task.error);
  return h("li", {
    class: `cp lane-${lane % 6}${id === head ? " head" : ""}${branch ? " branch" : ""}`,
    dataset: { checkpoint: id, lane, step: meta.step ?? "" },
    style: `--lane: ${lane}`,
    role: "option",
    tabindex: "-1",
    "aria-selected": "false",
    onclick: () => guarded(() => pick(id)),
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
    h("code", { class: "cp-id", title: id }, shortId(id)),
    meta.source ? ` · ${meta.source}` : "",
    checkpoint.next?.length ? ` · next: ${checkpoint.next.join(", ")}` : " · done",
    ` · ${time(checkpoint.created_at)}`));
}

/** Load and draw the shown thread's checkpoints, oldest at the top; show `select` (else the
 * one picked, else the newest). */
export async function loadTimeline(select = null) {
  const threadId = app.threadId;
  if (!threadId) return;
  const newest = await call("POST", p`/threads/${threadId}/history`, { limit: HISTORY_LIMIT });
  if (threadId !== app.threadId) return; // another thread was picked meanwhile
  const read = [...newest].reverse();
  // a run streaming meanwhile may have told newer ones than the history had: they stay
  const last = read.at(-1)?.checkpoint?.checkpoint_id ?? "";
  const told = checkpoints.filter((item) => item.checkpoint.checkpoint_id > last);
  checkpoints = [...read, ...told];
  await draw(select);
}

/**
 * A run of this page saved a checkpoint (its `checkpoints` stream mode): add it to the
 * timeline, or, told again (a run resuming from it), show what its tasks did. The history is
 * not read again: a long run would read it all at every step.
 */
export async function addCheckpoint(threadId, payload) {
  if (threadId !== app.threadId || !payload?.config) return;
  const entry = fromPayload(payload);
  const id = entry.checkpoint.checkpoint_id;
  const at = checkpoints.findIndex((item) => item.checkpoint.checkpoint_id === id);
  if (at >= 0) checkpoints[at] = { ...entry, created_at: checkpoints[at].created_at };
  else checkpoints.push(entry);
  if (checkpoints.length > HISTORY_LIMIT) checkpoints = checkpoints.slice(-HISTORY_LIMIT);
  await draw();
}

/** A `checkpoints` event as the history lists a checkpoint (the state API's shape). */
function fromPayload(payload) {
  const place = (config) => (config ? { ...config.configurable, checkpoint_map: null } : null);
  return {
    values: payload.values ?? {},
    next: payload.next ?? [],
    checkpoint: place(payload.config),
    metadata: payload.metadata ?? {},
    created_at: new Date().toISOString(), // told as it was saved; the history has the exact time
    parent_checkpoint: place(payload.parent_config),
    tasks: payload.tasks ?? [],
    interrupts: (payload.tasks ?? []).flatMap((task) => task.interrupts ?? []),
  };
}

/** Draw the timeline's rows from `checkpoints`; show `select` (else the one picked, else the
 * newest). */
async function draw(select = null) {
  const head = checkpoints.at(-1)?.checkpoint?.checkpoint_id;
  const rows = lanes(checkpoints);
  const steps = new Map(checkpoints.map((item) => [item.checkpoint.checkpoint_id, item.metadata?.step]));
  const focused = $("timeline").contains(document.activeElement);
  clear($("timeline"), rows.map((item) => row(item, head, steps)));
  const branches = new Set(rows.map((item) => item.lane)).size;
  $("timeline-count").textContent = `${checkpoints.length} checkpoint${checkpoints.length === 1 ? "" : "s"}${branches > 1 ? ` · ${branches} branches` : ""}`;
  if (select) picked = select;
  if (picked && !find(picked)) picked = null;
  const wanted = picked ?? head;
  const again = wanted === shown;
  if (wanted) await showCheckpoint(wanted, { redraw: !again });
  else clear($("checkpoint"));
  if (focused) selectedRow()?.focus();
}

/** Show the newest checkpoint again as runs add them (a run was started from this page). */
export function followNewest() {
  picked = null;
}

function find(id) {
  return checkpoints.find((item) => item.checkpoint.checkpoint_id === id);
}

function selectedRow() {
  return $("timeline").querySelector(".cp.selected");
}

/** A person picked checkpoint `id`: it stays shown while a run adds newer ones. */
async function pick(id) {
  picked = id;
  await showCheckpoint(id);
}

/** The arrow keys (and Home, End) move the selected checkpoint along the timeline. */
export function onTimelineKey(event) {
  const rows = [...$("timeline").querySelectorAll(".cp")];
  if (!rows.length) return;
  const at = rows.indexOf(selectedRow());
  const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: rows.length - 1 }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  const target = rows[Math.max(0, Math.min(rows.length - 1, to))];
  target.focus();
  if (target !== rows[at]) guarded(() => pick(target.dataset.checkpoint));
}

function markRow(id) {
  for (const item of $("timeline").querySelectorAll(".cp")) {
    const selected = item.dataset.checkpoint === id;
    item.classList.toggle("selected", selected);
    item.setAttribute("aria-selected", String(selected));
    item.tabIndex = selected ? 0 : -1; // the timeline is one stop for Tab; arrows move inside
    if (selected) reveal(item);
  }
}

/** Scroll the timeline (only it: never the page, which a phone scrolls) to show `item`. */
function reveal(item) {
  const list = $("timeline");
  const box = list.getBoundingClientRect();
  const at = item.getBoundingClientRect();
  if (at.top < box.top) list.scrollTop -= box.top - at.top;
  else if (at.bottom > box.bottom) list.scrollTop += at.bottom - box.bottom;
}

// ---------------------------------------------------------------- one checkpoint

/** The state at checkpoint `id`, what changed from its parent, and what can be done from it
 * (drawn again only when `redraw`: a re-read timeline leaves an open detail as it is). */
export async function showCheckpoint(id, { redraw = true } = {}) {
  shown = id;
  markRow(id);
  const checkpoint = find(id);
  if (!checkpoint || !redraw) return;
  const parentId = checkpoint.parent_checkpoint?.checkpoint_id;
  let parent = parentId ? find(parentId) : null;
  if (parentId && !parent) parent = await call("GET", p`/threads/${app.threadId}/state/${parentId}`);
  if (shown !== id) return; // another one was picked meanwhile
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
  picked = id; // a run saving checkpoints meanwhile leaves the editor open
  const values = checkpoint.values ?? {};
  const editor = h("textarea", { id: "state-editor", rows: 14, spellcheck: "false", "aria-label": "The state, as JSON" }, JSON.stringify(values, null, 2));
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
    picked = null;
    await loadTimeline(newId);
    await emit("state-edited", app.threadId);
    if (carryOn) {
      picked = null; // follow the run from the edit on
      await startRun({ input: null, checkpointId: newId });
    }
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
