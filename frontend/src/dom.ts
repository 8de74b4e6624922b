// Small DOM helpers. Data from the API is only ever put into the page as text nodes or
// attribute values (never innerHTML), so agent-supplied strings cannot become markup (C9, S10).

type Child = Node | string | number | null | undefined | false | Child[];

export interface Props {
  class?: string;
  [attr: string]: unknown;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props?: Props | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith("on") && typeof value === "function") {
        el.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
      } else if (key === "class") {
        el.className = String(value);
      } else if (key === "value" && "value" in el) {
        (el as HTMLInputElement).value = String(value);
      } else if (key === "checked" || key === "disabled" || key === "selected") {
        (el as unknown as Record<string, boolean>)[key] = Boolean(value);
      } else if (key === "style") {
        // CSP forbids inline styles; use classes instead.
        throw new Error("inline style is not allowed");
      } else {
        el.setAttribute(key, value === true ? "" : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(parent: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(parent, c);
    else if (c instanceof Node) parent.appendChild(c);
    else parent.appendChild(document.createTextNode(String(c)));
  }
}

export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

// Bidi overrides/isolates and marks: they can make "moc.knab" read as "bank.com".
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
// ANSI escape sequences (CSI and OSC) from subprocess output (S10).
const ANSI = /\u001B(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001B]*(?:\u0007|\u001B\\)?|[@-Z\\-_])/g;
// C0/C1 controls except tab and newline.
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;

/** clean makes an untrusted string safe to read: no escapes, controls or bidi tricks. */
export function clean(s: unknown): string {
  if (s === null || s === undefined) return "";
  return String(s).replace(ANSI, "").replace(CONTROL, "").replace(BIDI, "");
}

export const AGENT_MAX = 200;

/**
 * untrusted renders an agent-supplied string: cleaned, single-line, truncated with the
 * (cleaned) full value as a tooltip.
 */
export function untrusted(s: unknown, max = AGENT_MAX, cls = ""): HTMLSpanElement {
  const full = clean(s).replace(/[\t\n]+/g, " ");
  const shown = full.length > max ? full.slice(0, max) + "…" : full;
  const span = h("span", { class: ("untrusted " + cls).trim() }, shown);
  if (full !== shown) span.title = full.length > 2000 ? full.slice(0, 2000) + "…" : full;
  return span;
}

/** asciiURL normalises a URL (IDN host to punycode, no trailing slash); other text is only cleaned. */
export function asciiURL(s: string): string {
  try {
    const u = new URL(clean(s));
    return (u.origin + u.pathname + u.search).replace(/\/$/, "");
  } catch {
    return clean(s);
  }
}

/** The agent fields the owner reads (docs/admin-api.md, Agent): computed once by the node. */
export interface AgentText {
  issuer: string;
  subject: string;
  issuerOrigin: string;
  site?: string;
  siteName?: string;
  host?: string;
  claim?: string;
}

/**
 * agentOrigin is the issuer's scheme and host as the owner reads them: the node's host, cut only
 * from the left so that the registrable domain at its end is always whole (C13).
 */
export function agentOrigin(agent: AgentText): string {
  const origin = agent.issuerOrigin ? asciiURL(agent.issuerOrigin) : asciiURL(agent.issuer);
  if (!agent.host) return origin;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(origin)?.[0] ?? "";
  return scheme + clean(agent.host);
}

/** agentSite is the issuer's registrable domain as shown: in full, an IDN with its punycode. */
export function agentSite(agent: AgentText): string {
  return clean(agent.siteName || agent.site || agentOrigin(agent));
}

/** agentClaim is "says it is alice — issued by agent.example": the node's one line for an agent. */
export function agentClaim(agent: AgentText): string {
  return clean(agent.claim || "says it is " + clean(agent.subject) + " — issued by " + agentSite(agent));
}

/**
 * agentView shows an agent the way every page, the notification and the tray do (C13–C15): the
 * issuer's registrable domain first and never truncated, the subject only as the issuer's claim,
 * then the host, cut from the left. The texts are the node's (owner.Agent).
 */
