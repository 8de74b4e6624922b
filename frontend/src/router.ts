// Client-side routing with the history API. Links are real <a href>; clicks on internal page
// links are intercepted, everything else (API downloads, /login) is left to the browser.

import { h } from "./dom";

export interface PageInstance {
  /** Called when only the query changes on the same page (e.g. /receipts?id=…). */
  update?(url: URL): void;
  destroy?(): void;
}

export interface PageDef {
  title: string;
  mount(root: HTMLElement, url: URL): PageInstance;
}

export interface Route {
  path: string;
  label: string;
  icon: string;
  page: PageDef;
}

let routes: Route[] = [];
let main: HTMLElement;
let nav: HTMLElement;
let current: { route: Route | null; instance: PageInstance } | null = null;
let stopped: () => boolean = () => false;

function findRoute(path: string): Route | null {
  const p = path.length > 1 ? path.replace(/\/+$/, "") : path;
  return routes.find((r) => r.path === p) ?? null;
}

function isInternal(url: URL): boolean {
  if (url.origin !== location.origin) return false;
  if (url.pathname.startsWith("/api/") || url.pathname === "/login") return false;
  return findRoute(url.pathname) !== null;
}

export function setTitle(title: string): void {
  document.title = `${title} · Aether`;
}

function notFound(): PageDef {
  return {
    title: "Not found",
    mount(root) {
      root.appendChild(
        h(
          "div",
          { class: "empty" },
          h("h1", null, "Page not found"),
          h("p", null, "There is no page at this address. "),
          h("p", null, h("a", { href: "/", class: "btn btn-primary" }, "Go to Status")),
        ),
      );
      return {};
    },
  };
}

function render(focus: boolean): void {
  if (stopped()) return;
  const url = new URL(location.href);
  const route = findRoute(url.pathname);
  if (current && current.route === route && route && current.instance.update) {
    current.instance.update(url);
    return;
  }
  current?.instance.destroy?.();
  const page = route ? route.page : notFound();
  for (const a of nav.querySelectorAll<HTMLAnchorElement>("a[data-path]")) {
    if (route && a.dataset.path === route.path) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  setTitle(page.title);
  const root = h("div", { class: "page" });
  main.replaceChildren(root);
  current = { route, instance: page.mount(root, url) };
  if (focus) {
    window.scrollTo(0, 0);
    main.focus({ preventScroll: true });
  }
}

/** navigate goes to an internal path (with query) without reloading. */
export function navigate(href: string, opts: { replace?: boolean } = {}): void {
  const url = new URL(href, location.href);
  if (!isInternal(url)) {
    location.assign(url.href);
    return;
  }
  const samePage = url.pathname === location.pathname;
  if (opts.replace) history.replaceState(null, "", url.pathname + url.search + url.hash);
  else history.pushState(null, "", url.pathname + url.search + url.hash);
  render(!samePage);
}

// The desktop app shows a page (a consent request from a notification, the tray or a
// consent link) by dispatching "aether:navigate" with the path; before the router runs the
// last such path waits here. Only this UI's own pages are followed.
let shellTarget: string | null = null;
window.addEventListener("aether:navigate", (ev) => {
  const detail = (ev as CustomEvent<unknown>).detail;
  if (typeof detail !== "string") return;
  const url = new URL(detail, location.href);
  if (routes.length === 0) shellTarget = url.href;
  else if (isInternal(url)) navigate(url.href);
});

export function startRouter(rs: Route[], mainEl: HTMLElement, navEl: HTMLElement, isStopped: () => boolean): void {
  routes = rs;
  main = mainEl;
  nav = navEl;
  stopped = isStopped;
  document.addEventListener("click", (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = (ev.target as Element | null)?.closest?.("a");
    if (!a || !a.hasAttribute("href") || a.hasAttribute("download") || (a.target && a.target !== "_self")) return;
    const url = new URL(a.href, location.href);
    if (!isInternal(url)) return;
    if (url.hash && url.pathname === location.pathname && url.search === location.search) {
      // An in-page link: scroll to its target here, as a webview's custom scheme may reload the
      // page for it instead (the checklist's links to its cards).
      const target = document.getElementById(decodeURIComponent(url.hash.slice(1)));
      if (target) {
        ev.preventDefault();
        target.scrollIntoView({ block: "start" });
      }
      return;
    }
    ev.preventDefault();
    navigate(url.href);
  });
  window.addEventListener("popstate", () => render(false));
  if (shellTarget && isInternal(new URL(shellTarget))) history.replaceState(null, "", shellTarget);
  shellTarget = null;
  render(false);
}
