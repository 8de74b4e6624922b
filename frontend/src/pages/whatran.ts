import type { ReceiptCommandList, ReceiptDetail, ReceiptFileList, ReceiptPatchList, ReceiptWork } from "../api";
import { h, clean } from "../dom";

/** short is the first 12 hex digits of a SHA-256, the whole in its title. */
function short(hash: string | undefined): Node {
  if (!hash) return document.createTextNode("—");
  const c = clean(hash);
  return h("code", { class: "hash", title: c }, c.replace(/^sha256:/, "").slice(0, 12));
}

/** more says how many entries a cut list left out, and the digest that covers them all. */
function more(l: ReceiptCommandList | ReceiptFileList | ReceiptPatchList, what: string): Node | null {
  const shown = l.items?.length ?? 0;
  if (l.count <= shown) return null;
  return h("p", { class: "muted small" }, `…and ${l.count - shown} more ${what} (${l.count} in all; digest of all `, short(l.digest), ")");
}

function table(label: string, head: string[], rows: Node[][]): HTMLElement {
  return h(
    "table",
    { class: "claims work-table", "aria-label": label },
    h("thead", null, h("tr", null, head.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", null, rows.map((cells) => h("tr", null, cells.map((c) => h("td", null, c))))),
  );
}

const text = (s: unknown) => document.createTextNode(clean(s));

function commands(w: ReceiptWork): (Node | null)[] {
  const l = w.commands;
  if (!l.count) return [h("p", { class: "muted" }, "No commands.")];
  const rows = (l.items ?? []).map((c) => [
    h("code", { class: "break", title: "SHA-256 of the exact command line: " + clean(c.line_sha256) }, clean(c.line)),
    text(c.exit === undefined ? clean(c.status) : String(c.exit)),
    text(c.ms === undefined ? "—" : c.ms < 1000 ? c.ms + " ms" : (c.ms / 1000).toFixed(1) + " s"),
    short(c.output_sha256),
  ]);
  return [table("Commands", ["Command", "Exit", "Took", "Output SHA-256"], rows), more(l, "commands")];
}

function files(w: ReceiptWork): (Node | null)[] {
  const l = w.files;
  if (!l.count) return [h("p", { class: "muted" }, w.before ? "No file changed." : "The node did not look at the workspace.")];
  const rows = (l.items ?? []).map((f) => [
    h("code", { class: "break" }, clean(f.path) + (f.type ? ` (${clean(f.type)})` : "")),
    text(f.kind),
    text(f.size === undefined ? "—" : f.size + " B"),
    short(f.sha256),
  ]);
  return [table("Files changed", ["Path", "Change", "Size", "New SHA-256"], rows), more(l, "files")];
}

function patches(w: ReceiptWork): (Node | null)[] {
  const l = w.patches;
  if (!l.count) return [];
  const rows = (l.items ?? []).map((p) => [h("code", { class: "break" }, clean(p.path)), text(p.kind), text(p.status)]);
  return [h("h4", { class: "work-sub" }, "Patches Codex applied"), table("Patches", ["Path", "Kind", "Status"], rows), more(l, "patches")];
}

/** whatRan is the "What ran" section of a receipt: the commands and files its work claim signs. */
export function whatRan(claims: ReceiptDetail["claims"]): (Node | null)[] {
  const head = h("h3", { class: "detail-sub" }, "What ran");
  const w = claims?.work;
  if (!w) {
    const why = claims?.v ? "Codex did not start on this turn." : "This receipt was signed before receipts recorded what ran (format version 1).";
    return [head, h("p", { class: "muted" }, why)];
  }
  const ran = [
    "Codex " + (clean(w.codex) || "?"),
    "model " + (clean(w.model) || "Codex's default") + (w.upstream ? " at " + clean(w.upstream) : ""),
    "sandbox " + clean(w.sandbox),
    clean(w.confinement),
  ].join(" · ");
  const ws = !w.before ? "" : w.before === w.after ? "Workspace unchanged." : "Workspace changed.";
  return [
    head,
    h("p", { class: "small work-meta" }, ran),
    ...commands(w),
    h("h4", { class: "work-sub" }, "Files changed"),
    ...files(w),
    ws ? h("p", { class: "muted small" }, ws + (w.partial ? " (too large: the first entries only)" : " Digest "), w.partial ? null : short(w.after)) : null,
    ...patches(w),
  ];
}
