// Small DOM helpers and the views the panels share: a collapsible JSON tree, a conversation,
// and what changed between two states. Text always goes in as text, never as HTML.

/** h("div", {class: "x", onclick: f}, child, ...): an element; strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** An id short enough to read, keeping the part that tells it from its neighbours: a
 * checkpoint id is its time in microseconds (14 hex digits) then the tag of the process that
 * made it, shared by all of a thread's checkpoints, so the time's low digits; any other id
 * (a random UUID) its ends. The whole id is in the element's title. */
export function shortId(id) {
  if (!id) return "";
  const timed = /^([0-9a-f]{14})-[0-9a-f]+$/.exec(id);
  if (timed) return `…${timed[1].slice(-8)}`;
  return id.length > 12 ? `${id.slice(0, 4)}…${id.slice(-6)}` : id;
}

export function time(text) {
  if (!text) return "";
  const when = new Date(text);
  return Number.isNaN(when.getTime()) ? text : when.toLocaleTimeString();
}

function summaryOf(value) {
  if (Array.isArray(value)) return `[${value.length} item${value.length === 1 ? "" : "s"}]`;
  const keys = Object.keys(value);
  return `{${keys.length} key${keys.length === 1 ? "" : "s"}}`;
}

function leaf(value) {
  const kind = value === null ? "null" : typeof value;
  const text = kind === "string" ? JSON.stringify(value) : String(value);
  return h("span", { class: `json-${kind}` }, text);
}

/** A JSON value as nested <details>: objects and arrays fold, `open` levels start open. */
export function jsonTree(value, open = 1, label = null) {
  const name = label === null ? null : h("span", { class: "json-key" }, `${label}: `);
  if (value === null || typeof value !== "object") {
    return h("div", { class: "json-row" }, name, leaf(value));
  }
  const entries = Array.isArray(value) ? value.map((item, i) => [i, item]) : Object.entries(value);
  return h(
    "details",
    { class: "json", open: open > 0 },
    h("summary", {}, name, h("span", { class: "json-summary" }, summaryOf(value))),
    h("div", { class: "json-body" }, entries.map(([key, item]) => jsonTree(item, open - 1, key))),
  );
}

const ROLE = { human: "user", user: "user", ai: "assistant", AIMessageChunk: "assistant", assistant: "assistant", system: "system", tool: "tool" };

export function roleOf(message) {
  return ROLE[message?.type ?? message?.role] ?? "other";
}

export function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === "string" ? part : part?.text ?? "")).join("");
  return content === undefined || content === null ? "" : JSON.stringify(content);
}

export function usageText(usage) {
  if (!usage) return "";
  const input = usage.prompt_tokens ?? usage.input_tokens;
  const output = usage.completion_tokens ?? usage.output_tokens;
  const total = usage.total_tokens ?? (input ?? 0) + (output ?? 0);
  return `${total} tokens (${input ?? "?"} in · ${output ?? "?"} out)`;
}

