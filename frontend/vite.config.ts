import { defineConfig } from "vite";

// The Go binary embeds dist/ and serves it at "/", so assets use absolute /assets/ paths.
// No inline scripts or styles: the server sends a strict CSP (script-src/style-src 'self').
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    target: "es2022",
    sourcemap: false,
    // The polyfill would be inlined into the entry chunk; every supported webview has modulepreload.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    cssCodeSplit: false,
  },
});
