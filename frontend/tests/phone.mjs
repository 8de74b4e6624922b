// The owner's phone in Chromium at phone size (360×740), driven by backend/e2e/phone_browser_test.go:
// it reaches the node's tailnet address through an HTTP CONNECT proxy that dials over a tsnet
// device of the owner's (--proxy), opens the pairing link, finds the request with --code on the
// phone's consent page, fires its service worker's push event with DevTools'
// ServiceWorker.deliverPushMessage and reads the notification it shows, then decides the
// request on the page (Allow, once the button arms). Prints one JSON line with what it saw.
//
//   node frontend/tests/phone.mjs --proxy 127.0.0.1:<port> --link https://…/pair?code=… --code BCDF-GHJK --out <dir>
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { CHROMIUM_PATH, CHROMIUM_ARGS } from "./browser.mjs";

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
for (const k of ["proxy", "link", "code", "out"]) {
  if (!args[k]) {
    console.error(`phone.mjs: missing --${k}`);
    process.exit(2);
  }
}
const origin = new URL(args.link).origin;
const outDir = path.resolve(args.out);
fs.mkdirSync(outDir, { recursive: true });
const log = (...a) => console.error("[phone.mjs]", ...a);
function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const browser = await chromium.launch({
  executablePath: CHROMIUM_PATH,
  // The node's ts.net name is reached over the tailnet, through the test's proxy; its
  // certificate comes from the test's CA, which this browser does not know.
  args: [...CHROMIUM_ARGS, `--proxy-server=http://${args.proxy}`, "--ignore-certificate-errors"],
  headless: true,
});
const context = await browser.newContext({
  ignoreHTTPSErrors: true,
  viewport: { width: 360, height: 740 },
  deviceScaleFactor: 2,
  isMobile: true,
  hasTouch: true,
  colorScheme: "light",
  locale: "en-US",
  timezoneId: "UTC",
});
context.setDefaultTimeout(20_000);
await context.grantPermissions(["notifications"], { origin });
const problems = [];
const page = await context.newPage();
page.on("pageerror", (e) => problems.push("page error: " + e.message));
page.on("console", (m) => {
  if (m.type() === "error" && !/Failed to load resource|EventSource/.test(m.text())) problems.push("console: " + m.text());
});

async function shot(name) {
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(outDir, name), animations: "disabled", caret: "hide", fullPage: true });
  log("saved", path.join(outDir, name));
}

try {
  // Pairing: the link sets the device cookie and lands on the phone's page.
  await page.goto(args.link);
  check(new URL(page.url()).pathname === "/phone", "the pairing link landed on " + page.url());
  const card = page.locator("article.consent-card", { hasText: args.code });
  await card.getByRole("button", { name: "Allow", exact: true }).waitFor();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  check(width <= 360, `the page is ${width} px wide at a 360 px viewport`);
  await shot("phone-consent-360.png");

  // The service worker: the page registers it; DevTools fires its push event.
  const scope = await page.evaluate(() => navigator.serviceWorker.ready.then((r) => r.scope));
  const cdp = await context.newCDPSession(page);
  const registration = new Promise((resolve) =>
    cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations }) => {
      const r = registrations.find((x) => x.scopeURL === scope && !x.isDeleted);
      if (r) resolve(r.registrationId);
    }),
  );
  await cdp.send("ServiceWorker.enable");
  const registrationId = await registration;
  const req = await page.evaluate((code) => fetch("/api/consent").then((r) => r.json()).then((l) => l.requests.find((x) => x.userCode === code)), args.code);
  check(req, "the request is not in /api/consent");
  const notice = { id: req.id, site: req.agent.site, brand: req.brand.name, code: req.userCode };
  await cdp.send("ServiceWorker.deliverPushMessage", { origin, registrationId, data: JSON.stringify(notice) });
  // The push event shows its notification on the worker's own time: read the notifications
  // until there is one. (waitForFunction takes the promise this returns for a truthy value, so
  // it would read them once, maybe before the worker had shown it.)
  const notifications = await page.evaluate(async () => {
    const r = await navigator.serviceWorker.ready;
    const until = Date.now() + 20_000;
    for (;;) {
      const ns = await r.getNotifications();
      if (ns.length || Date.now() > until) {
        return ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data, actions: (n.actions || []).map((a) => a.action) }));
      }
      await new Promise((next) => setTimeout(next, 20));
    }
  });

  // The owner decides on the page: a day, once Allow has armed (C16).
  await card.getByLabel("Allow for").selectOption("1d");
  await card.locator('xpath=.//button[normalize-space()="Allow"][@data-armed="true"]').waitFor();
  await card.getByRole("button", { name: "Allow", exact: true }).click();
  await card.locator(".outcome-title").waitFor();
  const outcome = (await card.locator(".outcome-title").innerText()).trim();
  await shot("phone-allowed-360.png");

  // An unpaired browser (a fresh context: no device cookie) is told to pair.
  const stranger = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, isMobile: true });
  const sp = await stranger.newPage();
  await sp.goto(origin + "/phone");
  await sp.getByText("This phone is not paired").waitFor();
  await sp.screenshot({ path: path.join(outDir, "phone-unpaired-360.png") });

  console.log(JSON.stringify({ width, scope, notifications, outcome, problems }));
} catch (e) {
  await page.screenshot({ path: path.join(outDir, "phone-failure.png") }).catch(() => {});
  console.error("[phone.mjs] failed:", e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
