// The Studio's start: ask for the API key when the server wants one, list the assistants,
// and wire the panels together.

import { call, forgetKey, p, setUnauthorizedHandler, storedKey, storeKey } from "./api.js";
import { onBack } from "./connection.js";
import { clear, h } from "./dom.js";
import { renderForm } from "./form.js";
import * as graph from "./graph.js";
import { cancelRun } from "./run.js";
import { app, closeNotice, guarded, notify, on } from "./state.js";
import { newThread, refreshThreads, selectThread } from "./threads.js";
import { addCheckpoint, followNewest, onTimelineKey } from "./timeline.js";

const $ = (id) => document.getElementById(id);
let config = { keys_required: false };
let asking = null;

/** Ask for the API key (once: concurrent askers share the dialog); resolves when given. */
function askKey(problem = "") {
  if (asking) return asking;
  const dialog = $("key-dialog");
  const note = $("key-problem");
  note.textContent = problem;
  note.hidden = !problem;
  $("key-input").value = "";
  asking = new Promise((resolve) => {
    $("key-form").onsubmit = (event) => {
      event.preventDefault();
      const key = $("key-input").value.trim();
      if (!key) return;
      storeKey(key, $("key-remember").checked);
      dialog.close();
      asking = null;
      resolve(key);
    };
  });
  dialog.showModal();
  return asking;
}

async function selectAssistant(assistantId, threadId = null) {
  const assistant = await call("GET", p`/assistants/${assistantId}`);
  // an assistant created over a served graph: the graph's own (a system assistant) tells its kind
  const served = assistant.metadata?.kind || assistant.graph_id === assistantId ? assistant : await call("GET", p`/assistants/${assistant.graph_id}`);
  app.assistant = { ...assistant, kind: served.metadata?.kind === "agent" ? "agent" : "graph" };
  app.schemas = await call("GET", p`/assistants/${assistantId}/schemas`);
  $("assistant").value = assistantId;
  $("assistant-kind").textContent = app.assistant.kind;
  await graph.loadGraph(assistantId);
  renderForm();
  newThread();
  await refreshThreads();
  if (threadId) await guarded(() => selectThread(threadId));
}

async function boot() {
  config = await call("GET", "/studio/config.json");
  $("change-key").hidden = !config.keys_required;
  if (config.keys_required && !storedKey()) await askKey();
  const assistants = await call("POST", "/assistants/search", { limit: 100 });
  const select = $("assistant");
  clear(select, assistants.map((item) => h("option", { value: item.assistant_id }, item.name ?? item.assistant_id)));
  if (!assistants.length) {
    notify("This server serves no assistant.", "info");
    return;
  }
  const [wantedAssistant, wantedThread] = location.hash.slice(1).split("/").map((part) => decodeURIComponent(part));
  const known = assistants.some((item) => item.assistant_id === wantedAssistant);
  await selectAssistant(known ? wantedAssistant : assistants[0].assistant_id, known ? wantedThread || null : null);
}

setUnauthorizedHandler((detail) => {
  forgetKey();
  askKey(`The server refused the key: ${detail}`).then(() => guarded(boot));
});

on("thread-created", async (threadId) => {
  await refreshThreads();
  for (const item of $("threads").querySelectorAll(".thread")) item.classList.toggle("selected", item.dataset.threadId === threadId);
});
on("run-started", async (threadId) => {
  followNewest();
  await guarded(refreshThreads); // the thread is busy now
});
on("run-checkpoint", (threadId, checkpoint) => guarded(() => addCheckpoint(threadId, checkpoint)));
on("run-finished", async (threadId) => {
  await guarded(refreshThreads);
  if (app.threadId === threadId) await guarded(() => selectThread(threadId, { keepRun: true }));
});
on("state-edited", async () => {
  await guarded(refreshThreads);
});

$("assistant").addEventListener("change", (event) => guarded(() => selectAssistant(event.target.value)));
$("new-thread").addEventListener("click", () => newThread());
$("cancel-run").addEventListener("click", () => guarded(cancelRun));
$("change-key").addEventListener("click", () => askKey().then(() => guarded(boot)));
$("notice-close").addEventListener("click", closeNotice);
$("timeline").addEventListener("keydown", onTimelineKey);

let booted = false;

// the server answers again: what it may have missed is read anew (a run of this page that was
// cut off ended on the server meanwhile); a page that never loaded loads now
onBack(async () => {
  if (!booted) await start();
  else if (!app.run) {
    await guarded(refreshThreads);
    if (app.threadId) await guarded(() => selectThread(app.threadId));
  }
});

async function start() {
  document.body.dataset.ready = "loading";
  await guarded(boot);
  booted = app.assistant !== null;
  document.body.dataset.ready = "yes";
}

start();
