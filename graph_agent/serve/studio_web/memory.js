// The memory browser: the server's long-term memory (its store) over the /store routes. Lists
// the namespaces (a prefix narrows them), the items of one (a page at a time, newest first), an
// item's value; searches with a filter and, when the server's store has an index, a query; puts
// and deletes items. Errors are the server's own words, shown in the dialog.

import { call } from "./api.js";
import { clear, h, jsonTree, time } from "./dom.js";

const $ = (id) => document.getElementById(id);
const NAMESPACES_PAGE = 50;
const ITEMS_PAGE = 10;

const memory = {
  /** The namespaces listed (arrays of labels), and how many were asked for so far. */
  namespaces: [],
  namespaceOffset: 0,
  /** What the items list shows: {prefix, filter, query} and the page's offset. */
  search: null,
  offset: 0,
  /** The item shown: {namespace, key}, or null. */
  item: null,
};

/** Labels joined by periods, as GET /store/items names a namespace (no label holds one). */
const dotted = (namespace) => namespace.join(".");

/** "a.b" → ["a", "b"]; "" → []. A label may not be empty. */
function labels(text, what) {
  const trimmed = text.trim();
  if (!trimmed) return [];
  const found = trimmed.split(".");
  if (found.some((label) => !label)) throw new Error(`${what}: labels joined by periods, e.g. users.u1`);
  return found;
}

function json(text, what) {
  if (!text.trim()) return null;
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not JSON: ${error.message}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error(`${what} must be a JSON object, e.g. {"kind": "fact"}`);
  return parsed;
}

function problem(text) {
  const box = $("memory-error");
  box.textContent = text;
  box.hidden = !text;
}

/** Run `action`, showing what went wrong in the dialog (the server's detail, or the form's). */
async function shown(action) {
  try {
    problem("");
    return await action();
  } catch (error) {
    if (error?.name !== "Unreachable") problem(error?.message ?? String(error));
    return undefined;
  }
}

function dialog() {
  const field = (id, label, attrs = {}) => h("label", { class: "memory-field" }, label, h("input", { id, type: "text", autocomplete: "off", ...attrs }));
  return h("dialog", { id: "memory-dialog", class: "memory", "aria-label": "Memory" },
    h("div", { class: "panel-head" },
      h("h2", {}, "Memory"),
      h("span", { class: "muted small" }, "the server's store, shared by every thread"),
      h("span", { class: "spacer" }),
      h("button", { id: "memory-close", type: "button", class: "quiet", "aria-label": "Close the memory browser", title: "Close" }, "×")),
    h("form", { id: "memory-search-form", class: "memory-search" },
      field("memory-prefix", "Namespace prefix", { placeholder: "users.u1" }),
      field("memory-filter", "Filter", { placeholder: '{"kind": "fact"}' }),
      field("memory-query", "Query", { placeholder: "by meaning (the store needs an index)" }),
      h("button", { id: "memory-search", type: "submit", class: "primary" }, "Search")),
    h("p", { id: "memory-error", class: "run-error", role: "alert", hidden: true }),
    h("div", { class: "memory-body" },
      h("section", { class: "memory-column", "aria-label": "Namespaces" },
        h("h3", {}, "Namespaces"),
        h("ul", { id: "memory-namespaces", class: "memory-list" }),
        h("button", { id: "memory-more", type: "button", class: "quiet", hidden: true }, "More")),
      h("section", { class: "memory-column", "aria-label": "Items" },
        h("h3", {}, "Items ", h("span", { id: "memory-where", class: "muted small" })),
        h("ul", { id: "memory-items", class: "memory-list" }),
        h("div", { class: "memory-pager" },
          h("button", { id: "memory-prev", type: "button", class: "quiet", disabled: true }, "‹ Newer"),
          h("span", { id: "memory-page", class: "muted small" }),
          h("button", { id: "memory-next", type: "button", class: "quiet", disabled: true }, "Older ›"))),
      h("section", { class: "memory-column memory-detail", "aria-label": "Item" },
        h("h3", {}, "Item"),
        h("div", { id: "memory-item" }, h("p", { class: "muted small" }, "Pick an item.")),
        h("form", { id: "memory-put-form", class: "memory-put" },
          h("h3", {}, "Put an item"),
          field("memory-put-namespace", "Namespace", { placeholder: "users.u1", required: true }),
          field("memory-put-key", "Key", { placeholder: "profile", required: true }),
          h("label", { class: "memory-field" }, "Value (a JSON object)",
            h("textarea", { id: "memory-put-value", rows: 4, placeholder: '{"text": "likes green tea"}', required: true })),
          field("memory-put-ttl", "TTL in minutes (empty: the server's default)", { inputmode: "decimal" }),
          h("button", { id: "memory-put", type: "submit" }, "Put")))));
}

