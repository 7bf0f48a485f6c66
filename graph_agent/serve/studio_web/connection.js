// Whether the server answers. A request that cannot reach it says which server is gone; the
// page then asks the server again, waiting longer each time, until it answers: the notice
// goes, and what waited for the server (a message being sent, the panels) carries on.

import { dismiss, notify, showing } from "./state.js";

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
  probe(FIRST_WAIT_MS, true);
}

/** Ask the server again after `wait` ms, until it answers. The outage's notice is shown when
 * it begins, and its countdown updated while it is still the notice shown: another problem
 * told meanwhile stays in view. */
async function probe(wait, first = false) {
  if (first || showing("offline")) notify(`Cannot reach the server at ${serverName}: trying again in ${seconds(wait)}.`, "error", "offline");
  await new Promise((done) => setTimeout(done, wait));
  if (!(await answers())) {
    probe(Math.min(wait * 2, LONGEST_WAIT_MS));
    return;
  }
  const { resolve } = outage;
  outage = null;
  if (dismiss("offline")) notify(`The server at ${serverName} answers again.`, "info");
  resolve();
  for (const handler of comebacks) await comeback(handler);
}

/** One handler of the server's return: its failure is told, and the others run all the same. */
async function comeback(handler) {
  try {
    await handler();
  } catch (error) {
    if (error?.name !== "Unreachable") notify(`After the server came back: ${error?.message ?? String(error)}`);
  }
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
