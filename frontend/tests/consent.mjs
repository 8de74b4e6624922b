#!/usr/bin/env node
// The owner's browser for backend/e2e/browser_test.go: Debian's Chromium driven through
// playwright-core against a real node's admin listener.
//
//   node frontend/tests/consent.mjs --admin https://127.0.0.1:<port> --out <screenshot dir> [--evil-host evil.example]
//
// The Go test plays the personal agents and the node; this script plays the owner. It reads one
// JSON command per line on stdin, {"seq": 1, "step": "openRequest", "args": {…}}, runs that step
// in one browser (one context, so one admin session once "signin" ran) and answers one JSON line
// on stdout, {"seq": 1, "ok": true, "result": {…}} or {"seq": 1, "ok": false, "error": "…"}. Steps check
// what the owner must see and throw when it is not there; the Go side checks the node's state.
// When stdin closes, the browser is closed and the script exits. Logs go to stderr.
//
// --evil-host names a host that Chromium resolves to 127.0.0.1 (--host-resolver-rules), so the
// test can serve "another site" from a loopback server and rebind a name onto the admin port.

import readline from "node:readline";
import fs from "node:fs";
import path from "node:path";
import { chromium } from "playwright-core";
import { CHROMIUM_PATH, CHROMIUM_ARGS } from "./browser.mjs";

const args = parseArgs(process.argv.slice(2));
const admin = new URL(required(args, "admin")).origin;
const outDir = path.resolve(required(args, "out"));
const evilHost = args["evil-host"] || "evil.example";
fs.mkdirSync(outDir, { recursive: true });

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const m = argv[i].match(/^--([\w-]+)(?:=(.*))?$/);
    if (!m) throw new Error("unexpected argument " + argv[i]);
    out[m[1]] = m[2] ?? argv[++i];
  }
  return out;
}

function required(a, k) {
  if (!a[k]) {
    console.error(`usage: consent.mjs --admin https://127.0.0.1:<port> --out <dir>; missing --${k}`);
    process.exit(2);
  }
  return a[k];
}

const log = (...a) => console.error("[consent.mjs]", ...a);

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const STEP_TIMEOUT = 15_000;

/**
 * armed waits until a consent button takes clicks: Allow, Deny and Deny all arm a second after
 * the page is shown and focused, and after a new request appears (C16).
 */
async function armed(button) {
  await button.locator('xpath=self::*[@data-armed="true"]').waitFor();
  return button;
}

