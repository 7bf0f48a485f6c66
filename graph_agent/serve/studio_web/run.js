// Starting runs and watching them live: the stream of a run (nodes, tokens, tool calls, token
// usage), its error, and the human-in-the-loop controls that resume a paused run. The form
// that starts one is form.js.

import { call, p, stream } from "./api.js";
import { clear, conversation, h, jsonTree, roleOf, shortId, textOf, toolCall, usageText } from "./dom.js";
import * as graph from "./graph.js";
import { app, emit, guarded, notify } from "./state.js";

const $ = (id) => document.getElementById(id);
// tasks: each node's task as it starts and ends (the graph lights what runs now); values: the
// state after each step; checkpoints: each checkpoint as it is saved (the timeline adds it,
// without reading the thread's history again)
const STREAM_MODES = ["updates", "messages", "values", "tasks", "checkpoints"];

// ---------------------------------------------------------------- time travel banner

/** The next run starts from this checkpoint (a fork), until it starts or is called off. */
export function forkFrom(checkpoint) {
  app.forkFrom = checkpoint;
  const banner = $("fork-banner");
  if (!checkpoint) {
    banner.hidden = true;
    return;
  }
  clear(banner,
    h("span", {}, "The next run starts from checkpoint ", h("code", { title: checkpoint.id }, shortId(checkpoint.id)), ` (step ${checkpoint.step}), as a new branch.`),
    h("button", { type: "button", class: "quiet", onclick: () => forkFrom(null) }, "Call off"));
  banner.hidden = false;
  $("run-form").querySelector("textarea, input")?.focus();
}

// ---------------------------------------------------------------- a run, live

class LiveRun {
  constructor(threadId) {
    this.threadId = threadId;
    this.runId = null;
    this.count = 0;
    this.tokens = 0;
    this.errored = false;
    this.interrupted = false;
    this.cancelled = false;
    this.abort = new AbortController();
  }

  event(name, data) {
    if (name === "metadata") this.runId = data?.run_id ?? null;
    else if (name === "tasks") this.task(data);
    else if (name === "updates") this.updates(data);
    else if (name === "values") this.values(data);
    else if (name === "checkpoints") emit("run-checkpoint", this.threadId, data);
    else if (name === "messages/partial") this.partial(data);
    else if (name === "usage") this.usage(data);
    else if (name === "error") this.error(data);
  }

  updates(data) {
    if (!data || typeof data !== "object") return;
    if ("__interrupt__" in data) {
      this.interrupted = true;
      return;
    }
    for (const [node, update] of Object.entries(data)) {
      this.count += 1;
      $("run-log").append(logRow(this.count, node, update));
    }
  }

  /** A task started (`triggers`, `input`) or ended (`result` or `error`, `interrupts`). */
  task(data) {
    if (!data?.id || !data.name) return;
    if ("triggers" in data) graph.taskStarted(data.id, data.name);
    else graph.taskEnded(data.id, data.name, Boolean(data.error));
  }

  /** The state after a step (at a pause, with what waits under `__interrupt__`). */
  values(data) {
    if (!data || typeof data !== "object") return;
    const values = { ...data };
    delete values.__interrupt__;
    showValues(values);
  }

  partial(data) {
    const message = Array.isArray(data) ? data[0] : null;
    if (!message) return;
    const box = $("conversation");
    let bubble = box.querySelector(`.msg.streaming[data-id="${CSS.escape(message.id ?? "")}"]`);
    if (!bubble) {
      bubble = h("div", { class: "msg ai streaming", dataset: { id: message.id ?? "" } },
        h("div", { class: "who" }, "assistant ", h("span", { class: "typing" }, "streaming")),
        h("div", { class: "content" }), h("div", { class: "calls" }));
      box.append(bubble);
    }
    bubble.querySelector(".content").textContent = textOf(message.content);
    const calls = (message.tool_call_chunks ?? []).filter((chunk) => chunk.name);
    for (const chunk of calls) {
      const known = bubble.querySelector(`.calls [data-index="${chunk.index}"]`);
      if (!known) bubble.querySelector(".calls").append(h("div", { class: "small muted", dataset: { index: chunk.index } }, `calling ${chunk.name}…`));
    }
    box.scrollTop = box.scrollHeight;
  }

