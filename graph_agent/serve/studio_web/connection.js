// Whether the server answers. A request that cannot reach it says which server is gone; the
// page then asks the server again, waiting longer each time, until it answers: the notice
// goes, and what waited for the server (a message being sent, the panels) carries on.

import { dismiss, notify } from "./state.js";

/** Where the API lives: the page is served at <root>/studio/, the API at <root>/. */
export const root = location.pathname.slice(0, location.pathname.lastIndexOf("/studio/"));

/** The server as a person names it: its address. */
export const serverName = `${location.origin}${root}`;

const FIRST_WAIT_MS = 500;
const LONGEST_WAIT_MS = 8000;

/** A request that never got an answer: the server is down, or the network between. */
export class Unreachable extends Error {
  /** `opened`: the answer had begun (a run's stream) when the connection went. */
  constructor(cause, { opened = false } = {}) {
    const what = opened ? "Lost the connection to" : "Cannot reach";
    super(`${what} the server at ${serverName} (${cause?.message || "no answer"})`);
    this.name = "Unreachable";
    this.opened = opened;
  }
}

let outage = null; // while the server does not answer: {promise, resolve}
const comebacks = [];

/** Resolves once the server answers (at once when it is not known to be gone). */
export function whenBack() {
  return outage ? outage.promise : Promise.resolve();
}

/** Call `handler` each time the server answers again after it was gone. */
export function onBack(handler) {
  comebacks.push(handler);
}

/** A request got no answer: say which server is gone, and ask it again until it answers. */
export function lost() {
  if (outage) return;
  let resolve;
  const promise = new Promise((done) => {
    resolve = done;
  });
  outage = { promise, resolve };
  probe(FIRST_WAIT_MS);
}

async function probe(wait) {
  notify(`Cannot reach the server at ${serverName}: trying again in ${seconds(wait)}.`, "error", "offline");
  await new Promise((done) => setTimeout(done, wait));
  if (!(await answers())) {
    probe(Math.min(wait * 2, LONGEST_WAIT_MS));
    return;
  }
  const { resolve } = outage;
  outage = null;
  dismiss("offline");
  notify(`The server at ${serverName} answers again.`, "info");
  resolve();
  for (const handler of comebacks) await handler();
}

async function answers() {
  try {
    return (await fetch(`${root}/ok`, { cache: "no-store" })).ok;
  } catch {
    return false;
  }
}

function seconds(ms) {
  return ms < 1000 ? `${ms / 1000} s` : `${Math.round(ms / 1000)} s`;
}
