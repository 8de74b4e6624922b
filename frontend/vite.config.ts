import { defineConfig } from "vite";

// The Go binary embeds dist/ and serves it at "/", so assets use absolute /assets/ paths.
// No inline scripts or styles: the server sends a strict CSP (script-src/style-src 'self').
// Three entries: the window (index.html), the phone's pages on the tailnet (phone.html), and
// the phone's service worker, which must keep the fixed name /sw.js for its scope "/".
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
    rollupOptions: {
      input: { index: "index.html", phone: "phone.html", sw: "src/sw.ts" },
      output: {
        entryFileNames: (chunk) => (chunk.name === "sw" ? "sw.js" : "assets/[name]-[hash].js"),
        // The code the window and the phone's page share (the API client, the consent page).
        chunkFileNames: "assets/shared-[hash].js",
      },
    },
  },
});
