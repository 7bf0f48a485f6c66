// The server's HTTP API, as the Studio uses it: JSON requests with the API key, and run
// streams read from a fetch body (EventSource can neither POST nor send headers). A request
// that gets no answer is an Unreachable error naming the server (see connection.js).

import { lost, root, Unreachable } from "./connection.js";

const KEY_NAME = "graph-agent-studio-key";

/** A refused request: the server's {detail, code} and the HTTP status. */
export class ApiError extends Error {
  constructor(status, detail, code) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

/** The key this tab uses: this session's, else the one remembered on this device. */
export function storedKey() {
  return sessionStorage.getItem(KEY_NAME) || localStorage.getItem(KEY_NAME) || "";
}

export function storeKey(key, remember) {
  sessionStorage.setItem(KEY_NAME, key);
  if (remember) localStorage.setItem(KEY_NAME, key);
  else localStorage.removeItem(KEY_NAME);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_NAME);
  localStorage.removeItem(KEY_NAME);
}

function headers(json) {
  const sent = {};
  if (json) sent["content-type"] = "application/json";
  const key = storedKey();
  if (key) sent["x-api-key"] = key;
  return sent;
}

let onUnauthorized = null;

/** What to do when the server refuses the key (401): ask for another one. */
export function setUnauthorizedHandler(handler) {
  onUnauthorized = handler;
}

async function refused(response) {
  let detail = response.statusText;
  let code;
  try {
    const body = await response.json();
    detail = body.detail ?? detail;
    code = body.code;
  } catch {
    // not JSON: keep the status text
  }
  if (response.status === 401 && onUnauthorized) onUnauthorized(detail);
  return new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail), code);
}

/** fetch(), where no answer at all is an Unreachable error (and the page starts asking the
 * server again). */
async function reach(path, options) {
  try {
    return await fetch(root + path, options);
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    lost();
    throw new Unreachable(error);
  }
}

/** One JSON request; resolves to the parsed body (null for 204), rejects with ApiError (or
 * Unreachable). */
export async function call(method, path, body) {
  const response = await reach(path, {
    method,
    headers: headers(body !== undefined),
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw await refused(response);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

/**
 * POST a run and hand each server-sent event to onEvent(event, data, id) as it arrives;
 * `onOpen()` once the server accepted the run. Resolves when the stream ends (the run ended,
 * or paused for a human).
 */
export async function stream(path, body, onEvent, { signal, onOpen } = {}) {
  const response = await reach(path, {
    method: "POST",
    headers: { ...headers(true), accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await refused(response);
  onOpen?.();
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await readMore(reader);
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      dispatch(frame, onEvent);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

async function readMore(reader) {
  try {
    return await reader.read();
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    lost();
    throw new Unreachable(error, { opened: true });
  }
}

function dispatch(frame, onEvent) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (!data.length) return;
  const text = data.join("\n");
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // a plain-text event: hand it on as it is
  }
  onEvent(event, parsed, id);
}

/** Path segments are user data (thread ids may be anything): always escaped. */
export function p(strings, ...values) {
  return strings.reduce((out, part, i) => out + part + (i < values.length ? encodeURIComponent(values[i]) : ""), "");
}
