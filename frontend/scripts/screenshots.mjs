#!/usr/bin/env node
// Dev check: builds nothing, starts the mock API (scripts/mock-api.mjs) on free ports, walks
// every page in Chromium and writes screenshots to test-results/. Fails on page errors or
// CSP violations. Run `npm run build` first.

import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { launch } from "../tests/browser.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, "..", "test-results");
fs.mkdirSync(out, { recursive: true });

function startMock(flags) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [path.join(here, "mock-api.mjs"), "--port", "0", ...flags], { stdio: ["ignore", "pipe", "inherit"] });
    proc.stdout.on("data", (d) => {
      const m = String(d).match(/http:\/\/127\.0\.0\.1:(\d+)\//);
      if (m) resolve({ proc, base: `http://127.0.0.1:${m[1]}` });
    });
    proc.on("exit", (code) => reject(new Error("mock exited " + code)));
  });
}

const problems = [];
function watch(page, label) {
  page.on("pageerror", (e) => problems.push(`${label}: page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) problems.push(`${label}: console: ${m.text()}`);
  });
}

async function shot(page, name, fullPage = true) {
  await page.waitForTimeout(250);
  await page.screenshot({ path: path.join(out, name + ".png"), fullPage });
  console.log("saved", name);
}

async function run(flags, fn, opts = {}) {
  const { proc, base } = await startMock(flags);
  const { browser, page, context } = await launch({ baseURL: base, ...opts });
  if (opts.initScript) await context.addInitScript(opts.initScript);
  watch(page, flags.join(" ") || "default");
  try {
    await fn(page, base);
  } finally {
    await browser.close();
    proc.kill();
  }
}

const expect = (cond, msg) => {
  if (!cond) problems.push("expectation failed: " + msg);
};

await run([], async (page, base) => {
  await page.goto("/");
  await page.getByRole("heading", { name: "Gateway" }).waitFor();
  expect((await page.title()) === "Status · Aether", "status title");
  await shot(page, "01-status");

  await page.getByRole("link", { name: /Consent/ }).first().click();
  await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
  expect((await page.getByRole("button", { name: "Allow", exact: true }).count()) === 3, "three Allow buttons");
  expect((await page.locator("img").count()) === 0, "no injected <img>");
  await shot(page, "02-consent");

  await page.goto("/pact/consent?user_code=bcdf-ghjk");
  await page.locator(".consent-card.highlight").waitFor();
  await shot(page, "03-consent-highlight", false);

  const card = page.locator("article", { hasText: "BCDF-GHJK" });
  await card.getByRole("combobox").selectOption("1d");
  // Allow takes clicks a second after the page is shown (C16).
  await card.locator('button[data-armed="true"]', { hasText: "Allow" }).click();
  await page.getByText("Allowed for 1 day", { exact: true }).waitFor();
  await shot(page, "04-consent-allowed", false);

  await page.goto("/pact/consent?user_code=ZZZZ-ZZZZ");
  await page.getByText("No pending request with this code").waitFor();
  await fetch(base + "/mock/consent", { method: "POST" });
  await page.locator("article", { hasText: "agents.acme.dev" }).waitFor();
  await page.locator("article", { hasText: "agents.acme.dev" }).locator('button[data-armed="true"]', { hasText: "Deny" }).click();
  await page.getByText("Denied", { exact: true }).waitFor();
  await shot(page, "05-consent-unknown-code-and-live");

  await page.getByRole("link", { name: "Sharing" }).click();
  await page.getByRole("heading", { name: "Sharing" }).waitFor();
  await shot(page, "06-sharing");
  await page.getByRole("button", { name: "Revoke", exact: true }).first().click();
  await page.getByRole("dialog").waitFor();
  await shot(page, "07-sharing-dialog", false);
  await page.getByRole("button", { name: "Revoke grant" }).click();
  await page.getByText("Grant revoked").waitFor();
  await shot(page, "08-sharing-revoked");

  await page.getByRole("link", { name: "Receipts" }).click();
  await page.getByText("receipts shown").waitFor();
  await page.getByText("Checkpoint verifies").waitFor();
  await page.getByText("2 agents cosigned a checkpoint").waitFor();
  await page.getByText("history to #120 witnessed by 1 agent").waitFor();
  await page.getByText("history to #119 witnessed by 2 agents").waitFor();
  await shot(page, "09-receipts", false);
  await page.getByRole("button", { name: "Load more" }).click();
  await page.getByText("100 receipts shown").waitFor();
  await page.goto("/receipts?id=r_000017");
  await page.getByText("Verification failed").waitFor();
  await shot(page, "10-receipt-detail-bad", false);
  await page.locator("tr", { hasText: "#118" }).click();
  await page.getByText("Valid signature").waitFor();
  expect(new URL(page.url()).searchParams.get("id") === "r_000118", "row click sets ?id=");
  // What ran: the commands and files the receipt's work claim signs.
  await page.getByRole("heading", { name: "What ran" }).waitFor();
  expect((await page.getByRole("table", { name: "Commands" }).locator("tbody tr").count()) === 3, "three commands listed");
  const file = page.getByRole("table", { name: "Files changed" }).locator("tbody tr");
  expect((await file.count()) === 1 && (await file.innerText()).includes("notes/review.md") && (await file.innerText()).includes("added"), "one file added");
  await page.getByRole("table", { name: "Commands" }).scrollIntoViewIfNeeded();
  await shot(page, "11-receipt-detail-ok", false);
  await page.goto("/receipts?id=r_000115");
  await page.getByText("Valid signature").waitFor();
  expect(await page.getByRole("table", { name: "Commands" }).getByText("\\x1b[2J", { exact: false }).isVisible(), "an escape is shown escaped");
  await page.goto("/receipts?id=r_000119");
  await page.getByText("…and 8 more commands").waitFor();
  await page.goto("/receipts?id=r_000116");
  await page.getByText("No file changed.").waitFor();
  await page.goto("/receipts?id=r_000117");
  await page.getByText("before receipts recorded what ran").waitFor();
  await page.getByLabel("Status").selectOption("failed");
  await page.waitForURL(/status=failed/);
  await page.waitForTimeout(300);
  const href = await page.getByRole("link", { name: "Export JSON Lines" }).getAttribute("href");
  expect(href.includes("status=failed"), "export link carries filters: " + href);
  await shot(page, "12-receipts-filtered", false);

  await page.getByRole("link", { name: "Brands" }).click();
  await page.getByRole("heading", { name: "Brands" }).waitFor();
  await page.locator("form.brand-form").first().waitFor();
  await shot(page, "13-brands");
  await page.getByRole("button", { name: "Add brand" }).click();
  const nf = page.locator("form.brand-new");
  await nf.getByLabel("ID", { exact: true }).fill("bad");
  await nf.getByLabel("Name", { exact: true }).fill("Bad brand");
  await nf.getByLabel("Workspace", { exact: true }).fill("../missing");
  await nf.getByLabel("Scope ID", { exact: true }).fill("pact");
  await nf.getByRole("button", { name: "Save" }).click();
  await nf.getByText("\"pact\" is reserved").waitFor();
  await shot(page, "14-brands-422", false);
  await nf.getByLabel("Workspace", { exact: true }).fill("ws");
  await nf.getByLabel("Scope ID", { exact: true }).fill("bad:read");
  await nf.getByRole("button", { name: "Save" }).click();
  await page.getByText("Saved — the gateway uses it now.").waitFor();
  await page.waitForTimeout(500); // the save's policy event reloads the list
  expect(await page.getByText("Saved — the gateway uses it now.").isVisible(), "saved status survives the reload");
  expect((await page.locator("form.brand-form").count()) === 3, "three brands after save");
  await page.locator("form", { hasText: "Bad brand" }).getByRole("button", { name: "Remove" }).click();
  await page.getByRole("button", { name: "Remove brand" }).click();
  await page.getByText("Brand removed").waitFor();
  expect((await page.locator("form.brand-form").count()) === 2, "two brands after remove");

  // Live consent: decided elsewhere, expired.
  await page.goto("/pact/consent");
  await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
  const ids = await page.locator("article.consent-card").evaluateAll((els) => els.map((e) => e.id.replace("request-", "")));
  await fetch(base + "/mock/decide/" + ids[0], { method: "POST" });
  await page.getByText("Already decided").waitFor();
  await fetch(base + "/mock/expire/" + ids[1], { method: "POST" });
  await page.waitForFunction((id) => !document.getElementById("request-" + id), ids[1]);
  await shot(page, "24-consent-live-events", false);
});

await run(["--auth"], async (page) => {
  await page.goto("/receipts");
  await page.getByRole("heading", { name: "Sign in to this node" }).waitFor();
  await shot(page, "15-signin", false);
  await page.getByLabel("Admin token").fill("test-token");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/pact\/consent$/);
  await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
});

await run(["--empty", "--no-sse"], async (page) => {
  await page.goto("/pact/consent");
  await page.getByText("No pending requests").waitFor();
  await shot(page, "16-consent-empty", false);
  await page.goto("/sharing");
  await page.getByText("Nothing shared yet").waitFor();
  await page.goto("/receipts");
  await page.getByText("No receipts yet").waitFor();
  await page.getByText("The first receipt starts the log").waitFor();
  await page.goto("/brands");
  await page.getByText("No brands yet").waitFor();
  await shot(page, "17-brands-empty", false);
  await page.goto("/");
  await page.getByText("Polling every 5 s").waitFor({ timeout: 10000 });
  await shot(page, "18-status-empty-polling", false);
});

await run(
  ["--policy-error", "--desktop"],
  async (page) => {
    await page.goto("/brands");
    await page.getByRole("button", { name: "Choose folder…" }).first().waitFor();
    await shot(page, "19-brands-policy-error-desktop", false);
    await page.getByRole("button", { name: "Choose folder…" }).first().click();
    expect((await page.getByLabel("Workspace").first().inputValue()) === "/home/owner/picked", "ChooseFolder fills workspace");
    await page.goto("/");
    await page.getByRole("heading", { name: "Gateway" }).waitFor();
    await shot(page, "20-status-policy-error", false);
  },
  { initScript: "window.go = { app: { Shell: { ChooseFolder: async () => '/home/owner/picked' } } };" },
);

await run(
  [],
  async (page) => {
    await page.goto("/pact/consent");
    await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
    await shot(page, "21-consent-dark", false);
    await page.goto("/");
    await page.getByRole("heading", { name: "Gateway" }).waitFor();
    await shot(page, "22-status-dark", false);
  },
  { colorScheme: "dark" },
);

await run(
  [],
  async (page) => {
    await page.goto("/pact/consent");
    await page.getByRole("button", { name: "Allow", exact: true }).first().waitFor();
    await shot(page, "23-consent-narrow", false);
  },
  { viewport: { width: 420, height: 900 } },
);

if (problems.length) {
  console.error("PROBLEMS:\n" + problems.join("\n"));
  process.exit(1);
}
console.log("all pages OK; screenshots in", out);
