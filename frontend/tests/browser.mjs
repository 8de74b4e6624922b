// Launches Debian's Chromium (/usr/bin/chromium) headless through playwright-core, for browser
// tests against a real node (self-signed admin certificate) or the dev mock.
//
//   import { launch } from "./browser.mjs";
//   const { browser, page } = await launch({ baseURL: "https://127.0.0.1:3000" });
//   await page.goto("/pact/consent");
//   ...
//   await browser.close();

import { chromium } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * launch starts Chromium and opens one page in a fresh context that ignores certificate errors
 * (the admin listener uses a self-signed certificate).
 * @param {{ baseURL?: string, viewport?: {width: number, height: number}, colorScheme?: "light"|"dark", headless?: boolean }} [opts]
 * @returns {Promise<{ browser: import("playwright-core").Browser, context: import("playwright-core").BrowserContext, page: import("playwright-core").Page }>}
 */
export async function launch(opts = {}) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: CHROMIUM_ARGS,
    headless: opts.headless ?? true,
  });
  const context = await browser.newContext({
    ignoreHTTPSErrors: true,
    baseURL: opts.baseURL,
    viewport: opts.viewport ?? { width: 1280, height: 860 },
    colorScheme: opts.colorScheme ?? "light",
  });
  const page = await context.newPage();
  return { browser, context, page };
}