export function agentView(agent: AgentText, compact = false): HTMLElement {
  const siteName = agentSite(agent);
  const idn = /\(xn--|(^|[./])xn--/i.test(siteName);
  let path = "";
  try {
    path = new URL(clean(agent.issuer)).pathname.replace(/\/$/, "");
  } catch {
    // not a URL: the node admits none such, show nothing more
  }
  return h(
    "div",
    { class: compact ? "agent agent-compact" : "agent" },
    h(
      "div",
      { class: "agent-site" },
      h("span", { class: "site-name" }, siteName),
      idn ? h("span", { class: "badge badge-warn", title: "The issuer's domain uses internationalised characters; its punycode form is beside it. Check it is the agent you expect." }, "IDN") : null,
    ),
    h("div", { class: "agent-claim" }, agentClaim(agent)),
    compact
      ? null
      : h(
          "div",
          { class: "agent-origin muted" },
          h("span", { class: "label-inline" }, "issuer host"),
          h("span", { class: "mono host", title: clean(agent.issuer).slice(0, 2000) }, agentOrigin(agent)),
          path ? [" ", h("span", { class: "label-inline" }, "path"), untrusted(path, 80, "mono")] : null,
        ),
  );
}

const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const dateSecFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const dayFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
const rel = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

export function parseTime(s: string | null | undefined): Date | null {
  if (!s) return null;
  const d = new Date(s);
  return isNaN(d.getTime()) ? null : d;
}

export function fmtTime(s: string | null | undefined, seconds = false): string {
  const d = parseTime(s);
  if (!d) return "—";
  return (seconds ? dateSecFmt : dateFmt).format(d);
}

export function relTime(s: string | null | undefined, now = Date.now()): string {
  const d = parseTime(s);
  if (!d) return "";
  const diff = (d.getTime() - now) / 1000;
  const abs = Math.abs(diff);
  if (abs < 45) return diff < 0 ? "just now" : "in a few seconds";
  if (abs < 3600) return rel.format(Math.round(diff / 60), "minute");
  if (abs < 86400) return rel.format(Math.round(diff / 3600), "hour");
  if (abs < 86400 * 45) return rel.format(Math.round(diff / 86400), "day");
  if (abs < 86400 * 365) return rel.format(Math.round(diff / (86400 * 30)), "month");
  return rel.format(Math.round(diff / (86400 * 365)), "year");
}

/** timeCell shows an absolute time (or only the day, when short) with the relative one underneath. */
export function timeCell(s: string | null | undefined, empty = "—", short = false): HTMLElement {
  const d = parseTime(s);
  if (!d) return h("span", { class: "muted" }, empty);
  return h("time", { datetime: d.toISOString(), title: dateSecFmt.format(d) }, short ? dayFmt.format(d) : fmtTime(s), h("span", { class: "sub" }, relTime(s)));
}

export function countdown(ms: number): string {
  if (ms <= 0) return "0:00";
  const total = Math.ceil(ms / 1000);
  const hrs = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  const mm = hrs > 0 ? String(m).padStart(2, "0") : String(m);
  return (hrs > 0 ? hrs + ":" : "") + mm + ":" + String(sec).padStart(2, "0");
}

export type Tone = "ok" | "warn" | "bad" | "info" | "neutral";

export function badge(text: string, tone: Tone): HTMLSpanElement {
  return h("span", { class: "badge badge-" + tone }, text);
}

export function banner(tone: Tone, title: string, ...body: Child[]): HTMLElement {
  return h(
    "div",
    { class: "banner banner-" + tone, role: tone === "bad" ? "alert" : "status" },
    h("div", { class: "banner-title" }, title),
    body.length ? h("div", { class: "banner-body" }, ...body) : null,
  );
}

let idSeq = 0;
export function uid(prefix: string): string {
  idSeq += 1;
  return prefix + "-" + idSeq;
}

/** confirmDialog opens a modal <dialog> and resolves true when the confirm button is used. */
export function confirmDialog(opts: { title: string; body: Child[]; confirm: string; danger?: boolean }): Promise<boolean> {
  return new Promise((resolve) => {
    const titleId = uid("dlg-title");
    const cancelBtn = h("button", { type: "button", class: "btn" }, "Cancel");
    const okBtn = h("button", { type: "button", class: opts.danger ? "btn btn-danger" : "btn btn-primary" }, opts.confirm);
    const dlg = h(
      "dialog",
      { class: "dialog", "aria-labelledby": titleId },
      h("h2", { id: titleId, class: "dialog-title" }, opts.title),
      h("div", { class: "dialog-body" }, ...opts.body),
      h("div", { class: "dialog-actions" }, cancelBtn, okBtn),
    );
    let result = false;
    cancelBtn.addEventListener("click", () => dlg.close());
    okBtn.addEventListener("click", () => {
      result = true;
      dlg.close();
    });
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(result);
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    cancelBtn.focus();
  });
}

export function copyText(text: string, button: HTMLButtonElement): void {
  const done = (ok: boolean) => {
    const prev = button.textContent;
    button.textContent = ok ? "Copied" : "Copy failed";
    window.setTimeout(() => (button.textContent = prev), 1500);
  };
  if (navigator.clipboard?.writeText) {
    navigator.clipboard.writeText(text).then(() => done(true), () => done(false));
  } else {
    done(false);
  }
}
