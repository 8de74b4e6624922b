#!/usr/bin/env node
// A dev-only stand-in for the node's admin API (docs/admin-api.md): serves dist/ and /api/* with
// fake, partly hostile data so the UI can be looked at and screenshotted without a node.
// No dependencies. Not shipped. Its answers have owner's JSON shapes (backend/owner):
// backend/owner/edges_test.go runs it and fails on a field owner's types do not have, or lack.
//
//   node scripts/mock-api.mjs [--port 5180] [--auth] [--policy-error] [--empty] [--no-sse] [--desktop]
//
// --auth          require a session: sign in via /login?code=test-code, or the sign-in page's
//                 form with the token test-token
// --policy-error  policy.json is broken (banner on Status and Brands)
// --empty         no requests, grants, receipts or brands
// --no-sse        /api/events answers 404 (the UI falls back to polling)
// --desktop       /api/session says desktop: true (shows "Choose folder…" if window.go binds it)
// Test hooks (mock only): POST /mock/consent (add a request), POST /mock/expire/{id},
// POST /mock/decide/{id} (decided elsewhere), POST /mock/receipt, POST /mock/policy.

import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import crypto from "node:crypto";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const flag = (n) => args.includes(n);
const opt = (n, d) => {
  const i = args.indexOf(n);
  return i >= 0 && args[i + 1] ? args[i + 1] : d;
};
const PORT = Number(opt("--port", process.env.PORT || 5180));
const AUTH = flag("--auth");
const EMPTY = flag("--empty");
const NO_SSE = flag("--no-sse");
let policyBroken = flag("--policy-error");
const TOKEN = "test-token";
const CODE = "test-code"; // a sign-in link's one-time code (the mock takes it again and again)
const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "dist");

const CSRF = crypto.randomBytes(16).toString("hex");
const sessions = new Set();
const now = () => Date.now();
const iso = (ms) => new Date(ms).toISOString();
const rid = (p) => p + "_" + crypto.randomBytes(6).toString("hex");

// ---- fake state ----------------------------------------------------------------------------

const CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
function userCode() {
  let s = "";
  for (let i = 0; i < 8; i++) s += CODE_ALPHABET[crypto.randomInt(CODE_ALPHABET.length)];
  return s.slice(0, 4) + "-" + s.slice(4);
}

let brands = EMPTY
  ? []
  : [
      {
        id: "review",
        name: "Code review",
        description: "Reviews code in my workspace.",
        capability: "review",
        workspace: "workspace",
        accessMode: "read_only",
        scope: { id: "review:read_only", description: "Review code (read only)" },
      },
      {
        id: "docs",
        name: "Docs writer",
        description: "Drafts and edits Markdown docs in the docs folder.",
        capability: "docs",
        workspace: "/home/owner/projects/site/docs",
        accessMode: "read_write",
        scope: { id: "docs:write", description: "Write documentation" },
      },
    ];
const withCard = (b) => ({ ...b, cardUrl: `https://aether.example.com/brands/${encodeURIComponent(b.id)}/.well-known/agent-card.json` });

// The strings the node computes for the owner (site.Describe), written out by hand.
const agent = (issuer, subject, issuerOrigin, site, siteName, host, shown = subject) => ({
  issuer, subject, issuerOrigin, site, siteName, host, claim: `says it is ${shown} — issued by ${siteName}`,
});
const agents = {
  alice: agent("https://agent.example", "alice@example.com", "https://agent.example", "agent.example", "agent.example", "agent.example"),
  bob: agent("https://agents.acme.dev/tenants/42", "bob", "https://agents.acme.dev", "acme.dev", "acme.dev", "agents.acme.dev"),
  // Look-alike: Cyrillic "а" in paypal, shown beside its punycode; subject with RTL override + HTML.
  evil: agent(
    "https://p\u0430ypal.com",
    "\u202Egnp.exe<img src=x onerror=alert(1)> \u001b[31mred\u001b[0m",
    "https://xn--pypal-4ve.com",
    "xn--pypal-4ve.com",
    "p\u0430ypal.com (xn--pypal-4ve.com)",
    "xn--pypal-4ve.com",
    "gnp.exe<img src=x onerror=alert(1)> [31mred[0m",
  ),
  long: agent("https://very-long.example", "x".repeat(10240), "https://very-long.example", "very-long.example", "very-long.example", "very-long.example", "x".repeat(79) + "…"),
};

