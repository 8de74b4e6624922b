import { api, ApiError, errorMessage, type Status, type Brand, type PolicyError } from "../api";
import { h, replace, banner, badge, clean, untrusted, copyText, timeCell } from "../dom";
import { on } from "../events";
import type { PageDef } from "../router";
import { setPending } from "../pending";
import { reachabilityCard } from "./reachability";
import { receiptStatusBadge, accessModeBadge, pageHeader, loading, receiptAgentCell } from "./common";
import { setupSection } from "./setup";

export function policyErrorBanner(err: PolicyError, path?: string): HTMLElement {
  return banner(
    "bad",
    "policy.json has a problem",
    h("p", null, clean(err.message)),
    path ? h("p", { class: "muted" }, "File: ", h("code", null, clean(path))) : null,
    err.problems?.length
      ? h(
          "ul",
          { class: "problems" },
          err.problems.map((p) => h("li", null, h("code", null, clean(p.path)), " — ", clean(p.message))),
        )
      : null,
  );
}

function copyable(text: string, label: string): HTMLElement {
  const btn = h("button", { type: "button", class: "btn btn-ghost btn-xs", "aria-label": "Copy " + label }, "Copy");
  btn.addEventListener("click", () => copyText(text, btn));
  return h("span", { class: "copyable" }, h("code", { class: "mono" }, clean(text)), btn);
}

function kv(label: string, ...value: (Node | string | null)[]): HTMLElement {
  return h("div", { class: "kv" }, h("dt", null, label), h("dd", null, ...value));
}

function gatewayCard(s: Status): HTMLElement {
  const g = s.gateway;
  const state = g.paused ? badge("Paused", "warn") : g.running ? badge("Running", "ok") : badge("Stopped", "bad");
  return h(
    "section",
    { class: "card", id: "gateway" },
    h("div", { class: "card-head" }, h("h2", null, "Gateway"), state),
    h(
      "dl",
      { class: "kvs kvs-stacked" },
      kv("Listening on", copyable(g.listen, "gateway address")),
      kv("Public URL", g.publicUrl ? copyable(g.publicUrl, "public URL") : h("span", { class: "muted" }, "not set")),
      kv("Admin", s.admin?.url ? h("code", { class: "mono" }, clean(s.admin.url)) : h("span", { class: "muted" }, "—")),
      kv("Aether version", s.version ? h("code", { class: "mono" }, clean(s.version)) : h("span", { class: "muted" }, "—")),
    ),
    g.paused ? h("p", { class: "hint" }, "Paused: agents get no new turns until you resume it from the tray menu.") : null,
    !g.running && !g.paused ? h("p", { class: "hint" }, "The gateway is not serving. Check the node's log for the reason.") : null,
  );
}

// confinementCard says whether turns are held to their brand's workspace: without it, none runs.
function confinementCard(s: Status): HTMLElement {
  const c = s.confinement;
  const ok = !!c?.available;
  return h(
    "section",
    { class: "card" },
    h("div", { class: "card-head" }, h("h2", null, "Confinement"), ok ? badge("In force", "ok") : badge("Unavailable", "bad")),
    ok ? h("p", null, clean(c.text)) : h("p", { class: "error-text" }, clean(c?.text ?? "Confinement: unknown")),
    ok
      ? h(
          "p",
          { class: "hint" },
          "Each turn sees its brand's workspace, Codex's own files and a private scratch folder: not your home, not other brands, not this node's keys or database. The commands Codex runs never see its credential.",
        )
      : h("div", { class: "todo" }, h("strong", null, "No agent's turn runs Codex until this is fixed. "), "Aether never runs a turn unconfined."),
  );
}

function pendingCard(n: number): HTMLElement {
  return h(
    "section",
    { class: "card card-pending" + (n > 0 ? " has-pending" : "") },
    h("div", { class: "card-head" }, h("h2", null, "Consent requests")),
    h("div", { class: "big-number" }, String(n)),
    h("p", { class: "muted" }, n === 0 ? "No agent is waiting for your approval." : n === 1 ? "An agent is waiting for your approval." : "Agents are waiting for your approval."),
    h("a", { href: "/pact/consent", class: n > 0 ? "btn btn-primary" : "btn" }, n > 0 ? "Review requests" : "Open Consent"),
  );
}