  usage(data) {
    const total = data?.usage?.total_tokens ?? 0;
    this.tokens += total;
    $("run-tokens").textContent = `${this.tokens} tokens`;
    const rows = [...$("run-log").querySelectorAll(`li[data-node="${CSS.escape(data?.node ?? "")}"]`)];
    const row = rows.reverse().find((item) => !item.querySelector(".usage"));
    if (row) row.querySelector(".row-head").append(h("span", { class: "usage chip" }, usageText(data.usage)));
  }

  error(data) {
    this.errored = true;
    showError(data);
    if (data?.node) graph.failed(data.node);
  }
}

function logRow(number, node, update) {
  const messages = Array.isArray(update?.messages) ? update.messages : [];
  const calls = messages.flatMap((message) => (roleOf(message) === "assistant" ? message.tool_calls ?? [] : []));
  const results = messages.filter((message) => roleOf(message) === "tool");
  const answer = messages.find((message) => roleOf(message) === "assistant" && textOf(message.content));
  return h("li", { dataset: { node } },
    h("div", { class: "row-head" }, h("span", { class: "step-no" }, `#${number}`), h("span", { class: "node-name" }, node),
      calls.length ? h("span", { class: "chip" }, `${calls.length} tool call${calls.length > 1 ? "s" : ""}`) : null,
      results.length ? h("span", { class: "chip" }, `${results.length} result${results.length > 1 ? "s" : ""}`) : null,
      answer ? h("span", { class: "chip" }, "answer") : null),
    calls.map((item) => toolCall(item, undefined)),
    results.map((result) => h("details", { class: `tool-call ${result.status === "error" ? "error" : "done"}`, dataset: { tool: result.name ?? "" } },
      h("summary", {}, h("span", { class: "tool-name" }, result.name || "tool"), " → ", h("span", { class: "tool-args" }, textOf(result.content).slice(0, 80))),
      h("pre", { class: "tool-result" }, textOf(result.content)))),
    h("details", { class: "update" }, h("summary", { class: "small muted" }, "update"), jsonTree(update, 1)));
}

/** The thread's state in the run panel: a conversation for an agent, else its values. */
export function showValues(values) {
  const box = $("conversation");
  if (Array.isArray(values?.messages)) clear(box, conversation(values.messages));
  else clear(box, h("div", { class: "values" }, h("div", { class: "small muted" }, "State"), jsonTree(values ?? {}, 2)));
  box.scrollTop = box.scrollHeight;
}

/** A failed run: what raised, where (node, step), and its message. */
export function showError(error) {
  const box = $("run-error");
  if (!error) {
    box.hidden = true;
    clear(box);
    return;
  }
  const where = [error.node ? h("span", {}, "in node ", h("code", { class: "error-node" }, error.node)) : null,
    error.step !== undefined && error.step !== null ? h("span", {}, " at step ", h("code", { class: "error-step" }, String(error.step))) : null];
  clear(box,
    h("strong", {}, "The run failed "), where,
    h("div", { class: "error-message" }, `${error.error ?? "Error"}: ${error.message ?? ""}`));
  box.hidden = false;
}

/** The run's status chip: `kind` colours it (busy, good, bad, wait). */
export function setStatus(text, kind) {
  const chip = $("run-status");
  chip.textContent = text;
  chip.className = `chip ${kind ?? ""}`;
}

/** Reset the run panel for a thread being shown (not a run). */
export function clearRun() {
  clear($("run-log"));
  clear($("interrupts"));
  showError(null);
  setStatus("", "");
  $("run-tokens").textContent = "";
  graph.reset();
}

async function ensureThread() {
  if (app.threadId) return app.threadId;
  const thread = await call("POST", "/threads", { metadata: { graph_id: app.assistant.assistant_id } });
  app.threadId = thread.thread_id;
  await emit("thread-created", thread.thread_id);
  return thread.thread_id;
}

/**
 * Start a run on the shown thread (a new one when none is) and follow it live.
 * `input`: the state update; `command`: {resume} to answer an interrupt; `checkpointId`: fork;
 * `onAccepted()`: once the server took the run. A server that cannot be reached rejects with
 * Unreachable (`opened` false: nothing was started, nothing is lost).
 */
