// The Reachability card of the Status page: how agents elsewhere reach this node — off
// (loopback only), Tailscale Funnel, or the owner's own proxy or domain (docs/deploy.md).
// The first-run checklist reads the same Status.reachability.

import { api, ApiError, errorMessage, type Reachability, type Status } from "../api";
import { h, badge, clean, copyText, confirmDialog } from "../dom";

function copyable(text: string, label: string): HTMLElement {
  const btn = h("button", { type: "button", class: "btn btn-ghost btn-xs", "aria-label": "Copy " + label }, "Copy");
  btn.addEventListener("click", () => copyText(text, btn));
  return h("span", { class: "copyable" }, h("code", { class: "mono" }, clean(text)), btn);
}

/** reachBadge is the card's state in a word. */
export function reachBadge(r: Reachability): HTMLElement {
  if (r.mode === "proxy") return badge("Own proxy", "ok");
  if (r.mode === "tailnet") return r.state === "tailnet" ? badge("Tailnet only", "info") : r.state === "failed" ? badge("Not on the tailnet", "bad") : badge("Joining…", "neutral");
  if (r.mode !== "funnel") return badge("Off", "neutral");
  switch (r.state) {
    case "published":
      if (r.probe === "unreachable") return badge("Not reachable", "bad");
      return r.inUse && r.probe === "reachable" ? badge("Reachable", "ok") : badge("Published", "warn");
    case "logging_in":
      return badge("Sign in", "warn");
    case "failed":
      return badge("Not reachable", "bad");
    default:
      return badge("Joining…", "neutral");
  }
}

function funnelBody(r: Reachability, publicUrl: string, act: (fn: () => Promise<unknown>) => void): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (r.state === "logging_in") {
    out.push(
      h("p", { class: "reach-reason" }, r.reason ? clean(r.reason) + ". " : "", "Sign in to your tailnet to publish the gateway:"),
      h("p", null, h("a", { href: r.loginUrl, target: "_blank", rel: "noopener noreferrer", class: "btn btn-primary", "data-reach": "login" }, "Sign in to Tailscale")),
      h("p", { class: "muted small" }, copyable(r.loginUrl, "login link")),
    );
  } else if (r.state === "failed") {
    out.push(
      h("p", { class: "error-text reach-reason" }, clean(r.reason)),
      h("div", { class: "todo" }, h("strong", null, "To fix: "), clean(r.fix), "."),
      h("p", { class: "hint" }, "The gateway still answers on this computer."),
    );
  } else if (r.state === "published") {
    out.push(h("dl", { class: "kvs kvs-stacked" }, kvRow("Address", copyable(r.url, "public address")), kvRow("Device", h("code", { class: "mono" }, clean(r.device)))));
    out.push(probeLine(r, act));
    if (!r.inUse) {
      const use = h("button", { type: "button", class: "btn btn-primary", "data-reach": "use" }, "Use this address");
      use.addEventListener("click", () =>
        confirmDialog({
          title: "Give agents the Funnel address?",
          body: [
            h("p", null, "Agents will be told ", h("code", null, clean(r.url)), " instead of ", h("code", null, clean(publicUrl)), " (publicUrl and audience in policy.json)."),
            h("p", null, "Agents you already allowed keep their grants: their old tokens stop working and they get new ones at the new address without asking you. Revoke any grant you do not want to carry over."),
          ],
          confirm: "Use this address",
        }).then((ok) => ok && act(() => api.useFunnelUrl())),
      );
      out.push(h("p", { class: "hint" }, "Published, but agents are still told ", h("code", null, clean(publicUrl)), "."), use);
    } else {
      out.push(h("p", { class: "hint" }, "Agents anywhere reach this node here. TLS ends inside Aether: Tailscale's relays see only encrypted traffic."));
    }
  } else {
    out.push(h("p", { class: "muted" }, "Joining your tailnet…"));
  }
  return out;
}

