// The phone's pages on the owner's tailnet (phone.html, served by the tailnet door only): the
// consent page of the window, the same decisions with the same guards (buttons that arm,
// CSRF), in a phone-sized frame, and a switch for notifications (docs/admin-api.md, "Phones").
import "./style.css";
import "./phone.css";
import { loadSession, setUnauthorizedHandler, Unauthorized, errorMessage } from "./api";
import { phones } from "./phoneapi";
import { h, replace, banner } from "./dom";
import { startEvents, stopEvents } from "./events";
import { consentPage } from "./pages/consent";

const app = document.getElementById("app")!;

function notPaired(): void {
  stopEvents();
  replace(
    app,
    h(
      "main",
      { class: "phone-main" },
      banner("info", "This phone is not paired", "In the Aether window on your computer, open Phones and choose Add a phone, then scan the code with this phone."),
    ),
  );
}

/** b64url turns the node's VAPID key into the bytes pushManager.subscribe wants. */
function b64url(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function notifications(pushKey: string): HTMLElement {
  const status = h("span", { class: "muted" });
  const btn = h("button", { class: "btn btn-sm", type: "button" }, "Turn on notifications");
  const box = h("div", { class: "phone-push" }, btn, status);
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    btn.hidden = true;
    status.textContent = "This browser cannot show notifications here. On an iPhone, add this page to the Home Screen and open it from there.";
    return box;
  }
  const reg = navigator.serviceWorker.register("/sw.js", { scope: "/" });
  void reg.then(async (r) => {
    if (await r.pushManager.getSubscription()) {
      btn.hidden = true;
      status.textContent = "Notifications are on.";
    }
  });
  btn.addEventListener("click", async () => {
    try {
      if ((await Notification.requestPermission()) !== "granted") {
        status.textContent = "Notifications are blocked for this page in the browser's settings.";
        return;
      }
      const r = await reg;
      const sub = await r.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64url(pushKey) });
      await phones.subscribe(sub.toJSON());
      btn.hidden = true;
      status.textContent = "Notifications are on.";
    } catch (e) {
      status.textContent = "Notifications could not be turned on: " + errorMessage(e);
    }
  });
  return box;
}

async function boot(): Promise<void> {
  setUnauthorizedHandler(notPaired);
  let pushKey = "";
  try {
    await loadSession();
    pushKey = (await phones.session()).pushKey;
  } catch (e) {
    if (e instanceof Unauthorized) return;
    replace(app, h("main", { class: "phone-main" }, banner("bad", "Aether did not answer", errorMessage(e))));
    return;
  }
  const main = h("main", { class: "phone-main", id: "content" });
  replace(app, h("header", { class: "phone-bar" }, h("span", { class: "wordmark-mark", "aria-hidden": "true" }), h("strong", null, "Aether"), notifications(pushKey)), main);
  consentPage.mount(main, new URL(location.href));
  startEvents(); // the tailnet has no event stream: the page polls
}

void boot();