export async function startRun({ input = null, command = null, checkpointId = null, onAccepted = null } = {}) {
  if (app.run) throw new Error("a run is still going on this page: wait for it, or cancel it");
  const threadId = await ensureThread();
  const from = checkpointId ?? app.forkFrom?.id ?? null;
  clearRun();
  const live = new LiveRun(threadId);
  app.run = live;
  setStatus("running", "busy");
  $("cancel-run").hidden = false;
  const body = { assistant_id: app.assistant.assistant_id, stream_mode: STREAM_MODES, input, multitask_strategy: "reject" };
  if (command) body.command = command;
  if (from) body.checkpoint_id = from;
  const opened = () => {
    forkFrom(null);
    onAccepted?.();
    emit("run-started", threadId);
  };
  let unsent = null;
  try {
    await stream(p`/threads/${threadId}/runs/stream`, body, (event, data) => live.event(event, data), { signal: live.abort.signal, onOpen: opened });
  } catch (error) {
    if (error?.name === "Unreachable" && !error.opened) unsent = error;
    else if (error?.name !== "AbortError") {
      live.errored = true;
      showError({ error: error?.name === "Unreachable" ? "Unreachable" : error?.code ?? "RequestError", message: error?.message ?? String(error) });
    }
  } finally {
    app.run = null;
    $("cancel-run").hidden = true;
    graph.idle();
  }
  if (unsent) {
    setStatus("not sent", "bad");
    throw unsent;
  }
  await emit("run-finished", threadId, live); // the thread, its timeline and interrupts anew
  // said last, so that "done" means everything on the page is up to date
  if (live.errored) setStatus("error", "bad");
  else if (live.interrupted) setStatus("waiting for you", "wait");
  else if (live.cancelled) setStatus("cancelled", "");
  else setStatus("done", "good");
}

/** Stop the streaming run before its next step. */
export async function cancelRun() {
  const live = app.run;
  if (!live?.runId) return;
  live.cancelled = true;
  await call("POST", p`/threads/${live.threadId}/runs/${live.runId}/cancel`);
  notify("Cancelled: the run stops before its next step.", "info");
}

// ---------------------------------------------------------------- human in the loop

/** Pending interrupts of the shown thread, each with a way to answer it. */
export function showInterrupts(interrupts, next = [], status = "") {
  const box = $("interrupts");
  clear(box);
  if (interrupts.length) {
    for (const item of interrupts) {
      box.append(isApproval(item.value) ? approvalCard(item, interrupts) : genericCard(item, interrupts));
      if (item.node) graph.paused(item.node);
    }
    setStatus("waiting for you", "wait");
  } else if (next.length && status === "interrupted") {
    box.append(h("div", { class: "interrupt" },
      h("div", { class: "interrupt-head" }, "Paused before ", h("code", {}, next.join(", "))),
      h("button", { type: "button", class: "primary", onclick: () => guarded(() => startRun({ input: null })) }, "Continue")));
  }
}

function isApproval(value) {
  return value && typeof value === "object" && Array.isArray(value.tool_calls) && value.tool_calls.every((item) => item && item.id && item.name);
}

function resumeValue(item, value, all) {
  return all.length > 1 ? { [item.id]: value } : value;
}

function genericCard(item, all) {
  const text = h("textarea", { rows: 2, class: "resume-value", placeholder: "The value the paused node gets back: JSON, or plain text", spellcheck: "false" });
  const resume = () => {
    const raw = text.value.trim();
    let value = raw;
    try {
      value = raw === "" ? null : JSON.parse(raw);
    } catch {
      // plain text
    }
    return startRun({ command: { resume: resumeValue(item, value, all) } });
  };
  return h("div", { class: "interrupt", dataset: { interruptId: item.id ?? "" } },
    h("div", { class: "interrupt-head" }, "Waiting for you", item.node ? [" in ", h("code", {}, item.node)] : null),
    jsonTree(item.value, 2),
    text,
    h("div", { class: "actions" }, h("button", { type: "button", class: "primary resume", onclick: () => guarded(resume) }, "Resume")));
}