let pending = [];
const decided = new Map(); // id -> status
function addRequest(agent, brand, ttlMs, createdAgoMs = 0) {
  const r = {
    id: rid("dev"),
    userCode: userCode(),
    agent,
    brand: { id: brand.id, name: brand.name },
    scope: brand.scope,
    createdAt: iso(now() - createdAgoMs),
    expiresAt: iso(now() + ttlMs),
    tokensPerDay: brand.tokensPerDay ?? 0,
  };
  pending.push(r);
  return r;
}
if (!EMPTY) {
  const r0 = addRequest(agents.alice, brands[0], 8 * 60_000, 90_000);
  r0.userCode = "BCDF-GHJK";
  addRequest(agents.evil, brands[1], 50_000, 60_000);
  addRequest(agents.long, brands[0], 4 * 60_000, 30_000);
}

let grants = [];
function makeGrant(agent, brand, issuedAgoDays, durDays, status, uses, lastUsedAgoH) {
  const issued = now() - issuedAgoDays * 86400_000;
  return {
    id: rid("g"),
    agent,
    brand: { id: brand.id, name: brand.name },
    scope: brand.scope,
    accessMode: brand.accessMode,
    issuedAt: iso(issued),
    expiresAt: durDays ? iso(issued + durDays * 86400_000) : null,
    lastUsedAt: lastUsedAgoH === null ? null : iso(now() - lastUsedAgoH * 3600_000),
    uses,
    status,
    revokedAt: status === "revoked" ? iso(now() - 86400_000) : null,
    tokensToday: status === "active" ? 1200 * uses : 0,
    tokensPerDay: brand.tokensPerDay ?? 0,
  };
}
if (!EMPTY) {
  grants = [
    makeGrant(agents.alice, brands[0], 2, 30, "active", 14, 1),
    makeGrant(agents.bob, brands[1], 5, null, "active", 3, 30),
    makeGrant(agents.evil, brands[0], 9, 1, "expired", 0, null),
    makeGrant(agents.bob, brands[0], 20, 30, "revoked", 41, 200),
  ];
}

const b64u = (s) => Buffer.from(s).toString("base64url");
let receipts = [];
const myAgents = [{ name: "claude-desktop", on: true, created: "2026-11-30T09:00:00Z" }];
const received = [
  { id: 1, node: "https://friend.example", rid: "r_mock1", agent: "claude-desktop", brand: "review", task: "t_mock1", status: "completed",
    verified: true, logConsistent: true, problem: "", ran: "Codex 0.169.0, read-only, in bubblewrap 0.8.0: 2 command(s), 0 file(s) changed", receivedAt: "2026-12-01T10:00:00Z" },
];
let prevHash = "0".repeat(64);
const sha = (s) => crypto.createHash("sha256").update(s).digest("hex");
/** mockWork is a receipt's work claim (docs/wire.md, "What the turn did"), as the node escapes and bounds it. */
function mockWork(seq) {
  const line = (c) => "/bin/bash -lc '" + c + "'";
  const cmds = ["rg -n TODO src", "go test ./...", "printf done > notes/review.md"];
  if (seq % 5 === 0) cmds.push("echo '\\x1b[2J' # a terminal escape, shown escaped");
  // A turn past the bound: the first 32 commands, the count and the digest of all 40.
  const count = seq % 7 === 0 ? 40 : cmds.length;
  while (count > cmds.length && cmds.length < 32) cmds.push("sed -n " + cmds.length + "p src/main.go");
  return {
    codex: "0.169.0",
    model: seq % 2 ? "gpt-5.1-codex" : "",
    upstream: "",
    sandbox: seq % 4 ? "workspace-write" : "read-only",
    confinement: "bubblewrap 0.11.0",
    before: "sha256:" + sha("before" + seq),
    after: "sha256:" + sha((seq % 4 ? "after" : "before") + seq),
    commands: {
      count,
      ...(count > cmds.length ? { digest: sha("all" + seq) } : {}),
      items: cmds.map((c, i) => ({ line: line(c), line_sha256: sha(line(c)), status: i === 1 && seq % 11 === 0 ? "failed" : "completed", exit: i === 1 && seq % 11 === 0 ? 1 : 0, ms: 40 + i * 900, output_sha256: sha("out" + i) })),
    },
    files:
      seq % 4
        ? { count: 1, items: [{ path: "notes/review.md", kind: "added", size: 4, sha256: sha("done") }] }
        : { count: 0 },
    patches: { count: 0 },
  };
}

