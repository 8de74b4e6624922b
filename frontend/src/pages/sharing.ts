import { api, ApiError, errorMessage, type Grant } from "../api";
import { h, replace, banner, untrusted, agentView, agentClaim, timeCell, confirmDialog, fmtTime, relTime, clean } from "../dom";
import { on } from "../events";
import type { PageDef } from "../router";
import { pageHeader, loading, grantStatusBadge, accessModeBadge } from "./common";

export const sharingPage: PageDef = {
  title: "Sharing",
  mount(root) {
    let grants: Grant[] = [];
    let alive = true;
    const summary = h("div", { class: "summary" });
    const msg = h("div", { class: "notice-slot", "aria-live": "polite" });
    const body = h("div", null, loading("Loading grants…"));
    replace(root, pageHeader("Sharing", "Agents you have allowed, and what they may use. Revoking takes effect at once."), msg, summary, body);

    function row(g: Grant): HTMLTableRowElement {
      const actions = h("td", { class: "cell-actions" });
      if (g.status === "active") {
        const btn = h("button", { type: "button", class: "btn btn-sm btn-danger-outline" }, "Revoke");
        btn.addEventListener("click", () => revoke(g, btn));
        actions.appendChild(btn);
      }
      return h(
        "tr",
        { class: "grant-row grant-" + g.status, "data-grant-id": clean(g.id) },
        h("td", { class: "cell-agent" }, agentView(g.agent, true)),
        h(
          "td",
          { class: "cell-brand" },
          h("div", { class: "fact-strong" }, untrusted(g.brand?.name || g.brand?.id, 80)),
          h("div", { class: "sub" }, h("code", { title: clean(g.scope?.description) }, untrusted(g.scope?.id, 80)), " ", accessModeBadge(g.accessMode)),
        ),
        h("td", null, timeCell(g.issuedAt, "—", true)),
        h("td", null, g.expiresAt ? timeCell(g.expiresAt, "—", true) : h("span", { class: "muted" }, "Until revoked")),
        h("td", null, timeCell(g.lastUsedAt, "Never", true)),
        h("td", { class: "num" }, String(g.uses ?? 0)),
        h("td", { class: "num cell-tokens" }, tokensView(g)),
        h("td", null, grantStatusBadge(g.status), g.status === "revoked" && g.revokedAt ? h("span", { class: "sub", title: fmtTime(g.revokedAt, true) }, relTime(g.revokedAt)) : null),
        actions,
      );
    }

    function render(): void {
      const active = grants.filter((g) => g.status === "active").length;
      replace(
        summary,
        grants.length ? h("p", { class: "muted" }, `${active} active · ${grants.length - active} revoked or expired`) : null,
      );
      if (grants.length === 0) {
        replace(
          body,
          h(
            "section",
            { class: "empty" },
            h("div", { class: "empty-icon", "aria-hidden": "true" }, "⇄"),
            h("h2", null, "Nothing shared yet"),
            h("p", null, "When you allow an agent on ", h("a", { href: "/pact/consent" }, "Consent"), ", its grant is listed here with how often it is used. You can revoke it at any time."),
          ),
        );
        return;
      }
      replace(
        body,
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table table-grants" },
            h(
              "thead",
              null,
              h(
                "tr",
                null,
                ["Agent", "Brand and scope", "Issued", "Expires", "Last used", "Uses", "Model tokens today", "Status"].map((t) =>
                  h("th", { scope: "col", class: t === "Uses" || t === "Model tokens today" ? "num" : "" }, t),
                ),
                h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")),
              ),
            ),
            h("tbody", null, grants.map(row)),
          ),
        ),
      );
    }

    function upsert(g: Grant): void {
      const i = grants.findIndex((x) => x.id === g.id);
      if (i >= 0) grants[i] = g;
      else grants.unshift(g);
      render();
    }

    async function revoke(g: Grant, btn: HTMLButtonElement): Promise<void> {
      const ok = await confirmDialog({
        title: "Revoke this grant?",
        body: [
          h("div", { class: "dialog-agent" }, agentView(g.agent, true)),
          h("p", null, "This agent loses access to ", h("strong", null, untrusted(g.brand?.name || g.brand?.id, 80)), " (", h("code", null, untrusted(g.scope?.id, 80)), ") at once. New turns are refused."),
          h("p", { class: "muted" }, "This cannot be undone. The agent can ask again, and you decide again."),
        ],
        confirm: "Revoke grant",
        danger: true,
      });
      if (!ok || !alive) return;
      btn.disabled = true;
      try {
        const res = await api.revoke(g.id);
        if (!alive) return;
        upsert(res.grant);
        replace(msg, banner("ok", "Grant revoked", "The agent that ", agentClaim(g.agent), " can no longer use ", untrusted(g.brand?.name, 80), "."));
      } catch (e) {
        if (!alive || !(e instanceof ApiError)) return;
        btn.disabled = false;
        replace(msg, banner("bad", "Could not revoke the grant", errorMessage(e)));
      }
    }

    let last = "";
    const load = () =>
      api.grants().then(
        (res) => {
          if (!alive) return;
          // Polling answers are usually unchanged: keep the table (and focus) as it is.
          const text = JSON.stringify(res.grants ?? []);
          if (text === last) return;
          last = text;
          grants = res.grants ?? [];
          render();
        },
        (e) => {
          if (!alive || !(e instanceof ApiError)) return;
          replace(body, banner("bad", "Could not load the grants", errorMessage(e)));
        },
      );
    load();
    const offs = [on("grant", upsert), on("poll", load), on("resync", load)];
    return {
      destroy() {
        alive = false;
        offs.forEach((f) => f());
      },
    };
  },
};

/** A grant's model tokens today against its brand's budget a day. */
function tokensView(g: Grant): HTMLElement {
  const used = g.tokensToday ?? 0;
  if (!g.tokensPerDay) return h("span", { title: "No limit a day" }, used.toLocaleString("en-US"), h("span", { class: "sub" }, " · no limit"));
  const over = used >= g.tokensPerDay;
  return h("span", { class: over ? "tokens-over" : "", title: over ? "Budget used up for today: new turns are refused" : "" },
    used.toLocaleString("en-US") + " of " + g.tokensPerDay.toLocaleString("en-US"));
}
