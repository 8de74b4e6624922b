// The phone's service worker (served as /sw.js, scope /): a notification for each push of a
// new consent request (docs/admin-api.md, "Phones"). A push says only the agent's site, the
// brand and the code (docs/threats.md O3). Tapping it opens that request; Allow and Deny, where
// the platform shows actions, decide it over the tailnet with this device's session (its
// cookie and CSRF token), for a day, with the brand's model budget.

interface Notice {
  id: string;
  site: string;
  brand: string;
  code: string;
}

interface ExtendableEventLike extends Event {
  waitUntil(p: Promise<unknown>): void;
}
interface PushEventLike extends ExtendableEventLike {
  data: { json(): unknown } | null;
}
interface NotificationEventLike extends ExtendableEventLike {
  action: string;
  notification: Notification;
}
interface WindowClientLike {
  url: string;
  focus(): Promise<unknown>;
  navigate(url: string): Promise<unknown>;
}
interface WorkerScope {
  registration: ServiceWorkerRegistration;
  clients: {
    matchAll(o: { type: "window"; includeUncontrolled: boolean }): Promise<readonly WindowClientLike[]>;
    openWindow(url: string): Promise<unknown>;
  };
  addEventListener(type: "push", fn: (e: PushEventLike) => void): void;
  addEventListener(type: "notificationclick", fn: (e: NotificationEventLike) => void): void;
}

const sw = self as unknown as WorkerScope;

function isNotice(v: unknown): v is Notice {
  const n = v as Notice;
  return typeof n === "object" && n !== null && [n.id, n.site, n.brand, n.code].every((s) => typeof s === "string");
}

sw.addEventListener("push", (e) => {
  let n: unknown = null;
  try {
    n = e.data?.json();
  } catch {
    n = null;
  }
  if (!isNotice(n)) return;
  const options = {
    body: `Code ${n.code}. Check that the agent shows the same code.`,
    tag: "aether-request-" + n.id,
    data: n,
    requireInteraction: true,
    actions: [
      { action: "allow", title: "Allow for a day" },
      { action: "deny", title: "Deny" },
    ],
  } as NotificationOptions;
  e.waitUntil(sw.registration.showNotification(`${n.site} asks to use ${n.brand}`, options));
});

/** requestURL is the phone's page opened at one request. */
function requestURL(n: Notice): string {
  return "/phone?user_code=" + encodeURIComponent(n.code);
}

async function open(url: string): Promise<void> {
  const wins = await sw.clients.matchAll({ type: "window", includeUncontrolled: true });
  const win = wins[0];
  if (win) {
    await win.navigate(url);
    await win.focus();
    return;
  }
  await sw.clients.openWindow(url);
}

async function decide(n: Notice, decision: "allow" | "deny"): Promise<void> {
  const s = await fetch("/api/session", { credentials: "same-origin", cache: "no-store" });
  if (!s.ok) return open(requestURL(n));
  const { csrfToken } = (await s.json()) as { csrfToken: string };
  const res = await fetch(`/api/consent/${encodeURIComponent(n.id)}/decision`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken },
    body: JSON.stringify({ userCode: n.code, decision, duration: "1d" }),
  });
  // Anything but a clean decision is shown on the page, where the owner can see why.
  if (!res.ok) await open(requestURL(n));
}

sw.addEventListener("notificationclick", (e) => {
  const n = e.notification.data as unknown;
  e.notification.close();
  if (!isNotice(n)) return;
  if (e.action === "allow" || e.action === "deny") {
    e.waitUntil(decide(n, e.action));
    return;
  }
  e.waitUntil(open(requestURL(n)));
});