function makeReceipt(seq, startedMs) {
  const g = grants[seq % grants.length] ?? grants[0];
  const status = seq % 11 === 0 ? "failed" : seq % 17 === 0 ? "canceled" : "completed";
  const endedMs = startedMs + 4000 + (seq % 7) * 9000;
  const answerHash = crypto.createHash("sha256").update("answer" + seq).digest("hex");
  const claims = {
    iss: "https://aether.example.com",
    kid: "node-2025-01",
    seq,
    prev_hash: prevHash,
    task_id: "task-" + seq,
    turn_id: "turn-" + seq,
    grant_id: g.id,
    brand: g.brand.id,
    scope: g.scope.id,
    agent: { iss: g.agent.issuer, sub: g.agent.subject },
    status,
    exit_code: status === "failed" ? 1 : 0,
    started_at: Math.floor(startedMs / 1000),
    ended_at: Math.floor(endedMs / 1000),
    request_hash: crypto.createHash("sha256").update("req" + seq).digest("hex"),
    answer_hash: answerHash,
    policy_hash: crypto.createHash("sha256").update("policy").digest("hex"),
    iat: Math.floor(endedMs / 1000),
  };
  if (seq % 3 !== 0) Object.assign(claims, { v: 2, work: mockWork(seq) });
  const jws = b64u(JSON.stringify({ alg: "EdDSA", kid: "node-2025-01", typ: "pact-receipt+jwt" })) + "." + b64u(JSON.stringify(claims)) + "." + crypto.randomBytes(64).toString("base64url");
  prevHash = crypto.createHash("sha256").update(jws).digest("hex");
  return {
    summary: {
      id: "r_" + String(seq).padStart(6, "0"),
      seq,
      taskId: claims.task_id,
      brand: g.brand.id,
      scope: g.scope.id,
      grantId: g.id,
      agent: g.agent,
      status,
      exitCode: claims.exit_code,
      startedAt: iso(startedMs),
      endedAt: iso(endedMs),
      answerHash,
    },
    claims,
    jws,
    verify: seq === 17 ? { ok: false, error: "signature does not match the claims (receipt 17 was edited)" } : { ok: true, error: "" },
  };
}
if (!EMPTY) {
  for (let seq = 1; seq <= 120; seq++) receipts.push(makeReceipt(seq, now() - (121 - seq) * 47 * 60_000));
}

// The receipts log: its newest checkpoint (of every receipt) and, per agent, the agents that
// cosigned a checkpoint holding its last receipt (two agents witness up to receipts 120 and 119).
const witnessedUpTo = [120, 119];
function receiptLog() {
  if (receipts.length === 0) return null;
  const last = receipts[receipts.length - 1].summary;
  const lastSeq = new Map();
  for (const r of receipts) lastSeq.set(r.summary.agent.issuer + " " + r.summary.agent.subject, r.summary);
  const agents = [...lastSeq.values()]
    .sort((a, b) => b.seq - a.seq)
    .map((r) => ({ agent: r.agent, lastSeq: r.seq, witnessedBy: witnessedUpTo.filter((n) => n >= r.seq).length }));
  return {
    origin: "aether.example.com/log",
    size: last.seq,
    root: crypto.createHash("sha256").update("root" + last.seq).digest("base64"),
    time: last.endedAt,
    verify: { ok: true, error: "" },
    witnesses: witnessedUpTo.length,
    agents,
  };
}