// ---------------------------------------------------------------- namespaces

async function loadNamespaces({ more = false } = {}) {
  const prefix = labels($("memory-prefix").value, "Namespace prefix");
  if (!more) {
    memory.namespaces = [];
    memory.namespaceOffset = 0;
  }
  const found = await call("POST", "/store/namespaces", { prefix, limit: NAMESPACES_PAGE + 1, offset: memory.namespaceOffset });
  const page = found.namespaces.slice(0, NAMESPACES_PAGE);
  memory.namespaces.push(...page);
  memory.namespaceOffset += page.length;
  $("memory-more").hidden = found.namespaces.length <= NAMESPACES_PAGE;
  const list = $("memory-namespaces");
  clear(list, memory.namespaces.map((namespace) => h("li", {},
    h("button", {
      type: "button",
      class: "memory-namespace",
      dataset: { namespace: dotted(namespace) },
      onclick: () => shown(() => showItems({ prefix: namespace, filter: null, query: null })),
    }, dotted(namespace)))));
  if (!memory.namespaces.length) list.append(h("li", { class: "muted small empty" }, prefix.length ? "No namespace under this prefix." : "The store is empty."));
  markNamespace();
}

function markNamespace() {
  const selected = memory.search && !memory.search.filter && !memory.search.query ? dotted(memory.search.prefix) : null;
  for (const button of $("memory-namespaces").querySelectorAll(".memory-namespace")) button.classList.toggle("selected", button.dataset.namespace === selected);
}

// ---------------------------------------------------------------- items

/** The items `search` finds, from `offset`: newest first, or best first with a query. */
async function showItems(search, offset = 0) {
  const body = { namespace_prefix: search.prefix, limit: ITEMS_PAGE + 1, offset, refresh_ttl: false };
  if (search.filter) body.filter = search.filter;
  if (search.query) body.query = search.query;
  const found = (await call("POST", "/store/items/search", body)).items;
  memory.search = search;
  memory.offset = offset;
  const page = found.slice(0, ITEMS_PAGE);
  const list = $("memory-items");
  clear(list, page.map((item) => h("li", {},
    h("button", {
      type: "button",
      class: "memory-item",
      dataset: { namespace: dotted(item.namespace), key: item.key },
      onclick: () => shown(() => showItem(item.namespace, item.key, item.score)),
    },
    h("span", { class: "memory-key" }, item.key),
    dotted(item.namespace) !== dotted(search.prefix) ? h("span", { class: "muted small" }, dotted(item.namespace)) : null,
    typeof item.score === "number" ? h("span", { class: "chip memory-score" }, item.score.toFixed(3)) : null,
    h("span", { class: "muted small memory-preview" }, preview(item.value))))));
  if (!page.length) list.append(h("li", { class: "muted small empty" }, offset ? "No more items." : "No item found."));
  const said = [search.prefix.length ? dotted(search.prefix) : "everywhere", search.filter ? "filtered" : null, search.query ? `by “${search.query}”` : null];
  $("memory-where").textContent = said.filter(Boolean).join(" · ");
  $("memory-page").textContent = page.length ? `${offset + 1}–${offset + page.length}` : "";
  $("memory-prev").disabled = offset === 0;
  $("memory-next").disabled = found.length <= ITEMS_PAGE;
  markNamespace();
  markItem();
}

