// The /docs page's console: lists the operations of /openapi.json and sends one as the user
// fills it in (path and query parameters, a JSON body, the API key). Nothing is fetched from
// any host but this server.

const METHODS = ["get", "post", "put", "patch", "delete"];

/** Every operation of the document: {key, method, path, summary, params, body}. */
export function operations(document) {
  const found = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const media = operation.requestBody?.content?.["application/json"];
      found.push({
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        summary: operation.summary ?? "",
        params: operation.parameters ?? [],
        body: media ? resolve(document, media.schema) : null,
        public: Array.isArray(operation.security) && operation.security.length === 0,
      });
    }
  }
  return found;
}

function resolve(document, schema) {
  const ref = schema?.$ref;
  if (!ref) return schema;
  return document.components.schemas[ref.split("/").pop()];
}

/** A body to start from: the schema's required fields, each with its first allowed value. */
export function example(document, schema) {
  if (schema?.type === "array") return [example(document, resolve(document, schema.items))];
  const body = {};
  for (const name of schema?.required ?? []) {
    const field = resolve(document, schema.properties[name]);
    body[name] = field.enum ? field.enum[0] : field.type === "object" ? {} : "";
  }
  return body;
}

/** The request an operation makes with the given values: {method, url, headers, body}. */
export function buildRequest(operation, values) {
  let path = operation.path;
  const query = new URLSearchParams();
  for (const param of operation.params) {
    const value = values.params?.[param.name] ?? "";
    if (param.in === "path") {
      if (value === "") throw new Error(`fill in the path parameter ${param.name}`);
      path = path.replace(`{${param.name}}`, encodeURIComponent(value));
    } else if (param.in === "query" && value !== "") {
      query.set(param.name, value);
    }
  }
  const headers = {};
  let body;
  const text = (values.body ?? "").trim();
  if (operation.body && text) {
    JSON.parse(text); // a typo is reported here, not as the server's 400
    headers["Content-Type"] = "application/json";
    body = text;
  }
  if (values.key) headers["x-api-key"] = values.key;
  const search = query.toString();
  return { method: operation.method, url: search ? `${path}?${search}` : path, headers, body };
}

const $ = (id) => document.getElementById(id);
let document_ = null;
let current = null;

function show(operation) {
  current = operation;
  $("summary").textContent = operation.summary;
  const list = $("param-list");
  list.replaceChildren();
  for (const param of operation.params) {
    const label = document.createElement("label");
    label.textContent = `${param.name} (${param.in}${param.required ? ", required" : ""})`;
    if (param.description) label.title = param.description;
    const input = document.createElement("input");
    input.name = param.name;
    input.dataset.param = param.name;
    label.append(input);
    list.append(label);
  }
  $("params").hidden = operation.params.length === 0;
  $("body-row").hidden = !operation.body;
  $("body").value = operation.body
    ? JSON.stringify(example(document_, operation.body), null, 2)
    : "";
  $("key-row").hidden = operation.public || document.body.dataset.keys !== "yes";
  $("request-line").textContent = operation.key;
}

function values() {
  const params = {};
  for (const input of document.querySelectorAll("[data-param]")) {
    params[input.dataset.param] = input.value.trim();
  }
  const key = $("key-row").hidden ? "" : $("key").value.trim();
  return { params, body: $("body").value, key };
}

async function send(event) {
  event.preventDefault();
  const answer = $("response");
  $("answer").hidden = false;
  answer.classList.remove("error");
  let request;
  try {
    request = buildRequest(current, values());
  } catch (error) {
    $("status").textContent = "not sent";
    $("content-type").textContent = "";
    answer.textContent = String(error.message ?? error);
    answer.classList.add("error");
    return;
  }
  $("request-line").textContent = `${request.method} ${request.url}`;
  $("status").textContent = "…";
  answer.textContent = "";
  try {
    const response = await fetch(request.url, request);
    $("status").textContent = `${response.status} ${response.statusText}`;
    const type = response.headers.get("content-type") ?? "";
    $("content-type").textContent = type;
    const reader = response.body?.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (reader) { // an event stream shows as it comes
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      answer.textContent = text;
    }
    if (type.startsWith("application/json") && text) {
      answer.textContent = JSON.stringify(JSON.parse(text), null, 2);
    }
    answer.classList.toggle("error", response.status >= 400);
  } catch (error) {
    $("status").textContent = "failed";
    answer.textContent = String(error);
    answer.classList.add("error");
  }
  document.body.dataset.answered = String(Number(document.body.dataset.answered ?? 0) + 1);
}

// The operation a link's #hash names: "" (none) when its %-escapes are malformed ("#%").
export function wantedOperation(hash) {
  try {
    return decodeURIComponent(hash.slice(1));
  } catch {
    return "";
  }
}

async function start() {
  const response = await fetch("/openapi.json");
  document_ = await response.json();
  const found = operations(document_);
  const select = $("operation");
  for (const operation of found) {
    const option = document.createElement("option");
    option.value = operation.key;
    option.textContent = `${operation.key}: ${operation.summary}`;
    select.append(option);
  }
  select.addEventListener("change", () => show(found.find((op) => op.key === select.value)));
  $("form").addEventListener("submit", send);
  const wanted = wantedOperation(location.hash);
  const first = found.find((op) => op.key === wanted) ?? found[0];
  select.value = first.key;
  show(first);
  document.body.dataset.ready = "yes";
}

if (typeof window !== "undefined" && document.getElementById("form")) start();