// ---- SSE ----------------------------------------------------------------------------------

const clients = new Set();
function broadcast(event, data) {
  const msg = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  for (const res of clients) res.write(msg);
}
setInterval(() => {
  for (const res of clients) res.write(": ping\n\n");
}, 15000).unref();
setInterval(() => {
  const t = now();
  for (const r of [...pending]) {
    if (Date.parse(r.expiresAt) <= t) {
      pending = pending.filter((x) => x !== r);
      decided.set(r.id, "expired");
      broadcast("consent", { pending: pending.length, request: r, kind: "expired" });
    }
  }
}, 1000).unref();

// ---- HTTP ---------------------------------------------------------------------------------

const SECURITY_HEADERS = {
  "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

function send(res, status, body, headers = {}) {
  const isStr = typeof body === "string";
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": isStr ? "text/plain; charset=utf-8" : "application/json", ...headers });
  res.end(isStr ? body : JSON.stringify(body));
}

function readBody(req) {
  return new Promise((resolve) => {
    let s = "";
    req.on("data", (c) => (s += c));
    req.on("end", () => {
      try {
        resolve(s ? JSON.parse(s) : {});
      } catch {
        resolve(null);
      }
    });
  });
}

function cookie(req, name) {
  for (const part of (req.headers.cookie || "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return "";
}

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".json": "application/json" };

function serveStatic(req, res, pathname) {
  let file = path.join(DIST, path.normalize(pathname).replace(/^(\.\.[/\\])+/, ""));
  if (!file.startsWith(DIST) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) file = path.join(DIST, "index.html");
  if (!fs.existsSync(file)) return send(res, 500, "dist/ is missing: run npm run build");
  res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": TYPES[path.extname(file)] || "application/octet-stream" });
  fs.createReadStream(file).pipe(res);
}

function statusBody() {
  return {
    version: "0.3.0",
    gateway: { listen: "127.0.0.1:8080", publicUrl: "https://aether.example.com", paused: false, running: true },
    admin: { url: `https://127.0.0.1:${server.address().port}` },
    brands: brands.map(withCard),
    codex: {
      found: true,
      path: "/home/owner/.cache/codex/bin/codex",
      version: "0.169.0",
      versionOk: true,
      loggedIn: false,
      error: "",
      pinned: "0.171.0",
      pinNote:
        "Codex 0.169.0 is older than 0.171.0, the release this Aether pins and was tested with. Turns run (0.169.0 or newer is supported), without the fixes and tool changes of the releases since. To run 0.171.0, empty the codex path and use Get Codex.",
      credential: { kind: "none", summary: "not signed in", problem: "codex is not signed in" },
    },
    confinement: { available: true, mechanism: "bubblewrap 0.8.0", text: "Confinement: bubblewrap 0.8.0 — each turn sees only its brand's workspace" },
    pending: pending.length,
    policy: { path: "/home/owner/.config/aether/policy.json", error: policyError() },
    lastReceipts: receipts.slice(-5).reverse().map((r) => r.summary),
    model: { keySet: false, baseUrl: "", model: "", codexPath: "", check: null, gateway: { upstream: "https://api.openai.com/v1", keyPresent: false } },
    download: { version: "0.171.0", package: "@openai/codex@0.171.0-linux-x64", state: "installed", done: 0, total: 0, path: "/home/owner/.cache/codex/bin/codex", error: "" },
    setup: [
      { id: "codex", done: true, text: "Codex 0.169.0 is ready", link: "#codex" },
      { id: "model", done: false, text: "codex is not signed in", link: "#model" },
      { id: "brand", done: brands.length > 0, text: `${brands.length} brand(s) offered`, link: "/brands" },
      { id: "reachable", done: true, text: "agents reach this node at https://aether.example.com", link: "#reachability" },
      { id: "ready", done: false, text: "not ready for agents yet", link: "" },
      { id: "agents", done: true, text: "My agents can call other nodes: their issuer is https://aether.example.com/id", link: "/agents" },
    ],
    reachability: { mode: "proxy", state: "off", url: "https://aether.example.com", device: "", reason: "", fix: "", loginUrl: "", probe: "", probeReason: "", inUse: true },
  };
}

function policyError() {
  if (!policyBroken) return null;
  return {
    message: "policy.json: 2 problems; the gateway keeps serving the last good policy",
    problems: [
      { path: "pact.brands[1].workspace", message: "folder does not exist: /home/owner/projects/site/docs" },
      { path: "pact.brands[2].scope.id", message: "scope \"pact\" is reserved: the node adds it" },
    ],
  };
}

function filterReceipts(q) {
  const agent = (q.get("agent") || "").toLowerCase();
  const brand = q.get("brand") || "";
  const status = q.get("status") || "";
  const from = q.get("from") ? Date.parse(q.get("from")) : null;
  const to = q.get("to") ? Date.parse(q.get("to")) : null;
  return receipts
    .slice()
    .reverse()
    .filter((r) => {
      const s = r.summary;
      if (agent && !(s.agent.issuer.toLowerCase().includes(agent) || s.agent.subject.toLowerCase().includes(agent))) return false;
      if (brand && s.brand !== brand) return false;
      if (status && s.status !== status) return false;
      const t = Date.parse(s.startedAt);
      if (from !== null && t < from) return false;
      if (to !== null && t > to) return false;
      return true;
    });
}

function validateBrand(b, id) {
  const fields = [];
  if (!b || typeof b !== "object") return [{ field: "id", message: "body is not a brand" }];
  if (b.id !== id) fields.push({ field: "id", message: "must match the URL" });
  if (!/^[a-z0-9][a-z0-9-]{0,40}$/.test(b.id || "")) fields.push({ field: "id", message: "use lowercase letters, digits and dashes" });
  if (!b.name) fields.push({ field: "name", message: "a name is required" });
  if (!b.workspace) fields.push({ field: "workspace", message: "a workspace folder is required" });
  else if (b.workspace.includes("..") || b.workspace.includes("missing")) fields.push({ field: "workspace", message: `folder does not exist or escapes: ${b.workspace}` });
  if (!["read_only", "read_write"].includes(b.accessMode)) fields.push({ field: "accessMode", message: "must be read_only or read_write" });
  if (!b.scope?.id) fields.push({ field: "scope.id", message: "a scope id is required" });
  else if (b.scope.id === "pact") fields.push({ field: "scope.id", message: "\"pact\" is reserved: the node adds it" });
  return fields;
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  const p = url.pathname;
  const method = req.method;

  if (p === "/login") {
    let token = "";
    if (method === "POST") {
      let body = "";
      for await (const chunk of req) body += chunk;
      token = new URLSearchParams(body).get("token") ?? "";
    }
    if (url.searchParams.get("code") === CODE || (token !== "" && token === TOKEN)) {
      const sid = crypto.randomBytes(16).toString("hex");
      sessions.add(sid);
      res.writeHead(303, { ...SECURITY_HEADERS, Location: "/pact/consent", "Set-Cookie": `aether_session=${sid}; Path=/; HttpOnly; SameSite=Strict` });
      return res.end();
    }
    return send(res, 403, "wrong token");
  }

  if (p.startsWith("/mock/") && method === "POST") {
    if (p === "/mock/consent") {
      const r = addRequest(agents.bob, brands[0] ?? { id: "review", name: "Code review", scope: { id: "review:read_only", description: "Review code" } }, 5 * 60_000);
      broadcast("consent", { pending: pending.length, request: r, kind: "added" });
      return send(res, 200, r);
    }
    const m = p.match(/^\/mock\/(expire|decide)\/(.+)$/);
    if (m) {
      const r = pending.find((x) => x.id === m[2]);
      if (!r) return send(res, 404, { error: "no such request" });
      pending = pending.filter((x) => x !== r);
      decided.set(r.id, m[1] === "expire" ? "expired" : "allowed");
      broadcast("consent", { pending: pending.length, request: r, kind: m[1] === "expire" ? "expired" : "decided" });
      return send(res, 200, {});
    }
    if (p === "/mock/receipt") {
      const r = makeReceipt(receipts.length + 1, now() - 5000);
      receipts.push(r);
      broadcast("receipt", r.summary);
      return send(res, 200, r.summary);
    }
    if (p === "/mock/policy") {
      policyBroken = !policyBroken;
      broadcast("policy", {});
      return send(res, 200, {});
    }
    return send(res, 404, { error: "not found" });
  }

  if (!p.startsWith("/api/")) return serveStatic(req, res, p);

  if (AUTH && !sessions.has(cookie(req, "aether_session"))) return send(res, 401, { error: "sign in required" });
  if (method !== "GET" && req.headers["x-csrf-token"] !== CSRF) return send(res, 403, { error: "missing or wrong CSRF token" });

  let m;
  if (p === "/api/session" && method === "GET") return send(res, 200, { csrfToken: CSRF, desktop: flag("--desktop") });
  if (p === "/api/status" && method === "GET") return send(res, 200, statusBody());
  if (p === "/api/consent" && method === "GET") return send(res, 200, { requests: pending });
  if ((m = p.match(/^\/api\/consent\/([^/]+)\/decision$/)) && method === "POST") {
    const id = decodeURIComponent(m[1]);
    const body = await readBody(req);
    if (!body || !["allow", "deny"].includes(body.decision)) return send(res, 400, { error: "bad request" });
    const r = pending.find((x) => x.id === id);
    if (!r) {
      const st = decided.get(id);
      if (st === "expired") return send(res, 410, { status: "expired", error: "the request has expired" });
      if (st) return send(res, 409, { status: "already_decided", error: "the request was already decided" });
      return send(res, 400, { error: "unknown request" });
    }
    if (body.userCode !== r.userCode) return send(res, 400, { error: "the code does not match this request" });
    pending = pending.filter((x) => x !== r);
    await new Promise((ok) => setTimeout(ok, 300));
    if (body.decision === "deny") {
      decided.set(id, "denied");
      broadcast("consent", { pending: pending.length, request: r, kind: "decided" });
      return send(res, 200, { status: "denied" });
    }
    decided.set(id, "allowed");
    const brand = brands.find((b) => b.id === r.brand.id) ?? brands[0];
    const days = body.duration === "1d" ? 1 : body.duration === "30d" ? 30 : null;
    const g = makeGrant(r.agent, brand, 0, days, "active", 0, null);
    if (Number.isInteger(body.tokensPerDay) && body.tokensPerDay >= 0) g.tokensPerDay = body.tokensPerDay;
    grants.unshift(g);
    broadcast("consent", { pending: pending.length, request: r, kind: "decided" });
    broadcast("grant", g);
    return send(res, 200, { status: "allowed", grant: g });
  }
  if (p === "/api/grants" && method === "GET") return send(res, 200, { grants });
  if ((m = p.match(/^\/api\/grants\/([^/]+)\/revoke$/)) && method === "POST") {
    const g = grants.find((x) => x.id === decodeURIComponent(m[1]));
    if (!g) return send(res, 404, { error: "no such grant" });
    if (g.status === "active") {
      g.status = "revoked";
      g.revokedAt = iso(now());
      broadcast("grant", g);
    }
    return send(res, 200, { grant: g });
  }
  if (p === "/api/receipts/received" && method === "GET") {
    return send(res, 200, { receipts: received });
  }
  if (p === "/api/agents" && method === "GET") {
    return send(res, 200, { agents: myAgents, issuer: "https://aether.example.ts.net/id", ready: true, missing: "" });
  }
  if (p === "/api/agents" && method === "POST") {
    const b = await readBody(req);
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(b.name || "")) return send(res, 400, { error: "invalid request: an agent's name is 1 to 64 characters" });
    const a = { name: b.name, on: true, created: iso(now()) };
    myAgents.push(a);
    return send(res, 200, a);
  }
  if ((m = p.match(/^\/api\/agents\/([^/]+)$/)) && method === "POST") {
    const a = myAgents.find((x) => x.name === decodeURIComponent(m[1]));
    if (!a) return send(res, 404, { error: "not found" });
    a.on = Boolean((await readBody(req)).on);
    return send(res, 200, a);
  }
  if (p === "/api/receipts/export" && method === "GET") {
    const lines = filterReceipts(url.searchParams).map((r) => JSON.stringify({ ...r.summary, jws: r.jws })).join("\n");
    return send(res, 200, lines + "\n", { "Content-Type": "application/x-ndjson", "Content-Disposition": 'attachment; filename="receipts.jsonl"' });
  }
  if (p === "/api/receipts" && method === "GET") {
    let list = filterReceipts(url.searchParams);
    const cursor = url.searchParams.get("cursor");
    if (cursor) list = list.filter((r) => r.summary.seq < Number(cursor.replace(/^s/, "")));
    const limit = Math.min(Number(url.searchParams.get("limit") || 50), 200);
    const page = list.slice(0, limit);
    const next = list.length > limit ? "s" + page[page.length - 1].summary.seq : "";
    return send(res, 200, { receipts: page.map((r) => r.summary), nextCursor: next, log: receiptLog() });
  }
  if ((m = p.match(/^\/api\/receipts\/([^/]+)$/)) && method === "GET") {
    const r = receipts.find((x) => x.summary.id === decodeURIComponent(m[1]));
    if (!r) return send(res, 404, { error: "no such receipt" });
    return send(res, 200, { receipt: r.summary, claims: r.claims, jws: r.jws, verify: r.verify });
  }
  if (p === "/api/brands" && method === "GET") {
    return send(res, 200, { policyPath: "/home/owner/.config/aether/policy.json", brands: brands.map(withCard), error: policyError() });
  }
  if ((m = p.match(/^\/api\/brands\/([^/]+)$/))) {
    const id = decodeURIComponent(m[1]);
    if (method === "PUT") {
      const b = await readBody(req);
      const fields = validateBrand(b, id);
      if (fields.length) return send(res, 422, { error: "the brand is not valid", fields });
      const clean = { id: b.id, name: b.name, description: b.description || "", capability: b.capability || "", workspace: b.workspace, accessMode: b.accessMode, scope: { id: b.scope.id, description: b.scope.description || "" } };
      const i = brands.findIndex((x) => x.id === id);
      if (i >= 0) brands[i] = clean;
      else brands.push(clean);
      broadcast("policy", {});
      return send(res, 200, { brands: brands.map(withCard) });
    }
    if (method === "DELETE") {
      brands = brands.filter((x) => x.id !== id);
      broadcast("policy", {});
      return send(res, 200, { brands: brands.map(withCard) });
    }
  }
  if (p === "/api/events" && method === "GET") {
    if (NO_SSE) return send(res, 404, { error: "no events in this mock run" });
    res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": "text/event-stream", Connection: "keep-alive" });
    res.write(": hello\n\n");
    clients.add(res);
    req.on("close", () => clients.delete(res));
    return;
  }
  return send(res, 404, { error: "not found" });
});

server.listen(PORT, "127.0.0.1", () => {
  console.log(`mock admin API on http://127.0.0.1:${server.address().port}/` + (AUTH ? ` (sign in: /login?code=${CODE}, or the token ${TOKEN})` : ""));
});