function preview(value) {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

function markItem() {
  const shownItem = memory.item;
  for (const button of $("memory-items").querySelectorAll(".memory-item")) {
    button.classList.toggle("selected", !!shownItem && button.dataset.key === shownItem.key && button.dataset.namespace === dotted(shownItem.namespace));
  }
}

/** One item as it is now (read without restarting its TTL). */
async function showItem(namespace, key, score = null) {
  const query = new URLSearchParams({ namespace: dotted(namespace), key, refresh_ttl: "false" });
  const item = await call("GET", `/store/items?${query}`);
  const box = $("memory-item");
  memory.item = item ? { namespace, key } : null;
  markItem();
  if (!item) {
    clear(box, h("p", { class: "muted small" }, `${dotted(namespace)} / ${key} is gone (deleted, or expired).`));
    return;
  }
  const remove = h("button", { id: "memory-delete", type: "button", class: "danger" }, "Delete");
  remove.addEventListener("click", () => {
    if (!remove.classList.contains("armed")) {
      remove.classList.add("armed");
      remove.textContent = "Delete it? Click again";
      return;
    }
    shown(() => deleteItem(namespace, key));
  });
  clear(box,
    h("dl", { class: "memory-facts" },
      h("dt", {}, "namespace"), h("dd", { class: "memory-item-namespace" }, dotted(namespace)),
      h("dt", {}, "key"), h("dd", { class: "memory-item-key" }, key),
      typeof score === "number" ? [h("dt", {}, "score"), h("dd", {}, score.toFixed(3))] : null,
      h("dt", {}, "created"), h("dd", { title: item.created_at }, time(item.created_at)),
      h("dt", {}, "updated"), h("dd", { title: item.updated_at }, time(item.updated_at))),
    h("div", { class: "memory-value" }, jsonTree(item.value, 2)),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "quiet", onclick: () => edit(namespace, key, item.value) }, "Edit"),
      remove));
}

function edit(namespace, key, value) {
  $("memory-put-namespace").value = dotted(namespace);
  $("memory-put-key").value = key;
  $("memory-put-value").value = JSON.stringify(value, null, 2);
  $("memory-put-value").focus();
}

async function deleteItem(namespace, key) {
  await call("DELETE", "/store/items", { namespace, key });
  memory.item = null;
  clear($("memory-item"), h("p", { class: "muted small" }, `Deleted ${dotted(namespace)} / ${key}.`));
  await loadNamespaces();
  if (memory.search) await showItems(memory.search, memory.offset);
}

async function putItem() {
  const namespace = labels($("memory-put-namespace").value, "Namespace");
  if (!namespace.length) throw new Error("Namespace: give at least one label, e.g. users.u1");
  const key = $("memory-put-key").value.trim();
  const value = json($("memory-put-value").value, "Value");
  if (!key || value === null) throw new Error("Put needs a key and a value");
  const body = { namespace, key, value };
  const ttl = $("memory-put-ttl").value.trim();
  if (ttl) body.ttl = Number(ttl);
  await call("PUT", "/store/items", body);
  await loadNamespaces();
  await showItems({ prefix: namespace, filter: null, query: null });
  await showItem(namespace, key);
}

async function search() {
  const prefix = labels($("memory-prefix").value, "Namespace prefix");
  const filter = json($("memory-filter").value, "Filter");
  const query = $("memory-query").value.trim() || null;
  await loadNamespaces();
  await showItems({ prefix, filter, query });
}

/** Open the browser on the store's namespaces. */
export async function openMemory() {
  const box = $("memory-dialog");
  if (!box.open) box.showModal();
  await shown(loadNamespaces);
}

function wire() {
  document.body.append(dialog());
  $("open-memory").addEventListener("click", () => openMemory());
  $("memory-close").addEventListener("click", () => $("memory-dialog").close());
  $("memory-more").addEventListener("click", () => shown(() => loadNamespaces({ more: true })));
  $("memory-prev").addEventListener("click", () => shown(() => showItems(memory.search, Math.max(0, memory.offset - ITEMS_PAGE))));
  $("memory-next").addEventListener("click", () => shown(() => showItems(memory.search, memory.offset + ITEMS_PAGE)));
  $("memory-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    shown(search);
  });
  $("memory-put-form").addEventListener("submit", (event) => {
    event.preventDefault();
    shown(putItem);
  });
}

wire();
