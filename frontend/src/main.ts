import "./style.css";
import { api, loadSession, setUnauthorizedHandler, Unauthorized, errorMessage } from "./api";
import { h, replace, banner } from "./dom";
import { pendingBadge, setPending } from "./pending";
import { on, startEvents, stopEvents, connectionState, type ConnectionState } from "./events";
import { startRouter, type Route } from "./router";
import { statusPage } from "./pages/status";
import { consentPage } from "./pages/consent";
import { sharingPage } from "./pages/sharing";
import { receiptsPage } from "./pages/receipts";
import { brandsPage } from "./pages/brands";
import { agentsPage } from "./pages/agents";
import { signInScreen } from "./pages/signin";
import { phonesPage } from "./pages/phones";

const routes: Route[] = [
  { path: "/", label: "Status", page: statusPage, icon: "◉" },
  { path: "/pact/consent", label: "Consent", page: consentPage, icon: "✓" },
  { path: "/sharing", label: "Sharing", page: sharingPage, icon: "⇄" },
  { path: "/receipts", label: "Receipts", page: receiptsPage, icon: "≡" },
  { path: "/brands", label: "Brands", page: brandsPage, icon: "◆" },
  { path: "/agents", label: "My agents", page: agentsPage, icon: "➚" },
  { path: "/phones", label: "Phones", page: phonesPage, icon: "▯" },
];

let signedOut = false;

function connectionLabel(s: ConnectionState): string {
  return s === "live" ? "Live" : s === "polling" ? "Polling every 5 s" : "Connecting…";
}

function shell(): { main: HTMLElement; nav: HTMLElement } {
  const links = routes.map((r) =>
    h(
      "a",
      { href: r.path, class: "nav-link", "data-path": r.path },
      h("span", { class: "nav-icon", "aria-hidden": "true" }, r.icon),
      h("span", { class: "nav-label" }, r.label),
      r.path === "/pact/consent" ? pendingBadge : null,
    ),
  );
  const connDot = h("span", { class: "conn-dot", "aria-hidden": "true" });
  const connText = h("span", null, connectionLabel(connectionState()));
  const conn = h("div", { class: "conn conn-" + connectionState(), title: "Live updates" }, connDot, connText);
  on("connection", (s) => {
    conn.className = "conn conn-" + s;
    connText.textContent = connectionLabel(s);
  });
  const nav = h("nav", { class: "nav", "aria-label": "Main" }, ...links);
  const side = h(
    "aside",
    { class: "sidebar" },
    h("a", { href: "/", class: "wordmark", "aria-label": "Aether home" }, h("span", { class: "wordmark-mark", "aria-hidden": "true" }), "Aether"),
    nav,
    h("div", { class: "sidebar-foot" }, conn),
  );
  const main = h("main", { class: "content", id: "content", tabindex: "-1" });
  const app = document.getElementById("app")!;
  replace(app, h("a", { href: "#content", class: "skip-link" }, "Skip to content"), h("div", { class: "layout" }, side, main));
  return { main, nav };
}

function showSignIn(): void {
  if (signedOut) return;
  signedOut = true;
  stopEvents();
  document.title = "Sign in · Aether";
  const app = document.getElementById("app")!;
  replace(app, signInScreen());
}

async function boot(): Promise<void> {
  setUnauthorizedHandler(showSignIn);
  try {
    await loadSession();
  } catch (e) {
    if (e instanceof Unauthorized) return;
    const app = document.getElementById("app")!;
    replace(app, h("div", { class: "boot-error" }, banner("bad", "The admin API did not answer", errorMessage(e), h("p", null, h("a", { href: location.pathname + location.search }, "Try again")))));
    return;
  }
  const { main, nav } = shell();
  startRouter(routes, main, nav, () => signedOut);
  startEvents();
  on("consent", (ev) => setPending(ev.pending));
  const refreshPending = () =>
    api.status().then(
      (s) => setPending(s.pending),
      () => {},
    );
  on("poll", refreshPending);
  on("resync", refreshPending);
  refreshPending();
}

boot();
