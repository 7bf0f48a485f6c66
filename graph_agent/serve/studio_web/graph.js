// The assistant's graph as a picture (the server draws it: GET /assistants/{id}/graph?format=svg)
// and the run on it: the node running now, the ones that ran, the one that failed or paused.

import { call, p } from "./api.js";
import { clear, h } from "./dom.js";

const box = () => document.getElementById("graph");
const path = () => document.getElementById("path");

/** Draw the graph of `assistantId`, subgraphs opened as clusters. */
export async function loadGraph(assistantId) {
  const svg = await call("GET", p`/assistants/${assistantId}/graph` + "?format=svg&xray=true");
  const holder = box();
  holder.innerHTML = svg; // the server's own SVG: node names escaped there, nothing scripted
  const drawn = holder.querySelector("svg");
  const layout = drawn?.dataset.layout === "graphviz" ? "drawn by Graphviz" : "built-in layout";
  document.getElementById("graph-layout").textContent = layout;
  reset();
}

function find(node) {
  const holder = box();
  const selector = (name) => `[data-${name}="${CSS.escape(node)}"]`;
  return holder.querySelector(selector("node")) ?? holder.querySelector(selector("cluster"));
}

const tasks = new Map(); // the tasks running now: task id -> node

/** Forget the last run's marks. */
export function reset() {
  tasks.clear();
  for (const item of box().querySelectorAll(".running, .visited, .failed, .paused")) {
    item.classList.remove("running", "visited", "failed", "paused");
    delete item.dataset.visits;
  }
  clear(path());
}

/** Task `taskId` of `node` started: the node is lit until its last running task ends (tasks
 * of one step run together, so parallel branches are lit together), and it joins the path. */
export function taskStarted(taskId, node) {
  tasks.set(taskId, node);
  const item = find(node);
  if (item && !item.classList.contains("running")) {
    item.classList.add("running", "visited");
    item.dataset.visits = String(Number(item.dataset.visits ?? 0) + 1);
  }
  const steps = path();
  if (steps.lastElementChild?.dataset.node !== node) steps.append(h("li", { dataset: { node } }, node));
}

/** Task `taskId` of `node` ended (`failed`: it raised). */
export function taskEnded(taskId, node, failedTask = false) {
  tasks.delete(taskId);
  const item = find(node);
  if (item && ![...tasks.values()].includes(node)) item.classList.remove("running");
  if (failedTask) item?.classList.add("failed");
}

/** The run is over: nothing runs any more. */
export function idle() {
  tasks.clear();
  for (const item of box().querySelectorAll(".running")) item.classList.remove("running");
}

export function failed(node) {
  idle();
  find(node)?.classList.add("failed");
}

export function paused(node) {
  idle();
  find(node)?.classList.add("paused");
}