function approvalCard(item, all) {
  const calls = item.value.tool_calls.map((toolCallShown) => approvalFor(toolCallShown));
  const send = () => {
    const decisions = {};
    for (const entry of calls) decisions[entry.id] = entry.decision();
    return startRun({ command: { resume: resumeValue(item, decisions, all) } });
  };
  return h("div", { class: "interrupt approvals", dataset: { interruptId: item.id ?? "" } },
    h("div", { class: "interrupt-head" }, `Approve ${calls.length === 1 ? "this tool call" : `these ${calls.length} tool calls`}?`),
    calls.map((entry) => entry.node),
    h("div", { class: "actions" }, h("button", { type: "button", class: "primary send-decisions", onclick: () => guarded(send) }, "Send decisions")));
}

function approvalFor(shown) {
  const name = `decision-${shown.id}`;
  const args = shown.arguments && typeof shown.arguments === "object" ? shown.arguments : {};
  const malformed = shown.raw_arguments !== undefined && shown.raw_arguments !== null;
  const fields = malformed
    ? [h("label", { class: "field wide" }, "arguments (the model's were not valid JSON)", h("textarea", { rows: 2, "data-raw": "1", spellcheck: "false" }, shown.raw_arguments))]
    : Object.entries(args).map(([key, value]) => argumentField(key, value));
  const reason = h("input", { type: "text", class: "reason", placeholder: "Why not? (the model reads this)", "aria-label": "Reason", hidden: true });
  const argsBox = h("div", { class: "args" }, fields);
  const radio = (value, label) => h("label", { class: `decide ${value}` }, h("input", { type: "radio", name, value, checked: value === "approve" }), label);
  const node = h("fieldset", { class: "approval", dataset: { tool: shown.name, callId: shown.id } },
    h("legend", {}, h("code", {}, shown.name)),
    shown.description ? h("p", { class: "muted small" }, shown.description) : null,
    h("div", { class: "decision", role: "radiogroup" }, radio("approve", "Approve"), radio("edit", "Edit"), radio("reject", "Reject")),
    argsBox, reason);
  const chosen = () => node.querySelector(`input[name="${CSS.escape(name)}"]:checked`)?.value ?? "approve";
  const sync = () => {
    const decision = chosen();
    for (const control of argsBox.querySelectorAll("input, textarea")) control.disabled = decision !== "edit";
    reason.hidden = decision !== "reject";
    node.dataset.decision = decision;
  };
  node.addEventListener("change", sync);
  sync();
  const decision = () => {
    const kind = chosen();
    if (kind === "approve") return { decision: "approve" };
    if (kind === "reject") return { decision: "reject", reason: reason.value.trim() || "rejected by the user" };
    return { decision: "edit", arguments: editedArguments(argsBox, shown) };
  };
  return { id: shown.id, node, decision };
}

function argumentField(key, value) {
  const kind = typeof value;
  let control;
  if (kind === "boolean") control = h("input", { type: "checkbox", "data-arg": key, "data-type": kind, checked: value });
  else if (kind === "number") control = h("input", { type: "number", step: "any", "data-arg": key, "data-type": kind, value });
  else if (kind === "string") control = h("input", { type: "text", "data-arg": key, "data-type": kind, value });
  else control = h("textarea", { rows: 2, "data-arg": key, "data-type": "json", spellcheck: "false" }, JSON.stringify(value));
  return h("label", { class: "field" }, h("span", {}, key), control);
}

function editedArguments(argsBox, shown) {
  const raw = argsBox.querySelector("[data-raw]");
  if (raw) {
    try {
      return JSON.parse(raw.value);
    } catch (error) {
      throw new Error(`${shown.name}: the arguments are not valid JSON (${error.message})`);
    }
  }
  const edited = {};
  for (const control of argsBox.querySelectorAll("[data-arg]")) {
    const type = control.dataset.type;
    if (type === "boolean") edited[control.dataset.arg] = control.checked;
    else if (type === "number") edited[control.dataset.arg] = Number(control.value);
    else if (type === "string") edited[control.dataset.arg] = control.value;
    else {
      try {
        edited[control.dataset.arg] = JSON.parse(control.value);
      } catch (error) {
        throw new Error(`${shown.name}: ${control.dataset.arg} is not valid JSON (${error.message})`);
      }
    }
  }
  return edited;
}