function argumentsText(args) {
  if (args && typeof args === "object" && !Array.isArray(args)) {
    return Object.entries(args).map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`).join(", ");
  }
  return typeof args === "string" ? args : JSON.stringify(args);
}

/** One tool call, folded: its name and arguments; its result inside once known (`result`
 * undefined: results are shown elsewhere). */
export function toolCall(call, result) {
  const status = result ? (result.status === "error" ? "error" : "done") : result === null ? "pending" : "called";
  return h(
    "details",
    { class: `tool-call ${status}`, dataset: { callId: call.id ?? "", tool: call.name ?? "" } },
    h("summary", {}, h("span", { class: "tool-name" }, call.name), h("span", { class: "tool-args" }, `(${argumentsText(call.args ?? call.arguments)})`),
      h("span", { class: "tool-status" }, { pending: "…", error: "failed", done: "✓", called: "" }[status])),
    h("div", { class: "tool-body" },
      h("div", { class: "small muted" }, "arguments"), jsonTree(call.args ?? call.arguments ?? {}, 2),
      result ? [h("div", { class: "small muted" }, "result"), h("pre", { class: "tool-result" }, textOf(result.content))] : null,
      result === null ? h("div", { class: "small muted" }, "no result yet") : null),
  );
}

/** Messages as a conversation: tool results shown inside the call that asked for them. */
export function conversation(messages, { showSystem = false } = {}) {
  const results = new Map();
  for (const message of messages) if (roleOf(message) === "tool") results.set(message.tool_call_id, message);
  const answered = new Set();
  const items = [];
  for (const message of messages) {
    const role = roleOf(message);
    if (role === "system") {
      if (showSystem) items.push(h("details", { class: "msg system" }, h("summary", {}, "system"), h("div", { class: "content" }, textOf(message.content))));
      continue;
    }
    if (role === "tool") {
      if (!answered.has(message.tool_call_id)) items.push(h("div", { class: "msg tool" }, h("div", { class: "who" }, `tool ${message.name ?? ""}`), h("div", { class: "content" }, textOf(message.content))));
      continue;
    }
    const calls = message.tool_calls ?? [];
    for (const call of calls) if (results.has(call.id)) answered.add(call.id);
    const text = textOf(message.content);
    items.push(
      h("div", { class: `msg ${role === "user" ? "human" : role === "assistant" ? "ai" : "other"}`, dataset: { id: message.id ?? "" } },
        h("div", { class: "who" }, role === "user" ? "you" : role === "assistant" ? "assistant" : role),
        text ? h("div", { class: "content" }, text) : null,
        calls.map((call) => toolCall(call, results.get(call.id) ?? null)),
        message.usage_metadata ? h("div", { class: "usage small muted" }, usageText(message.usage_metadata)) : null),
    );
  }
  return items;
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function short(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 140 ? `${text.slice(0, 140)}…` : text;
}

function messageLine(sign, message) {
  const calls = (message.tool_calls ?? []).map((call) => `${call.name}(${argumentsText(call.args)})`).join(", ");
  const text = textOf(message.content) || calls;
  return h("li", { class: `diff-${sign === "+" ? "add" : sign === "-" ? "del" : "mod"}` }, `${sign} ${roleOf(message)}: ${short(text)}`);
}

/** What changed from `before` to `after` (two states' values), key by key. */
export function diff(before, after) {
  const lines = [];
  const keys = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])];
  for (const key of keys) {
    const had = before && key in before;
    const has = after && key in after;
    if (had && has && same(before[key], after[key])) continue;
    const old = had ? before[key] : undefined;
    const now = has ? after[key] : undefined;
    const messages = Array.isArray(now) && now.some((item) => item && typeof item === "object" && "type" in item && "content" in item);
    if (messages && (Array.isArray(old) || old === undefined)) {
      const earlier = new Map((old ?? []).map((item) => [item?.id, item]));
      const later = new Set(now.map((item) => item?.id));
      const changes = [];
      for (const item of now) {
        if (!earlier.has(item?.id)) changes.push(messageLine("+", item));
        else if (!same(earlier.get(item.id), item)) changes.push(messageLine("~", item));
      }
      for (const item of old ?? []) if (!later.has(item?.id)) changes.push(messageLine("-", item));
      lines.push(h("li", { class: "diff-key", dataset: { key } }, h("span", { class: "json-key" }, key), h("ul", {}, changes)));
      continue;
    }
    const sign = !had ? "added" : !has ? "removed" : "changed";
    lines.push(
      h("li", { class: `diff-key diff-${sign}`, dataset: { key } },
        h("span", { class: "json-key" }, key), " ",
        had ? h("span", { class: "diff-old" }, short(old)) : null,
        had && has ? " → " : null,
        has ? h("span", { class: "diff-new" }, short(now)) : null),
    );
  }
  return lines.length ? h("ul", { class: "diff" }, lines) : h("p", { class: "muted small" }, "No change in the state.");
}