function brandsCard(brands: Brand[]): HTMLElement {
  return h(
    "section",
    { class: "card card-wide" },
    h("div", { class: "card-head" }, h("h2", null, "Brands served"), h("a", { href: "/brands", class: "link-quiet" }, "Edit brands →")),
    brands.length === 0
      ? h("p", { class: "muted" }, "No brands yet. Agents have nothing to ask for until you ", h("a", { href: "/brands" }, "add a brand"), ".")
      : h(
          "ul",
          { class: "brand-list" },
          brands.map((b) =>
            h(
              "li",
              { class: "brand-item" },
              h(
                "div",
                { class: "brand-item-main" },
                h("div", { class: "brand-name" }, clean(b.name) || clean(b.id), " ", accessModeBadge(b.accessMode)),
                h("div", { class: "muted small" }, h("code", null, clean(b.id)), " · scope ", h("code", null, clean(b.scope?.id))),
              ),
              b.cardUrl ? h("div", { class: "brand-card-url" }, h("span", { class: "label-inline" }, "Agent card"), copyable(b.cardUrl, "agent card URL for " + clean(b.name))) : null,
            ),
          ),
        ),
  );
}

function receiptsCard(s: Status): HTMLElement {
  const rows = s.lastReceipts ?? [];
  return h(
    "section",
    { class: "card card-wide" },
    h("div", { class: "card-head" }, h("h2", null, "Last receipts"), h("a", { href: "/receipts", class: "link-quiet" }, "All receipts →")),
    rows.length === 0
      ? h("p", { class: "muted" }, "No turns yet. Each answered turn leaves a signed receipt here.")
      : h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table" },
            h("thead", null, h("tr", null, h("th", null, "#"), h("th", null, "Agent"), h("th", null, "Brand"), h("th", null, "Status"), h("th", null, "Ended"))),
            h(
              "tbody",
              null,
              rows.map((r) =>
                h(
                  "tr",
                  null,
                  h("td", null, h("a", { href: "/receipts?id=" + encodeURIComponent(r.id) }, "#" + r.seq)),
                  h("td", null, receiptAgentCell(r.agent)),
                  h("td", null, untrusted(r.brand, 80)),
                  h("td", null, receiptStatusBadge(r.status)),
                  h("td", null, timeCell(r.endedAt)),
                ),
              ),
            ),
          ),
        ),
  );
}

export const statusPage: PageDef = {
  title: "Status",
  mount(root) {
    const top = h("div", null, loading());
    const rest = h("div", null);
    let alive = true;
    // The first-run section is made once and updated in place: a reload never wipes a form.
    const setup = setupSection(() => load());
    const setupSlot = h("div", { hidden: true }, setup.checklist, setup.cards);
    replace(root, pageHeader("Status", "How this node is doing right now."), top, setupSlot, rest);
    const load = () =>
      api.status().then(
        (s) => {
          if (!alive) return;
          setPending(s.pending);
          setupSlot.hidden = false;
          setup.update(s);
          replace(top, s.policy?.error ? policyErrorBanner(s.policy.error, s.policy.path) : null);
          replace(
            rest,
            h("div", { class: "grid" }, gatewayCard(s), reachabilityCard(s, load), confinementCard(s), pendingCard(s.pending), brandsCard(s.brands ?? []), receiptsCard(s)),
          );
        },
        (e) => {
          if (!alive || !(e instanceof ApiError)) return;
          replace(top, banner("bad", "Could not load the status", errorMessage(e)));
        },
      );
    load();
    const offs = [on("consent", load), on("receipt", load), on("policy", load), on("reachability", load), on("poll", load), on("resync", load)];
    return {
      destroy() {
        alive = false;
        setup.destroy();
        offs.forEach((f) => f());
      },
    };
  },
};
