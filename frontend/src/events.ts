// Live updates from GET /api/events. If the stream cannot be held open (for example a webview
// whose asset server buffers responses), pages fall back to polling through the "poll" event;
// after a reconnect "resync" tells them to reload what they may have missed.

import type { ConsentRequest, Grant, Reachability, ReceiptSummary } from "./api";

export interface ConsentEvent {
  pending: number;
  request?: ConsentRequest;
  kind: "added" | "decided" | "expired";
}

export interface EventMap {
  consent: ConsentEvent;
  grant: Grant;
  receipt: ReceiptSummary;
  policy: Record<string, never>;
  reachability: Reachability;
  poll: null;
  resync: null;
  connection: ConnectionState;
}

export type ConnectionState = "connecting" | "live" | "polling";

type Handler<K extends keyof EventMap> = (data: EventMap[K]) => void;

const handlers = new Map<keyof EventMap, Set<Handler<keyof EventMap>>>();
let source: EventSource | null = null;
let state: ConnectionState = "connecting";
let pollTimer: number | undefined;
let everOpened = false;
let stopped = false;

const POLL_MS = 5000;

export function on<K extends keyof EventMap>(event: K, fn: Handler<K>): () => void {
  let set = handlers.get(event);
  if (!set) {
    set = new Set();
    handlers.set(event, set);
  }
  set.add(fn as Handler<keyof EventMap>);
  return () => set!.delete(fn as Handler<keyof EventMap>);
}

function emit<K extends keyof EventMap>(event: K, data: EventMap[K]): void {
  for (const fn of handlers.get(event) ?? []) {
    try {
      fn(data);
    } catch (e) {
      console.error("event handler", event, e);
    }
  }
}

function setState(s: ConnectionState): void {
  if (s === state || stopped) return;
  state = s;
  if (s === "polling" && pollTimer === undefined) {
    pollTimer = window.setInterval(() => emit("poll", null), POLL_MS);
  } else if (s === "live" && pollTimer !== undefined) {
    window.clearInterval(pollTimer);
    pollTimer = undefined;
  }
  emit("connection", s);
}

export function connectionState(): ConnectionState {
  return state;
}

/** stopEvents closes the stream for good (after the session is gone). */
export function stopEvents(): void {
  stopped = true;
  source?.close();
  source = null;
  if (pollTimer !== undefined) window.clearInterval(pollTimer);
  pollTimer = undefined;
}

export function startEvents(): void {
  if (stopped) return;
  if (source || typeof EventSource === "undefined") {
    if (!source) setState("polling");
    return;
  }
  const es = new EventSource("/api/events");
  source = es;
  // No open stream within a few seconds: poll until it opens.
  const openTimer = window.setTimeout(() => {
    if (es.readyState !== EventSource.OPEN) setState("polling");
  }, 4000);
  es.addEventListener("open", () => {
    window.clearTimeout(openTimer);
    const reopened = everOpened;
    everOpened = true;
    setState("live");
    if (reopened) emit("resync", null);
  });
  es.addEventListener("error", () => {
    if (es.readyState === EventSource.CLOSED) {
      // The browser gave up (e.g. a non-stream answer): retry later, poll meanwhile.
      source = null;
      setState("polling");
      window.setTimeout(startEvents, 15000);
    } else {
      setState("polling");
    }
  });
  for (const name of ["consent", "grant", "receipt", "policy", "reachability"] as const) {
    es.addEventListener(name, (ev) => {
      let data: unknown;
      try {
        data = JSON.parse((ev as MessageEvent<string>).data || "{}");
      } catch {
        return;
      }
      emit(name, data as EventMap[typeof name]);
    });
  }
}
