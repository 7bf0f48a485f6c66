// The form that starts a run: a chat box where the assistant takes `messages` (an agent, or a
// graph with that key), fields from its input schema for its other keys (the server leaves a
// graph's private bookkeeping keys out of it). What was typed stays until the server took the
// run; a server that cannot be reached gets the run once it answers again.

import { whenBack } from "./connection.js";
import { clear, h } from "./dom.js";
import { setStatus, startRun } from "./run.js";
import { app, guarded } from "./state.js";

const $ = (id) => document.getElementById(id);

let waitingForServer = false; // a send is held until the server answers again

/** The form to start a run, for the assistant shown. */
export function renderForm() {
  const form = $("run-form");
  clear(form);
  if (!app.assistant) return;
  const schema = app.schemas?.input_schema ?? {};
  const properties = schema.properties ?? {};
  const isAgent = app.assistant.kind === "agent";
  const chat = isAgent || "messages" in properties;
  const fields = Object.entries(properties).filter(([key]) => !(chat && key === "messages")).map(([key, property]) => inputField(key, property));
  const open = !isAgent && schema.additionalProperties !== false;
  const more = open
    ? h("label", { class: "field wide" }, fields.length || chat ? "More keys (a JSON object)" : "Input (a JSON object of state keys)",
      h("textarea", { id: "input-json", rows: 3, placeholder: '{"key": "value"}', spellcheck: "false" }))
    : null;
  const inputs = [fields.length ? h("div", { class: "fields" }, fields) : null, more].filter(Boolean);
  if (chat) {
    const placeholder = `${isAgent ? "Ask the agent…" : "A message…"} (Enter sends, Shift+Enter for a new line)`;
    form.append(
      h("textarea", { id: "message", name: "message", rows: 2, placeholder, "aria-label": "Message" }),
      fields.length || more ? h("details", { class: "more-inputs" }, h("summary", { class: "small muted" }, "Other input keys"), inputs) : null,
      h("div", { class: "actions" }, h("button", { id: "send", type: "submit", class: "primary" }, "Send")),
    );
    form.querySelector("#message").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  } else {
    form.append(...inputs, h("div", { class: "actions" }, h("button", { id: "start-run", type: "submit", class: "primary" }, "Run")));
  }
  form.onsubmit = (event) => {
    event.preventDefault();
    guarded(() => submitForm(form));
  };
}

function inputField(key, property) {
  const type = property.type;
  const label = h("span", {}, key, property.description ? h("span", { class: "muted small" }, ` — ${property.description}`) : null);
  let control;
  if (type === "boolean") control = h("input", { type: "checkbox", "data-key": key, "data-type": type });
  else if (type === "integer" || type === "number") control = h("input", { type: "number", step: "any", "data-key": key, "data-type": type });
  else if (type === "array" || type === "object") control = h("textarea", { rows: 2, "data-key": key, "data-type": type, placeholder: type === "array" ? "[…] (JSON)" : "{…} (JSON)", spellcheck: "false" });
  else control = h("input", { type: "text", "data-key": key, "data-type": type ?? "any", placeholder: type === "string" ? "" : "text, or JSON" });
  return h("label", { class: `field${control.tagName === "TEXTAREA" ? " wide" : ""}` }, label, control);
}

function fieldValue(control) {
  const type = control.dataset.type;
  if (type === "boolean") return control.checked;
  const text = control.value;
  if (text.trim() === "") return undefined;
  if (type === "integer" || type === "number") return Number(text);
  if (type === "string") return text;
  try {
    return JSON.parse(text);
  } catch (error) {
    if (type === "array" || type === "object") throw new Error(`${control.dataset.key}: not valid JSON (${error.message})`);
    return text;
  }
}

/** The run's input from the form, or null when a chat box holds nothing to send. */
function formInput(form) {
  const input = {};
  const message = form.querySelector("#message")?.value.trim();
  if (message) input.messages = [{ type: "human", content: message }];
  for (const control of form.querySelectorAll("[data-key]")) {
    const value = fieldValue(control);
    if (value !== undefined) input[control.dataset.key] = value;
  }
  const extra = form.querySelector("#input-json")?.value.trim();
  if (extra) {
    let parsed;
    try {
      parsed = JSON.parse(extra);
    } catch (error) {
      throw new Error(`the input is not valid JSON: ${error.message}`);
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the input must be a JSON object of state keys");
    Object.assign(input, parsed);
  }
  const chat = form.querySelector("#message") !== null;
  return chat && !Object.keys(input).length ? null : input;
}

async function submitForm(form) {
  if (waitingForServer) return; // the held send goes with what the form holds then
  if (app.run) throw new Error("a run is still going on this page: wait for it, or cancel it");
  const input = formInput(form);
  if (!input) return;
  const box = form.querySelector("#message");
  try {
    await startRun({ input, onAccepted: () => box && (box.value = "") });
  } catch (error) {
    if (error?.name !== "Unreachable" || error.opened) throw error;
    // it never reached the server: the text stays, and goes once the server answers
    waitingForServer = true;
    setStatus("waiting for the server", "wait");
    await whenBack();
    waitingForServer = false;
    form.requestSubmit();
  }
}
