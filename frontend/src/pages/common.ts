import type { Agent, AccessMode } from "../api";
import { h, badge, clean, agentSite, agentClaim } from "../dom";

export function pageHeader(title: string, subtitle: string, ...actions: (Node | null)[]): HTMLElement {
  return h(
    "header",
    { class: "page-header" },
    h("div", null, h("h1", null, title), h("p", { class: "page-sub" }, subtitle)),
    actions.some(Boolean) ? h("div", { class: "page-actions" }, ...actions) : null,
  );
}

export function loading(text = "Loading…"): HTMLElement {
  return h("div", { class: "loading", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), text);
}

export function receiptStatusBadge(status: string): HTMLElement {
  const s = clean(status);
  if (s === "completed") return badge("Completed", "ok");
  if (s === "failed") return badge("Failed", "bad");
  if (s === "canceled") return badge("Canceled", "neutral");
  return badge(s || "unknown", "warn");
}

export function grantStatusBadge(status: string): HTMLElement {
  if (status === "active") return badge("Active", "ok");
  if (status === "revoked") return badge("Revoked", "bad");
  if (status === "expired") return badge("Expired", "neutral");
  return badge(clean(status) || "unknown", "warn");
}

export function accessModeBadge(mode: AccessMode | string): HTMLElement {
  if (mode === "read_write") return badge("read & write", "warn");
  if (mode === "read_only") return badge("read only", "info");
  return badge(clean(mode) || "?", "neutral");
}

/** receiptAgentCell is a compact, two-line agent label for tables. */
export function receiptAgentCell(a: Agent | undefined): HTMLElement {
  if (!a) return h("span", { class: "muted" }, "—");
  return h(
    "div",
    { class: "agent-cell" },
    h("div", { class: "agent-cell-origin" }, agentSite(a)),
    h("div", { class: "agent-cell-subject" }, agentClaim(a)),
  );
}

export function durationLabel(d: string): string {
  if (d === "1d") return "1 day";
  if (d === "30d") return "30 days";
  return "until revoked";
}