const browser = await chromium.launch({
  executablePath: CHROMIUM_PATH,
  args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP ${evilHost} 127.0.0.1`],
  headless: true,
});
// The admin listener's certificate is self-signed; the owner accepted it once.
const context = await browser.newContext({
  ignoreHTTPSErrors: true,
  baseURL: admin,
  viewport: { width: 1280, height: 860 },
  colorScheme: "light",
  locale: "en-US",
  timezoneId: "UTC",
});
context.setDefaultTimeout(STEP_TIMEOUT);

// Every page of the admin UI reports script errors and CSP violations: a product page has none.
const problems = [];
await context.addInitScript(() => {
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__cspViolations = (window.__cspViolations || 0) + 1;
    console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
  });
});
function watch(page, label) {
  page.on("pageerror", (e) => problems.push(`${label}: page error: ${e.message}`));
  page.on("console", (m) => {
    // Refused requests (400, 409, 410 from the API) are expected in some steps.
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) problems.push(`${label}: console: ${m.text()}`);
  });
}

const page = await context.newPage();
watch(page, "main");

// The last decision request the UI sent, per user code (C12 replays it).
const sentDecisions = new Map();
context.on("request", (r) => {
  if (r.method() === "POST" && /\/api\/consent\/[^/]+\/decision$/.test(new URL(r.url()).pathname)) {
    try {
      const body = JSON.parse(r.postData() || "{}");
      sentDecisions.set(body.userCode, { url: new URL(r.url()).pathname, body: r.postData() });
    } catch {
      // not the UI's request
    }
  }
});

async function shot(p, name) {
  if (!name) return;
  // Let transitions (highlight, banners) settle so the picture shows the final state.
  await p.waitForTimeout(350);
  // What the owner sees in the window (a full-page capture would misplace the sticky sidebar).
  await p.screenshot({ path: path.join(outDir, name), animations: "disabled", caret: "hide" });
  log("saved", path.join(outDir, name));
}

function card(p, userCode) {
  return p.locator("article.consent-card", { hasText: userCode });
}

async function newPage(label) {
  const p = await context.newPage();
  if (label) watch(p, label);
  return p;
}

/** holdDecisions keeps the UI's decision POSTs of page p until release() (C6, C7 races). */
async function holdDecisions(p) {
  const held = [];
  let wake = () => {};
  const handler = (route) => {
    held.push(route);
    wake();
  };
  await p.route("**/api/consent/*/decision", handler);
  return {
    held,
    async waitFor(n) {
      while (held.length < n) await new Promise((r) => (wake = r));
    },
    async release() {
      await Promise.all(held.splice(0).map((r) => r.continue()));
      await p.unroute("**/api/consent/*/decision", handler);
    },
  };
}

async function outcome(c) {
  const title = c.locator(".outcome-title");
  await title.waitFor();
  return {
    title: (await title.innerText()).trim(),
    detail: (await c.locator(".outcome-detail").innerText()).trim(),
    grantId: (await c.getAttribute("data-grant-id")) ?? "",
  };
}

/** pageState is what the page holds that injected markup would change (C9). */
async function pageState(p) {
  return p.evaluate(() => ({
    pwned: window.__pwned ?? null,
    cspViolations: window.__cspViolations ?? 0,
    imgs: document.querySelectorAll("img").length,
    handlers: document.querySelectorAll("[onerror],[onload],[onclick]").length,
    scriptsInBody: document.body.querySelectorAll("script").length,
    bidi: /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/.test(document.body.innerText),
    overflowX: document.documentElement.scrollWidth > document.documentElement.clientWidth,
  }));
}

const steps = {
  /** signin opens the sign-in link printed by the node: a session, then the Consent page. */
  async signin({ link }) {
    const resp = await page.goto(link);
    check(resp && resp.ok(), `sign-in link answered ${resp && resp.status()}`);
    await page.getByRole("heading", { name: "Consent", level: 1 }).waitFor();
    const u = new URL(page.url());
    check(u.origin === admin && u.pathname === "/pact/consent" && !u.search.includes("token"), "after sign-in the page is " + page.url());
    return { url: page.url(), title: await page.title() };
  },

  /** signinForm (A3): in a browser without a session, the sign-in page takes the admin token
   * (and a pasted one-time link); neither the token nor the code stays in a URL of the history. */
  async signinForm({ token, link }) {
    const ctx = await browser.newContext({ ignoreHTTPSErrors: true, baseURL: admin });
    try {
      const out = {};
      for (const [what, value] of [["token", token], ["link", link]]) {
        const p = await ctx.newPage();
        watch(p, "signinForm");
        const urls = [];
        p.on("request", (r) => urls.push(r.url()));
        await p.goto("/sharing");
        await p.getByLabel("Admin token").fill(value);
        await p.getByRole("button", { name: "Sign in" }).click();
        await p.getByRole("heading", { name: what === "token" ? "Sharing" : "Consent", level: 1 }).waitFor();
        out[what] = { url: p.url(), tokenInURL: urls.some((u) => u.includes(token)) };
        await p.close();
        await ctx.clearCookies();
      }
      return out;
    } finally {
      await ctx.close();
    }
  },

  /** openRequest opens a consent link and checks the request shows what the server knows. */
  async openRequest({ link, userCode, issuerOrigin, subject, brand, brandId, scope, shot: name }) {
    const resp = await page.goto(link);
    const c = card(page, userCode);
    await c.getByRole("button", { name: "Allow", exact: true }).waitFor();
    check(await c.evaluate((el) => el.classList.contains("highlight")), "the linked request is not highlighted");
    const origin = (await c.locator(".agent-origin .host").innerText()).trim();
    check(origin.startsWith(issuerOrigin), `issuer origin shown as ${JSON.stringify(origin)}, want ${issuerOrigin}`);
    const sub = (await c.locator(".agent-claim").innerText()).trim();
    check(sub.includes("says it is " + subject + " — issued by "), `subject shown as ${JSON.stringify(sub)}, want it as the issuer's claim`);
    const facts = await c.locator(".consent-facts").innerText();
    for (const want of [brand, brandId, scope, userCode]) check(facts.includes(want), `the request does not show ${JSON.stringify(want)}: ${facts}`);
    check((await c.getByRole("button", { name: "Deny", exact: true }).count()) === 1, "no Deny button");
    check(/Expires in \d+:\d\d/.test(await c.locator(".expiry").innerText()), "no expiry countdown");
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { cacheControl: resp.headers()["cache-control"] ?? "", text: await c.innerText() };
  },

  /** decide clicks Allow or Deny on a request and waits for the page to say what happened;
   * tokensPerDay, when given, is typed into "Model tokens a day" ("" = no limit), and the
   * value the page offered first is returned as budgetShown. */
  async decide({ userCode, decision, duration, tokensPerDay, shot: name }) {
    const c = card(page, userCode);
    if (duration) await c.getByLabel("Allow for").selectOption(duration);
    let budgetShown;
    if (tokensPerDay !== undefined) {
      const input = c.getByLabel("Model tokens a day");
      budgetShown = await input.inputValue();
      await input.fill(tokensPerDay);
    }
    await (await armed(c.getByRole("button", { name: decision === "allow" ? "Allow" : "Deny", exact: true }))).click();
    const res = await outcome(c);
    check(page.url().includes("/pact/consent"), "the decision navigated away: " + page.url());
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { ...res, budgetShown };
  },

  /** sharing opens the Sharing page and reads the grant rows. */
  async sharing({ shot: name, wait }) {
    await page.goto("/sharing");
    await page.getByRole("heading", { name: "Sharing", level: 1 }).waitFor();
    if (wait) await page.locator(`tr[data-grant-id="${wait}"]`).waitFor();
    const rows = await page.locator("tr.grant-row").evaluateAll((trs) =>
      trs.map((tr) => ({ id: tr.dataset.grantId, text: tr.innerText, revoke: !!tr.querySelector("button") })),
    );
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { rows };
  },

  /** revoke revokes a grant on the Sharing page, confirming in the dialog. */
  async revoke({ grantId, dialogShot, shot: name }) {
    const row = page.locator(`tr[data-grant-id="${grantId}"]`);
    await row.getByRole("button", { name: "Revoke", exact: true }).click();
    const dlg = page.getByRole("dialog");
    await dlg.waitFor();
    await shot(page, dialogShot);
    await dlg.getByRole("button", { name: "Revoke grant", exact: true }).click();
    await page.getByText("Grant revoked").waitFor();
    await row.getByText("Revoked", { exact: true }).waitFor();
    check((await row.getByRole("button", { name: "Revoke" }).count()) === 0, "a revoked grant still offers Revoke");
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { row: await row.innerText() };
  },

  /** receipt opens one receipt on the Receipts page and reads its Verify result. */
  async receipt({ id, shot: name }) {
    await page.goto("/receipts?id=" + encodeURIComponent(id));
    await page.getByRole("heading", { name: "Receipts", level: 1 }).waitFor();
    const verify = page.locator(".verify");
    await verify.waitFor();
    const text = (await verify.innerText()).trim();
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { verify: text, ok: await verify.evaluate((el) => el.classList.contains("verify-ok")), detail: await page.locator("main").innerText() };
  },

  /** myAgents names an agent on the My agents page, optionally turns it off, and reads the rows. */
  async myAgents({ name, off, shot: shotName }) {
    await page.goto("/agents");
    await page.getByRole("heading", { name: "My agents", level: 1 }).waitFor();
    if (name) {
      await page.getByLabel("Name", { exact: true }).fill(name);
      await page.getByRole("button", { name: "Add agent" }).click();
      await page.locator(`tr[data-agent="${name}"]`).waitFor();
    }
    if (off) {
      const row = page.locator(`tr[data-agent="${off}"]`);
      await row.getByRole("button", { name: "Turn off" }).click();
      await row.getByRole("button", { name: "Turn on" }).waitFor();
    }
    const rows = await page.locator("tr.agent-row").evaluateAll((trs) => trs.map((tr) => ({ name: tr.dataset.agent, text: tr.innerText })));
    await page.mouse.move(0, 0);
    await shot(page, shotName);
    return { rows, text: await page.locator("main").innerText() };
  },

  /** received reads the Receipts page's Received list. */
  async received({ shot: name }) {
    await page.goto("/receipts");
    await page.getByRole("heading", { name: "Received", level: 2 }).waitFor();
    await page.locator("tr.received-row").first().waitFor();
    const rows = await page.locator("tr.received-row").evaluateAll((trs) => trs.map((tr) => ({ rid: tr.dataset.rid, text: tr.innerText })));
    await page.locator("section.received").scrollIntoViewIfNeeded();
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { rows };
  },

  /** status opens the status page. */
  async status({ shot: name }) {
    await page.goto("/");
    await page.getByRole("heading", { name: "Gateway" }).waitFor();
    await page.waitForFunction(() => !document.querySelector("main .loading"));
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { text: await page.locator("main").innerText() };
  },

  /**
   * cancelCodex (X12): the owner presses Get Codex on the Status page while the registry
   * stalls; the Codex card shows Cancel, and pressing it ends the download: Cancel goes and
   * Get Codex is offered again.
   */
  async cancelCodex({ shot: name }) {
    await page.goto("/");
    const get = page.locator("#get-codex");
    await get.waitFor();
    await get.click();
    const cancel = page.locator("#cancel-codex");
    await cancel.waitFor({ state: "visible" });
    const during = { text: await page.locator("#codex").innerText(), cancel: await cancel.isVisible() };
    await page.mouse.move(0, 0);
    await shot(page, name);
    await cancel.click();
    await cancel.waitFor({ state: "hidden" });
    await page.waitForFunction(() => {
      const b = document.querySelector("#get-codex");
      return b && b.textContent === "Get Codex" && !b.disabled;
    });
    return { during, after: { text: await page.locator("#codex").innerText(), cancel: await cancel.isVisible() } };
  },

  /**
   * modelKey (X9): the owner types an API key into the Status page's Model card and saves it
   * with Enter. Then neither the page's markup, its text, any field's value nor the screenshot's
   * page text holds it, and the card says a key is set.
   */
  async modelKey({ key, shot: name }) {
    await page.goto("/");
    const field = page.locator("#model-key");
    await field.waitFor();
    await field.fill(key);
    await field.press("Enter");
    await page.locator(".key-set:not([hidden])").waitFor();
    await page.mouse.move(0, 0);
    await shot(page, name);
    const seen = await page.evaluate(() => ({
      html: document.documentElement.outerHTML,
      text: document.body.innerText,
      values: [...document.querySelectorAll("input, textarea")].map((el) => el.value).join("\n"),
    }));
    return {
      inMarkup: seen.html.includes(key),
      inText: seen.text.includes(key),
      inFields: seen.values.includes(key),
      keySetShown: seen.text.includes("a key is set"),
    };
  },

  /** formPost (C1, C2): another site's page auto-submits a form at the admin API. */
  async formPost({ url }) {
    const p = await newPage();
    try {
      const respP = p.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).origin === admin);
      await p.goto(url);
      const resp = await respP;
      const h = await resp.request().allHeaders();
      return { status: resp.status(), origin: h["origin"] ?? "", secFetchSite: h["sec-fetch-site"] ?? "", cookie: /__Host-aether_session=/.test(h["cookie"] ?? "") };
    } finally {
      await p.close();
    }
  },

  /** fetchAPI (C1, C2): another site's script calls the admin API with the owner's cookies. */
  async fetchAPI({ url, target }) {
    const p = await newPage();
    try {
      await p.goto(url);
      return await p.evaluate(async (t) => {
        try {
          const r = await fetch(t, { credentials: "include" });
          return { read: true, status: r.status, body: await r.text() };
        } catch (e) {
          return { read: false, error: String(e) };
        }
      }, target);
    } finally {
      await p.close();
    }
  },

  /** rebind (C3): a name that resolves to 127.0.0.1 opens the admin port. */
  async rebind({ url }) {
    const p = await newPage();
    try {
      const resp = await p.goto(url);
      return { status: resp.status(), text: (await p.locator("body").innerText()).slice(0, 300) };
    } finally {
      await p.close();
    }
  },

  /** frame (C5): another site frames the consent page. */
  async frame({ url }) {
    const p = await newPage();
    try {
      const framed = p.waitForResponse((r) => new URL(r.url()).origin === admin);
      await p.goto(url);
      const resp = await framed;
      await p.waitForFunction(() => window.__frameLoaded === true, null, { timeout: 5000 }).catch(() => {});
      const child = p.frames().find((f) => f !== p.mainFrame());
      let text = "";
      try {
        text = await child.evaluate(() => document.body?.innerText ?? "");
      } catch (e) {
        text = "(unreadable: " + e.message + ")";
      }
      return {
        frameUrl: child.url(),
        text: text.slice(0, 300),
        xfo: resp.headers()["x-frame-options"] ?? "",
        csp: resp.headers()["content-security-policy"] ?? "",
        buttons: await child.locator("button").count().catch(() => 0),
      };
    } finally {
      await p.close();
    }
  },

  /** doubleClick (C6): a double click on Allow sends one decision. */
  async doubleClick({ link, userCode }) {
    const p = await newPage("double-click");
    try {
      let posts = 0;
      p.on("request", (r) => r.method() === "POST" && r.url().includes("/decision") && posts++);
      await p.goto(link);
      const c = card(p, userCode);
      await (await armed(c.getByRole("button", { name: "Allow", exact: true }))).dblclick();
      const res = await outcome(c);
      await p.waitForTimeout(300); // a second POST, if any, would have left by now
      return { posts, ...res };
    } finally {
      await p.close();
    }
  },

  /** race (C6): two tabs decide the same request at the same moment. */
  async race({ link, userCode, decisions }) {
    const tabs = [await newPage("tab 1"), await newPage("tab 2")];
    try {
      const holds = [];
      for (const t of tabs) {
        await t.goto(link);
        await card(t, userCode).getByRole("button", { name: "Allow", exact: true }).waitFor();
        holds.push(await holdDecisions(t));
      }
      for (let i = 0; i < 2; i++) {
        await (await armed(card(tabs[i], userCode).getByRole("button", { name: decisions[i] === "allow" ? "Allow" : "Deny", exact: true }))).click();
        await holds[i].waitFor(1);
      }
      // Both requests are in flight together: the node decides which one wins.
      await Promise.all(holds.map((h) => h.release()));
      const results = await Promise.all(tabs.map((t) => outcome(card(t, userCode))));
      return { results };
    } finally {
      for (const t of tabs) await t.close();
    }
  },

  /** holdDecision (C7): the owner clicks Allow; the request is held until releaseDecision. */
  async holdDecision({ link, userCode }) {
    const p = await newPage("expired");
    await p.goto(link);
    const c = card(p, userCode);
    await c.getByRole("button", { name: "Allow", exact: true }).waitFor();
    const hold = await holdDecisions(p);
    await (await armed(c.getByRole("button", { name: "Allow", exact: true }))).click();
    await hold.waitFor(1);
    steps._held = { p, hold, userCode };
    return {};
  },

  async releaseDecision({ shot: name }) {
    const { p, hold, userCode } = steps._held;
    delete steps._held;
    try {
      await hold.release();
      const res = await outcome(card(p, userCode));
      await p.mouse.move(0, 0);
      await shot(p, name);
      return res;
    } finally {
      await p.close();
    }
  },

  /** swapCode (C8): the form for request A is sent with the user code of request B. */
  async swapCode({ link, userCode, otherCode }) {
    const p = await newPage("swap-code");
    try {
      await p.goto(link);
      const c = card(p, userCode);
      const allow = c.getByRole("button", { name: "Allow", exact: true });
      await allow.waitFor();
      await p.route("**/api/consent/*/decision", (route) => {
        const body = JSON.parse(route.request().postData());
        route.continue({ postData: JSON.stringify({ ...body, userCode: otherCode }) });
      });
      await (await armed(allow)).click();
      const err = c.locator(".card-error");
      await err.waitFor();
      await p.unroute("**/api/consent/*/decision");
      const uiError = (await err.innerText()).trim();
      const stillPending = await allow.isEnabled();
      // The same, as a script on the page would send it.
      const id = (await c.getAttribute("id")).replace(/^request-/, "");
      const raw = await p.evaluate(
        async ({ id, code }) => {
          const s = await (await fetch("/api/session")).json();
          const r = await fetch(`/api/consent/${encodeURIComponent(id)}/decision`, {
            method: "POST",
            headers: { "Content-Type": "application/json", "X-CSRF-Token": s.csrfToken },
            body: JSON.stringify({ userCode: code, decision: "allow", duration: "forever" }),
          });
          return { status: r.status, body: await r.json() };
        },
        { id, code: otherCode },
      );
      return { uiError, stillPending, raw };
    } finally {
      await p.close();
    }
  },

  /** hostile (C9): what an agent-supplied subject turns into on the Consent and Sharing pages. */
  async hostile({ link, userCode, shot: name, sharingShot }) {
    await page.goto(link);
    const c = card(page, userCode);
    await c.getByRole("button", { name: "Allow", exact: true }).waitFor();
    const claim = c.locator(".agent-claim");
    const res = {
      subject: await claim.innerText(),
      subjectTitle: (await claim.getAttribute("title")) ?? "",
      origin: (await c.locator(".agent-origin .host").innerText()).trim(),
      cardWidth: (await c.boundingBox()).width,
    };
    await page.mouse.move(0, 0);
    await shot(page, name);
    res.consent = await pageState(page);
    await (await armed(c.getByRole("button", { name: "Allow", exact: true }))).click();
    const { grantId } = await outcome(c);
    check(grantId, "Allow made no grant");
    await page.goto("/sharing");
    const row = page.locator(`tr[data-grant-id="${grantId}"]`);
    res.sharingSubject = await row.locator(".agent-claim").innerText();
    await shot(page, sharingShot);
    res.sharing = await pageState(page);
    return res;
  },

  /** extraParams (C10): a consent link with parameters the agent added. */
  async extraParams({ link }) {
    await page.goto(link);
    await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
    await page.waitForTimeout(200);
    return { text: await page.locator("main").innerText(), cards: await page.locator("article.consent-card").count() };
  },

  /** returnTo (C11): sign-in links whose return_to points elsewhere. */
  async returnTo({ link, targets }) {
    const out = [];
    for (const t of targets) {
      const u = new URL(link);
      u.searchParams.set("return_to", t);
      const p = await newPage();
      let error = "";
      try {
        await p.goto(u.href, { timeout: 5000 });
      } catch (e) {
        error = e.message.split("\n")[0];
      }
      out.push({ returnTo: t, url: p.url(), error });
      await p.close();
    }
    return { results: out };
  },

  /** back (C12): after a decision, Back shows no live buttons; re-sending the answer changes nothing. */
  async back({ userCode, shot: name }) {
    const c = card(page, userCode);
    await c.locator(".outcome-title").waitFor();
    // In-app navigation, then the browser's Back button.
    await page.getByRole("link", { name: "Sharing", exact: true }).click();
    await page.getByRole("heading", { name: "Sharing", level: 1 }).waitFor();
    await page.goBack();
    await page.getByRole("heading", { name: "Consent", level: 1 }).waitFor();
    await page.locator(".notice-slot .banner").waitFor();
    const spa = {
      url: page.url(),
      notice: (await page.locator(".notice-slot").innerText()).trim(),
      liveButtons: await card(page, userCode).getByRole("button", { name: "Allow", exact: true }).count(),
    };
    await page.mouse.move(0, 0);
    await shot(page, name);
    // A full page load elsewhere, then Back: the page comes from the node again (no-store).
    await page.goto("/sharing");
    await page.getByRole("heading", { name: "Sharing", level: 1 }).waitFor();
    const resp = await page.goBack();
    await page.getByRole("heading", { name: "Consent", level: 1 }).waitFor();
    await page.locator(".notice-slot .banner").waitFor();
    const full = {
      status: resp ? resp.status() : 0,
      cacheControl: resp ? (resp.headers()["cache-control"] ?? "") : "",
      liveButtons: await card(page, userCode).getByRole("button", { name: "Allow", exact: true }).count(),
      notice: (await page.locator(".notice-slot").innerText()).trim(),
    };
    // Re-submit: the decision request exactly as the UI sent it.
    const sent = sentDecisions.get(userCode);
    check(sent, "no decision was sent for " + userCode);
    const resubmit = await page.evaluate(async ({ url, body }) => {
      const s = await (await fetch("/api/session")).json();
      const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": s.csrfToken }, body });
      return { status: r.status, cacheControl: r.headers.get("cache-control"), body: await r.json() };
    }, sent);
    return { spa, full, resubmit };
  },

  /** issuerText (C13): how the Consent page, then (after Allow) the Sharing page, name an agent. */
  async issuerText({ link, userCode, shot: name, sharingShot }) {
    await page.goto(link);
    const c = card(page, userCode);
    await c.getByRole("button", { name: "Allow", exact: true }).waitFor();
    const read = async (el) => ({
      site: (await el.locator(".agent-site .site-name").innerText()).trim(),
      claim: (await el.locator(".agent-claim").innerText()).trim(),
      host: (await el.locator(".agent-origin .host").count()) ? (await el.locator(".agent-origin .host").innerText()).trim() : "",
      group: (await page.locator(".issuer-group", { has: el }).locator(".group-title .site-name").innerText()).trim(),
    });
    const consent = await read(c);
    await page.mouse.move(0, 0);
    await shot(page, name);
    const consentState = await pageState(page);
    await (await armed(c.getByRole("button", { name: "Allow", exact: true }))).click();
    const { grantId } = await outcome(c);
    check(grantId, "Allow made no grant");
    await page.goto("/sharing");
    const row = page.locator(`tr[data-grant-id="${grantId}"]`);
    await row.waitFor();
    const sharing = {
      site: (await row.locator(".agent-site .site-name").innerText()).trim(),
      claim: (await row.locator(".agent-claim").innerText()).trim(),
    };
    await page.mouse.move(0, 0);
    await shot(page, sharingShot);
    return { consent, sharing, consentOverflow: consentState.overflowX, sharingOverflow: (await pageState(page)).overflowX };
  },

  /**
   * armedClick (C16): right after the page gains focus (as when a link raises the window) a
   * click on Allow does nothing; once the button shows it is armed, the same click decides.
   * The early click is dispatched in the same task as the focus change, so no timing decides it.
   */
  async armedClick({ link, userCode, shot: name }) {
    let posts = 0;
    const count = (r) => r.method() === "POST" && r.url().includes("/decision") && posts++;
    page.on("request", count);
    try {
      await page.goto(link);
      const c = card(page, userCode);
      const allow = c.getByRole("button", { name: "Allow", exact: true });
      await armed(allow);
      const early = [];
      for (const ev of ["focus", "blur", "visibilitychange"]) {
        early.push(
          await allow.evaluate((el, ev) => {
            (ev === "visibilitychange" ? document : window).dispatchEvent(new Event(ev));
            const shown = el.dataset.armed;
            el.click();
            return { event: ev, armed: shown };
          }, ev),
        );
      }
      await shot(page, name);
      await page.waitForTimeout(300); // a decision, had one been sent, would be on its way
      const postsEarly = posts;
      const stillPending = (await c.locator(".outcome-title").count()) === 0;
      await (await armed(allow)).click();
      const res = await outcome(c);
      return { early, postsEarly, stillPending, posts, ...res };
    } finally {
      page.off("request", count);
    }
  },

  /** groups (C19): the Consent page's issuer groups, each with its site and pending cards. */
  async groups() {
    await page.goto("/pact/consent");
    await page.getByRole("heading", { name: "Consent", level: 1 }).waitFor();
    await page.locator("article.consent-card").first().waitFor();
    return {
      groups: await page.locator(".issuer-group").evaluateAll((gs) =>
        gs.map((g) => ({
          site: g.dataset.site,
          name: g.querySelector(".group-title .site-name").textContent,
          codes: [...g.querySelectorAll("article.consent-card .user-code")].map((e) => e.textContent.trim()),
          denyAll: !g.querySelector(".group-deny-all").hidden,
        })),
      ),
    };
  },

  /** denyAll (C19): "Deny all from this issuer" on one group, confirmed in the dialog. */
  async denyAll({ site, shot: name }) {
    const g = page.locator(`.issuer-group[data-site="${site}"]`);
    await (await armed(g.getByRole("button", { name: "Deny all from this issuer", exact: true }))).click();
    const dlg = page.getByRole("dialog");
    await dlg.waitFor();
    const title = (await dlg.locator(".dialog-title").innerText()).trim();
    await dlg.getByRole("button", { name: "Deny all", exact: true }).click();
    const cards = g.locator("article.consent-card");
    const n = await cards.count();
    for (let i = 0; i < n; i++) await cards.nth(i).locator(".outcome-title").waitFor();
    const titles = await g.locator(".outcome-title").allInnerTexts();
    await page.mouse.move(0, 0);
    await shot(page, name);
    return { dialog: title, titles };
  },

  /** problems lists script errors and CSP violations seen on the admin pages. */
  async problems() {
    return { problems };
  },
};

async function run(cmd) {
  const fn = Object.hasOwn(steps, cmd.step) && !cmd.step.startsWith("_") ? steps[cmd.step] : null;
  if (!fn) throw new Error("unknown step " + cmd.step);
  return fn(cmd.args ?? {});
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ seq: 0, ok: false, error: "bad command: " + e.message }) + "\n");
    continue;
  }
  let answer;
  try {
    answer = { seq: cmd.seq, ok: true, result: (await run(cmd)) ?? {} };
  } catch (e) {
    log(cmd.step, "failed:", e.stack || e.message);
    const where = path.join(outDir, `failed-${cmd.step}.png`);
    await page.screenshot({ path: where, fullPage: true }).catch(() => {});
    answer = { seq: cmd.seq, ok: false, error: e.message.split("\n").slice(0, 6).join("\n") + ` (screenshot: ${where})` };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
await browser.close();