/** probeLine says whether the published address answered the node as it answers an agent. */
function probeLine(r: Reachability, act: (fn: () => Promise<unknown>) => void): HTMLElement {
  const again = h("button", { type: "button", class: "btn btn-ghost btn-xs", "data-reach": "check" }, "Check again");
  again.addEventListener("click", () => act(() => api.checkReachability()));
  switch (r.probe) {
    case "reachable":
      return h("p", { class: "reach-probe", "data-probe": "reachable" }, "Published and reachable. ", again);
    case "unreachable":
      return h("p", { class: "error-text reach-probe", "data-probe": "unreachable" }, "Published, but not reachable from the internet: ", clean(r.probeReason), ". ", again);
    default:
      return h("p", { class: "muted reach-probe", "data-probe": "checking" }, "Published; checking that agents can reach it…");
  }
}

function kvRow(label: string, value: Node): HTMLElement {
  return h("div", { class: "kv" }, h("dt", null, label), h("dd", null, value));
}

/** reachabilityCard is the Status page's Reachability card; reload re-reads the status. */
export function reachabilityCard(s: Status, reload: () => void): HTMLElement {
  const r = s.reachability;
  const err = h("p", { class: "error-text", role: "alert" });
  const act = (fn: () => Promise<unknown>) =>
    fn().then(reload, (e) => {
      err.textContent = e instanceof ApiError || e instanceof Error ? errorMessage(e) : String(e);
    });
  const choice = (mode: "off" | "funnel" | "tailnet" | "proxy", label: string) => {
    const current = r.mode === mode;
    const b = h("button", { type: "button", class: current ? "btn btn-xs btn-primary" : "btn btn-xs", "aria-pressed": String(current), "data-mode": mode }, label);
    b.addEventListener("click", () => {
      if (current) return;
      // Funnel and "Tailnet only" are pact.funnel and pact.tailnet: one on, the other off.
      if (mode === "funnel") act(() => api.setFunnel(true).then(() => api.setTailnet(false)));
      else if (mode === "tailnet") act(() => api.setFunnel(false).then(() => api.setTailnet(true)));
      else if (r.mode === "funnel" || r.mode === "tailnet") act(() => api.setFunnel(false).then(() => api.setTailnet(false)));
      if (mode === "proxy") err.textContent = "Put a TLS proxy serving your domain in front of the gateway, then set publicUrl and audience in policy.json to its https:// address (Installing and deploying, in the docs).";
    });
    return b;
  };
  let body: HTMLElement[];
  if (r.mode === "funnel") body = funnelBody(r, s.gateway.publicUrl, act);
  else if (r.mode === "tailnet")
    body =
      r.state === "tailnet"
        ? [
            h("p", null, "On your tailnet at ", copyable(r.url, "tailnet address"), " for your paired phones (", h("a", { href: "/phones" }, "Phones"), "). The gateway is not published: only agents on this computer can call it."),
          ]
        : funnelBody(r, s.gateway.publicUrl, act);
  else if (r.mode === "proxy")
    body = [h("p", null, "Agents reach this node at ", copyable(s.gateway.publicUrl, "public URL"), ", through your own TLS proxy (see docs/deploy.md).")];
  else
    body = [
      h("p", { class: "muted" }, "Not reachable from the internet: only agents on this computer can call ", h("code", null, clean(s.gateway.publicUrl)), "."),
      h("p", { class: "hint" }, "Tailscale Funnel publishes it at an https:// address of your tailnet, with TLS ending inside Aether. For your own domain, put a TLS proxy in front and set publicUrl."),
    ];
  return h(
    "section",
    { class: "card card-reach", id: "reachability", "data-reach-state": r.mode === "funnel" || r.mode === "tailnet" ? r.state : r.mode },
    h("div", { class: "card-head" }, h("h2", null, "Reachability"), reachBadge(r)),
    h("div", { class: "btn-group", role: "group", "aria-label": "How agents reach this node" }, choice("off", "Off"), choice("tailnet", "Tailnet only"), choice("funnel", "Tailscale Funnel"), choice("proxy", "My own proxy or domain")),
    ...body,
    err,
  );
}
