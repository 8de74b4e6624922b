#!/usr/bin/env node
// pact-turn.mjs drives one whole delegated PACT turn against an Aether node with the official
// A2A JavaScript SDK (@a2a-js/sdk, pinned in package.json): a second client, written
// independently of a2a-go, reading the same wire (docs/wire.md). backend/e2e/jssdk_test.go runs
// it once per binding against a real node with the fake Codex and approves the device flow.
//
//   PACT_IDENTITY_TOKEN=<identity JWT> node interop/pact-turn.mjs \
//       --card <publicUrl>/a2a/<brand>/.well-known/agent-card.json --binding JSONRPC|HTTP+JSON \
//       [--answer "<the text the fake Codex answers>"] [--timeout <seconds for each wait, 30>]
//
// It prints one JSON line per step on stdout:
//
//   {"step": "card", "status": "pass", ...}
//   {"step": "…", "status": "departure", "departure": "<id>", "expected": …, "got": …}
//   {"step": "…", "status": "fail", "expected": …, "got": …}
//
// and, once the device authorization answered, a line {"userCode": "BCDF-GHJK"} for the caller
// to approve as the owner. "departure" is a documented difference between the node and A2A 1.0
// ("## Interop: the A2A JavaScript SDK" in docs/wire.md): the step saw exactly what the node is
// known to do instead of what the spec asks, and the run goes on. Any other mismatch is "fail",
// and the run stops there with exit status 1. Exit status 2 is a usage error.

import { randomUUID, createHash, createPublicKey, verify } from "node:crypto";
import { parseArgs } from "node:util";

import { SendMessageRequest, ListTasksRequest, TaskState, taskStateToJSON } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  createAuthenticatingFetchWithRetry,
} from "@a2a-js/sdk/client";

// ---- arguments -------------------------------------------------------------------------------

const { values: args } = parseArgs({
  options: {
    card: { type: "string" },
    binding: { type: "string" },
    answer: { type: "string", default: "Hello from fake codex" },
    timeout: { type: "string", default: "30" },
  },
});
const identity = process.env.PACT_IDENTITY_TOKEN ?? "";
if (!args.card || !["JSONRPC", "HTTP+JSON"].includes(args.binding) || !identity) {
  process.stderr.write(
    "usage: PACT_IDENTITY_TOKEN=<jwt> node pact-turn.mjs --card <card URL> --binding JSONRPC|HTTP+JSON [--answer TEXT]\n",
  );
  process.exit(2);
}
const binding = args.binding;
const cardUrl = args.card;
const brandUrl = cardUrl.replace(/\/\.well-known\/agent-card\.json$/, "");
const waitMs = Number(args.timeout) * 1000;
const DELEGATION_HEADER = "PACT-Delegation";
const EXTENSION_URI = "urn:pact:extension:delegation:v1";

// ---- reporting -------------------------------------------------------------------------------

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

/** Mismatch: the node answered something neither the spec nor the documented departure names. */
class Mismatch extends Error {
  constructor(what, expected, got) {
    super(what);
    this.expected = expected;
    this.got = got;
  }
}

/** Departure: the node did exactly what docs/wire.md records as its known departure. */
class Departure extends Error {
  constructor(id, expected, got) {
    super(id);
    this.id = id;
    this.expected = expected;
    this.got = got;
  }
}

function expect(cond, what, expected, got) {
  if (!cond) throw new Mismatch(what, expected, got);
}

/**
 * departs decides a check that has a documented departure: the spec's answer passes, the known
 * departure is reported as such, anything else fails.
 */
function departs({ id, spec, known, expected, got, what }) {
  if (spec) return;
  if (known) throw new Departure(id, expected, got);
  throw new Mismatch(what ?? id, expected, got);
}

async function step(name, fn) {
  const started = Date.now();
  try {
    const got = await fn();
    emit({ step: name, status: "pass", binding, ms: Date.now() - started, ...(got === undefined ? {} : { got }) });
  } catch (e) {
    if (e instanceof Departure) {
      emit({ step: name, status: "departure", binding, departure: e.id, expected: e.expected, got: e.got });
      return;
    }
    const out = { step: name, status: "fail", binding, message: e.message };
    if (e instanceof Mismatch) {
      out.expected = e.expected;
      out.got = e.got;
    } else {
      out.got = describeError(e);
      out.stack = String(e.stack ?? "").split("\n").slice(0, 6).join("\n");
    }
    emit(out);
    process.exit(1);
  }
}

// ---- the wire, as the SDK sees it ------------------------------------------------------------

/**
 * recordingFetch is the fetch every SDK transport gets: it keeps the last exchange (request
 * headers and body, response status, headers and body text, SSE streams included) so a step can
 * check the raw JSON the SDK parsed, and what the SDK's typed objects hide (a default-filled
 * field, a dropped member, an HTTP status).
 */
const wire = { last: null, all: [] };
async function recordingFetch(input, init = {}) {
  const url = String(input instanceof Request ? input.url : input);
  const headers = new Headers(init.headers);
  const ex = {
    method: init.method ?? "GET",
    url,
    request: Object.fromEntries(headers.entries()),
    requestBody: typeof init.body === "string" ? init.body : undefined,
  };
  wire.last = ex;
  wire.all.push(ex);
  const res = await fetch(input, init);
  ex.status = res.status;
  ex.headers = Object.fromEntries(res.headers.entries());
  if (!res.body) {
    ex.body = Promise.resolve("");
    return res;
  }
  const [mine, theirs] = res.body.tee();
  ex.body = new Response(mine).text().catch(() => "");
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
}

async function lastJSON() {
  const text = await wire.last.body;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The data objects of an SSE body, in order. */
function sseData(text) {
  return text
    .split(/\r?\n\r?\n/)
    .map((ev) =>
      ev
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n"),
    )
    .filter(Boolean)
    .map((d) => JSON.parse(d));
}

function describeError(e) {
  if (!e || typeof e !== "object") return String(e);
  let cause = e;
  // The JSON-RPC transport wraps an error event of a stream; the semantic error is its cause.
  if (!e.envelopeCode && !e.statusCode && e.cause && typeof e.cause === "object") cause = e.cause;
  return {
    name: cause.name,
    message: cause.message,
    ...(cause.envelopeCode !== undefined ? { jsonrpcCode: cause.envelopeCode } : {}),
    ...(cause.statusCode !== undefined ? { httpStatus: cause.statusCode } : {}),
  };
}

// ---- the SDK client --------------------------------------------------------------------------

// The identity JWT on every call, through the SDK's own authentication hook.
const authFetch = createAuthenticatingFetchWithRetry(recordingFetch, {
  headers: async () => ({ Authorization: `Bearer ${identity}` }),
  shouldRetryWithHeaders: async () => undefined,
});

// The delegation token on turns only (SendMessage, SendStreamingMessage), as a service parameter
// added by a CallInterceptor: the SDK sends service parameters as HTTP headers.
const delegation = { token: "" };
const delegationInterceptor = {
  async before(a) {
    if (delegation.token && (a.input.method === "sendMessage" || a.input.method === "sendMessageStream") && a.options) {
      a.options.serviceParameters = { ...a.options.serviceParameters, [DELEGATION_HEADER]: delegation.token };
    }
  },
  async after() {},
};

function userMessage(text, { taskId, contextId } = {}) {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: randomUUID(),
      role: "ROLE_USER",
      parts: [{ text }],
      ...(taskId ? { taskId } : {}),
      ...(contextId ? { contextId } : {}),
    },
  });
}

const state = (s) => taskStateToJSON(s ?? 0);
const textOf = (parts = []) =>
  parts
    .filter((p) => p.content?.$case === "text")
    .map((p) => p.content.value)
    .join("");
const dataOf = (parts = []) => parts.find((p) => p.content?.$case === "data")?.content.value;
const isTask = (r) => r && typeof r === "object" && "status" in r && "id" in r && !("messageId" in r);

/** describe names a stream event for order checks: "task:TASK_STATE_SUBMITTED", "artifact:answer". */
function describe(ev) {
  const p = ev.payload;
  switch (p?.$case) {
    case "task":
      return "task:" + state(p.value.status?.state);
    case "statusUpdate":
      return "status:" + state(p.value.status?.state);
    case "artifactUpdate":
      return "artifact:" + p.value.artifact?.name;
    case "message":
      return "message";
  }
  return "?";
}

/** collect reads a stream to its end, within the wait limit. */
async function collect(gen, what) {
  const evs = [];
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Mismatch(`${what} did not end`, `a stream that ends within ${waitMs / 1000}s`, evs.map(describe))),
      waitMs,
    );
  });
  const read = (async () => {
    for await (const ev of gen) evs.push(ev);
  })();
  try {
    await Promise.race([read, timeout]);
  } finally {
    clearTimeout(timer);
  }
  return evs;
}

async function expectError(what, call, want) {
  let res;
  try {
    res = await call();
    if (res && typeof res[Symbol.asyncIterator] === "function") {
      res = (await collect(res, what)).map(describe);
    }
  } catch (e) {
    return { error: describeError(e), exchange: wire.last };
  }
  throw new Mismatch(`${what} did not fail`, want, res);
}

// ---- shared state between steps --------------------------------------------------------------

let card; // the SDK's AgentCard
let rawCard; // the card's JSON as served
let client;
let scope;
let waiting; // the AUTH_REQUIRED task
let auth; // its data part
let done; // the delegated turn's finished task
let streamed; // the streamed turn's task id
let jwks;

// ---- steps -----------------------------------------------------------------------------------

// The card, through the SDK's resolver, with no credentials; the client picks the binding.
await step("card", async () => {
  const resolver = new DefaultAgentCardResolver({ fetchImpl: recordingFetch });
  card = await resolver.resolve(cardUrl, "");
  rawCard = await lastJSON();
  expect(wire.last.status === 200, "card status", 200, wire.last.status);
  expect(typeof card.name === "string" && card.name !== "", "card name", "a name", card.name);
  const ifs = (card.supportedInterfaces ?? []).map((i) => [i.protocolBinding, i.url, i.protocolVersion]);
  expect(
    JSON.stringify(ifs) === JSON.stringify([["JSONRPC", brandUrl, "1.0"], ["HTTP+JSON", brandUrl, "1.0"]]),
    "supportedInterfaces",
    [["JSONRPC", brandUrl, "1.0"], ["HTTP+JSON", brandUrl, "1.0"]],
    ifs,
  );
  expect(card.capabilities?.streaming === true, "capabilities.streaming", true, card.capabilities?.streaming);
  const ext = (card.capabilities?.extensions ?? []).find((x) => x.uri === EXTENSION_URI);
  expect(ext && ext.params?.header === DELEGATION_HEADER, "the PACT extension", { uri: EXTENSION_URI, params: { header: DELEGATION_HEADER } }, card.capabilities?.extensions);
  scope = ext.params.scope;
  const agent = card.securitySchemes?.pactAgent?.scheme;
  expect(
    agent?.$case === "httpAuthSecurityScheme" && agent.value.scheme.toLowerCase() === "bearer" && agent.value.bearerFormat === "JWT",
    "securitySchemes.pactAgent",
    { httpAuthSecurityScheme: { scheme: "bearer", bearerFormat: "JWT" } },
    agent,
  );
  const deleg = card.securitySchemes?.pactDelegation?.scheme;
  const flow = deleg?.value?.flows?.flow;
  expect(
    deleg?.$case === "oauth2SecurityScheme" && flow?.$case === "deviceCode" && flow.value.scopes?.[scope] !== undefined,
    "securitySchemes.pactDelegation",
    { oauth2SecurityScheme: { flows: { deviceCode: { scopes: { [scope]: "…" } } } } },
    deleg,
  );
  expect(
    (card.securityRequirements ?? []).some((r) => "pactAgent" in (r.schemes ?? {})),
    "the card's securityRequirements",
    [{ schemes: { pactAgent: { list: [] } } }],
    card.securityRequirements,
  );
  expect((card.skills ?? []).length === 1, "one skill", 1, card.skills);

  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch }), new RestTransportFactory({ fetchImpl: authFetch })],
      preferredTransports: [binding],
      clientConfig: { interceptors: [delegationInterceptor] },
    }),
  );
  client = await factory.createFromAgentCard(card);
  expect(client.transport.protocolName === binding, "the transport the client chose", binding, client.transport.protocolName);
  return { name: card.name, version: card.version, scope, transport: client.transport.protocolName };
});

// A2A 1.0 (a2a.proto): SecurityRequirement.schemes is map<string, StringList>, whose ProtoJSON is
// {"<scheme>": {"list": ["<scope>", …]}}. The SDK reads that form only; a bare array loses the scopes.
// Fixed: the node serves this form (docs/wire.md, Interop, 1).
await step("card security requirements in the ProtoJSON list form", async () => {
  const skill = card.skills[0];
  const got = skill.securityRequirements?.[0]?.schemes?.pactDelegation?.list ?? [];
  const raw = rawCard?.skills?.[0]?.securityRequirements?.[0]?.schemes?.pactDelegation;
  departs({
    id: "security-requirements-list",
    spec: got.includes(scope) && JSON.stringify(raw) === JSON.stringify({ list: [scope] }),
    known: Array.isArray(raw) && raw.includes(scope) && got.length === 0,
    expected: { served: { pactDelegation: { list: [scope] } }, sdkReads: [scope] },
    got: { served: { pactDelegation: raw }, sdkReads: got },
  });
});

// Card caching (A2A 1.0 §8.6): ETag and Cache-Control, 304 on If-None-Match (plain fetch: the SDK's
// resolver sends no conditional request and takes a 304 for a failure).
await step("card ETag and 304", async () => {
  const r = await fetch(cardUrl);
  const etag = r.headers.get("etag");
  expect(r.status === 200 && /^"[^"]+"$/.test(etag ?? ""), "a strong ETag", '"…"', { status: r.status, etag });
  expect(/max-age=\d+/.test(r.headers.get("cache-control") ?? ""), "Cache-Control max-age", "max-age=N", r.headers.get("cache-control"));
  const again = await fetch(cardUrl, { headers: { "If-None-Match": etag } });
  expect(again.status === 304, "If-None-Match with the ETag", 304, again.status);
  return { etag, cacheControl: r.headers.get("cache-control") };
});

await step("card Last-Modified and If-Modified-Since", async () => {
  const r = await fetch(cardUrl);
  const lm = r.headers.get("last-modified");
  let cond = null;
  if (lm) cond = (await fetch(cardUrl, { headers: { "If-Modified-Since": lm } })).status;
  departs({
    id: "card-last-modified",
    spec: lm !== null && cond === 304,
    known: lm === null,
    expected: { "last-modified": "<HTTP date>", ifModifiedSince: 304 },
    got: { "last-modified": lm, ifModifiedSince: cond },
  });
});

// A turn without a delegation: the node answers TASK_STATE_AUTH_REQUIRED with the consent data part.
await step("AUTH_REQUIRED", async () => {
  const res = await client.sendMessage(userMessage("Review main.go please"));
  const raw = await lastJSON();
  expect(isTask(res), "SendMessage result", "a Task", res);
  expect(res.status?.state === TaskState.TASK_STATE_AUTH_REQUIRED, "task state", "TASK_STATE_AUTH_REQUIRED", state(res.status?.state));
  const rawTask = binding === "JSONRPC" ? raw?.result?.task : raw?.task;
  expect(rawTask?.status?.state === "TASK_STATE_AUTH_REQUIRED", "the task on the wire", { task: { status: { state: "TASK_STATE_AUTH_REQUIRED" } } }, raw);
  waiting = res;
  auth = dataOf(res.status.message?.parts);
  expect(auth && typeof auth === "object", "the status message's data part", "an object", res.status.message);
  const flow = card.securitySchemes.pactDelegation.scheme.value.flows.flow.value;
  const want = {
    reason: "missing",
    deviceAuthorizationUrl: flow.deviceAuthorizationUrl,
    tokenUrl: flow.tokenUrl,
    scope,
    credentialHeader: DELEGATION_HEADER,
    resumeTaskId: res.id,
    brand: brandUrl.split("/").at(-1),
  };
  for (const [k, v] of Object.entries(want)) expect(auth[k] === v, `data part ${k}`, v, auth[k]);
  expect(/^https:\/\/127\.0\.0\.1:\d+\/pact\/consent$/.test(auth.consentUrl ?? ""), "data part consentUrl", "https://127.0.0.1:<admin port>/pact/consent", auth.consentUrl);
  expect(textOf(res.status.message.parts) !== "", "the status message's text part", "a text", res.status.message.parts);
  expect((res.artifacts ?? []).length === 0, "no artifacts", [], res.artifacts);
  return { task: res.id, reason: auth.reason, contentType: wire.last.headers["content-type"] };
});

await step("AUTH_REQUIRED streamed", async () => {
  const evs = await collect(client.sendMessageStream(userMessage("Review main.go please")), "the stream without delegation");
  const seq = evs.map(describe);
  expect(seq.length === 1 && seq[0] === "task:TASK_STATE_AUTH_REQUIRED", "the stream without delegation", ["task:TASK_STATE_AUTH_REQUIRED"], seq);
  expect(dataOf(evs[0].payload.value.status.message?.parts)?.reason === "missing", "its data part's reason", "missing", dataOf(evs[0].payload.value.status.message?.parts));
  return seq;
});

// The device flow, with plain fetch (RFC 8628); the caller approves the user code as the owner.
let device;
await step("device authorization", async () => {
  const r = await fetch(auth.deviceAuthorizationUrl, {
    method: "POST",
    headers: { Authorization: `Bearer ${identity}`, "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ scope }),
  });
  device = await r.json();
  expect(r.status === 200, "device authorization status", 200, { status: r.status, body: device });
  expect(typeof device.device_code === "string" && device.device_code.length >= 22, "device_code", "a device code", device.device_code);
  expect(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/.test(device.user_code ?? ""), "user_code", "XXXX-XXXX", device.user_code);
  expect(device.verification_uri === auth.consentUrl, "verification_uri", auth.consentUrl, device.verification_uri);
  expect(device.verification_uri_complete === `${auth.consentUrl}?user_code=${device.user_code}`, "verification_uri_complete", `${auth.consentUrl}?user_code=${device.user_code}`, device.verification_uri_complete);
  expect(Number.isInteger(device.expires_in) && device.expires_in > 0, "expires_in", "seconds", device.expires_in);
  expect(Number.isInteger(device.interval) && device.interval > 0, "interval", "seconds", device.interval);
  emit({ userCode: device.user_code });
  return { user_code: device.user_code, interval: device.interval, expires_in: device.expires_in };
});

await step("token polled with the device code", async () => {
  let interval = device.interval;
  const deadline = Date.now() + Math.min(device.expires_in * 1000, 4 * waitMs);
  const seen = [];
  for (;;) {
    await new Promise((r) => setTimeout(r, interval * 1000));
    const r = await fetch(auth.tokenUrl, {
      method: "POST",
      headers: { Authorization: `Bearer ${identity}`, "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: device.device_code }),
    });
    const body = await r.json();
    expect(r.headers.get("cache-control") === "no-store", "the token answer's Cache-Control", "no-store", r.headers.get("cache-control"));
    if (r.status === 200) {
      expect(typeof body.access_token === "string" && body.token_type === "Bearer" && body.scope === scope && body.expires_in > 0, "the token answer", { access_token: "…", token_type: "Bearer", scope, expires_in: "seconds" }, body);
      delegation.token = body.access_token;
      seen.push("token");
      return { polls: seen, interval };
    }
    seen.push(body.error);
    if (body.error === "slow_down") interval += 5;
    else expect(body.error === "authorization_pending", "a poll before the owner decided", "authorization_pending or slow_down", { status: r.status, body });
    expect(Date.now() < deadline, "the owner's approval", "a token before the wait ran out", seen);
  }
});

// The node's JWKS, to verify receipts on our own (Ed25519 with node:crypto).
async function receiptOf(task) {
  if (!jwks) {
    const meta = await (await fetch(card.securitySchemes.pactDelegation.scheme.value.oauth2MetadataUrl)).json();
    jwks = await (await fetch(meta.jwks_uri)).json();
  }
  const art = (task.artifacts ?? []).find((a) => a.name === "receipt");
  expect(art, "a receipt artifact", "receipt", (task.artifacts ?? []).map((a) => a.name));
  // The receipt's text parts: its JWS, and beside it its C2SP tlog-proof (docs/wire.md, "The receipts log").
  const proofPart = (p) => p.content?.$case === "text" && p.content.value.startsWith("c2sp.org/tlog-proof@v1\n");
  expect(art.parts.some(proofPart), "the receipt's tlog-proof part", "c2sp.org/tlog-proof@v1", art.parts.length);
  const jws = textOf(art.parts.filter((p) => !proofPart(p)));
  const claims = dataOf(art.parts);
  const [h, p, s] = jws.split(".");
  expect(h && p && s, "the receipt's compact JWS", "header.payload.signature", jws);
  const header = JSON.parse(Buffer.from(h, "base64url").toString());
  const key = (jwks.keys ?? []).find((k) => k.kid === header.kid);
  expect(key && header.alg === "EdDSA" && header.typ === "pact-receipt+jwt", "the receipt header and its key in the JWKS", { alg: "EdDSA", typ: "pact-receipt+jwt", kid: "<in the JWKS>" }, header);
  const { kty, crv, x } = key;
  const ok = verify(null, Buffer.from(`${h}.${p}`), createPublicKey({ key: { kty, crv, x }, format: "jwk" }), Buffer.from(s, "base64url"));
  expect(ok, "the receipt's signature", "valid with the node JWKS", false);
  const signed = JSON.parse(Buffer.from(p, "base64url").toString());
  // The data part is the signed claims with their names in camelCase (compared whatever the key
  // order); the JWS keeps the JWT names (docs/wire.md, "Receipts").
  expect(canonical(camelize(signed)) === canonical(claims), "the receipt's data part", "the signed claims in camelCase", { dataPart: claims, signed });
  return signed;
}

/** camelize renames snake_case keys to camelCase at every level. */
function camelize(v) {
  if (Array.isArray(v)) return v.map(camelize);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase()), camelize(x)]));
  }
  return v;
}

/** canonical is JSON with sorted keys, to compare two objects whatever their key order. */
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

function answerOf(task) {
  const art = (task.artifacts ?? []).find((a) => a.name === "answer");
  return art ? textOf(art.parts) : undefined;
}

// The delegated turn, on the AUTH_REQUIRED task, with the PACT-Delegation header.
await step("delegated turn", async () => {
  const res = await client.sendMessage(userMessage("Review main.go please", { taskId: auth.resumeTaskId }));
  expect(wire.last.request[DELEGATION_HEADER.toLowerCase()] === delegation.token, "the PACT-Delegation header on the turn", "the token", wire.last.request);
  expect(isTask(res) && res.id === waiting.id, "the resumed task", waiting.id, res?.id);
  expect(res.status?.state === TaskState.TASK_STATE_COMPLETED, "task state", "TASK_STATE_COMPLETED", { state: state(res.status?.state), text: textOf(res.status?.message?.parts) });
  const names = (res.artifacts ?? []).map((a) => a.name);
  expect(JSON.stringify(names) === JSON.stringify(["answer", "receipt"]), "artifacts", ["answer", "receipt"], names);
  expect(answerOf(res) === args.answer, "the answer", args.answer, answerOf(res));
  const claims = await receiptOf(res);
  expect(claims.task === res.id && claims.status === "completed", "the receipt's task and status", { task: res.id, status: "completed" }, { task: claims.task, status: claims.status });
  expect(claims.ans === createHash("sha256").update(args.answer).digest("hex"), "the receipt's ans", "sha256(answer)", claims.ans);
  done = res;
  return { task: res.id, receipt: claims.rid, seq: claims.seq };
});

// JSON that clients see is camelCase (A2A 1.0 §5.5): the receipt's data part and the task's metadata.
// Fixed (docs/wire.md, Interop, 3): the data part used the signed claims' snake_case names.
await step("receipt data part in camelCase", async () => {
  const claims = dataOf(done.artifacts.find((a) => a.name === "receipt").parts);
  const snake = [];
  const walk = (o, path) => {
    if (!o || typeof o !== "object" || Array.isArray(o)) return;
    for (const [k, v] of Object.entries(o)) {
      if (k.includes("_")) snake.push(path + k);
      walk(v, path + k + ".");
    }
  };
  walk(claims, "");
  walk(done.metadata, "metadata.");
  expect(snake.length === 0, "no snake_case keys", [], snake);
  const named = {
    pactScope: claims.pactScope,
    grantRevoked: claims.grantRevoked,
    usage: Object.keys(claims.usage ?? {}).sort(),
  };
  const want = { pactScope: "pact", grantRevoked: false, usage: ["cachedInputTokens", "inputTokens", "outputTokens"] };
  expect(canonical(named) === canonical(want), "the camelCase names", want, named);
  return named;
});

// A streamed turn: submitted → working… → answer → receipt → completed, then the stream ends.
await step("streamed turn", async () => {
  const evs = await collect(client.sendMessageStream(userMessage("Review main.go please [fake:tools]")), "the delegated stream");
  const seq = evs.map(describe);
  const ok =
    seq[0] === "task:TASK_STATE_SUBMITTED" &&
    seq[1] === "status:TASK_STATE_WORKING" &&
    seq.slice(1, -3).every((s) => s === "status:TASK_STATE_WORKING") &&
    JSON.stringify(seq.slice(-3)) === JSON.stringify(["artifact:answer", "artifact:receipt", "status:TASK_STATE_COMPLETED"]);
  expect(ok, "the event order", ["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "…status:TASK_STATE_WORKING", "artifact:answer", "artifact:receipt", "status:TASK_STATE_COMPLETED"], seq);
  const id = evs[0].payload.value.id;
  const ctx = evs[0].payload.value.contextId;
  for (const ev of evs.slice(1)) {
    expect(ev.payload.value.taskId === id && ev.payload.value.contextId === ctx, "every event's taskId and contextId", { taskId: id, contextId: ctx }, ev.payload.value);
  }
  const raw = sseData(await wire.last.body);
  const result = binding === "JSONRPC" ? raw.map((r) => r.result) : raw;
  expect(
    result.length === evs.length && result.every((r, i) => Object.keys(r).length === 1 && Object.keys(r)[0] === evs[i].payload.$case),
    "each SSE event is one StreamResponse member",
    evs.map((e) => e.payload.$case),
    result.map((r) => Object.keys(r ?? {})),
  );
  streamed = id;
  const answer = evs.find((e) => describe(e) === "artifact:answer").payload.value.artifact;
  expect(textOf(answer.parts) === args.answer, "the streamed answer", args.answer, textOf(answer.parts));
  return seq;
});

await step("GetTask", async () => {
  const t = await client.getTask({ tenant: "", id: streamed });
  expect(t.id === streamed && t.status?.state === TaskState.TASK_STATE_COMPLETED, "the streamed task", { id: streamed, state: "TASK_STATE_COMPLETED" }, { id: t.id, state: state(t.status?.state) });
  const names = (t.artifacts ?? []).map((a) => a.name);
  expect(JSON.stringify(names) === JSON.stringify(["answer", "receipt"]), "its artifacts", ["answer", "receipt"], names);
  const claims = await receiptOf(t);
  expect(claims.task === streamed, "its receipt", streamed, claims.task);
  const h0 = await client.getTask({ tenant: "", id: streamed, historyLength: 0 });
  expect((h0.history ?? []).length === 0, "historyLength 0", "no history", (h0.history ?? []).length);
  const h1 = await client.getTask({ tenant: "", id: streamed, historyLength: 1 });
  expect((h1.history ?? []).length <= 1, "historyLength 1", "at most one message", (h1.history ?? []).length);
  return { state: state(t.status.state), history: (t.history ?? []).length };
});

// A2A-Extensions (A2A 1.0 §3.2.6, §4.6; docs/pact-extension.md): the answer names the PACT extension
// when the request asked for it, among other URIs, and not otherwise; the AUTH_REQUIRED status
// message and the receipt artifact name it as the extension that contributed them.
await step("A2A-Extensions activates the PACT extension", async () => {
  const asked = `https://example.com/ext/other/v1, ${EXTENSION_URI}`;
  await client.getTask({ tenant: "", id: streamed }, { serviceParameters: { "A2A-Extensions": asked } });
  const sent = wire.last.request["a2a-extensions"];
  const answered = wire.last.headers["a2a-extensions"];
  expect(sent === asked, "the request's A2A-Extensions", asked, sent ?? null);
  expect(answered === EXTENSION_URI, "the answer's A2A-Extensions", EXTENSION_URI, answered ?? null);
  await client.getTask({ tenant: "", id: streamed });
  const unasked = wire.last.headers["a2a-extensions"];
  expect(unasked === undefined, "no A2A-Extensions in the answer when none was asked for", null, unasked);
  const msgExt = waiting.status?.message?.extensions ?? [];
  expect(msgExt.includes(EXTENSION_URI), "the AUTH_REQUIRED status message's extensions", [EXTENSION_URI], msgExt);
  const artExt = done.artifacts.find((a) => a.name === "receipt")?.extensions ?? [];
  expect(artExt.includes(EXTENSION_URI), "the receipt artifact's extensions", [EXTENSION_URI], artExt);
  return { sent, answered };
});

await step("GetTask of an unknown task is TaskNotFound", async () => {
  const { error, exchange } = await expectError("GetTask of an unknown task", () => client.getTask({ tenant: "", id: randomUUID() }), "TaskNotFoundError");
  const want = binding === "JSONRPC" ? { name: "TaskNotFoundError", jsonrpcCode: -32001 } : { name: "TaskNotFoundError", httpStatus: 404 };
  for (const [k, v] of Object.entries(want)) expect(error[k] === v, "the error", want, error);
  return { error, http: exchange.status };
});

await step("ListTasks", async () => {
  const page = await client.listTasks(ListTasksRequest.fromJSON({}));
  const raw = await lastJSON();
  const body = binding === "JSONRPC" ? raw?.result : raw;
  // A2A 1.0: tasks, nextPageToken (always present, "" on the last page), pageSize and totalSize are REQUIRED.
  const shape = Object.fromEntries(
    ["tasks", "nextPageToken", "pageSize", "totalSize"].map((k) => [k, !body || !(k in body) ? "absent" : Array.isArray(body[k]) ? "array" : typeof body[k]]),
  );
  expect(
    Array.isArray(body?.tasks) && typeof body.nextPageToken === "string" && typeof body.pageSize === "number" && typeof body.totalSize === "number",
    "the page's members",
    { tasks: "array", nextPageToken: "string", pageSize: "number", totalSize: "number" },
    shape,
  );
  const ids = page.tasks.map((t) => t.id);
  for (const id of [waiting.id, streamed]) expect(ids.includes(id), "the caller's tasks", `${id} listed`, ids);
  // Most recently updated first.
  const times = page.tasks.map((t) => t.status?.timestamp ?? "");
  const ms = times.map((t) => Date.parse(t));
  expect(ms.every((t, i) => !Number.isNaN(t) && (i === 0 || ms[i - 1] >= t)), "the order", "status timestamps descending", times);
  // includeArtifacts defaults to false: the member is left out.
  expect(body.tasks.every((t) => !("artifacts" in t)), "tasks without includeArtifacts", "no artifacts member", body.tasks.map((t) => Object.keys(t)));
  expect(page.totalSize === page.tasks.length && page.nextPageToken === "", "one page", { totalSize: page.tasks.length, nextPageToken: "" }, { totalSize: page.totalSize, nextPageToken: page.nextPageToken });

  // Pagination: pageSize 1 walks the same tasks, one per page.
  const walked = [];
  let token = "";
  for (let i = 0; i <= ids.length; i++) {
    const p = await client.listTasks(ListTasksRequest.fromJSON({ pageSize: 1, pageToken: token }));
    expect(p.tasks.length <= 1 && p.pageSize === 1, "a page of pageSize 1", { tasks: "≤ 1", pageSize: 1 }, { tasks: p.tasks.length, pageSize: p.pageSize });
    walked.push(...p.tasks.map((t) => t.id));
    token = p.nextPageToken;
    if (!token) break;
  }
  expect(JSON.stringify(walked) === JSON.stringify(ids), "the pages", ids, walked);

  const withArts = await client.listTasks(ListTasksRequest.fromJSON({ includeArtifacts: true }));
  const s = withArts.tasks.find((t) => t.id === streamed);
  expect(s && s.artifacts.map((a) => a.name).join() === "answer,receipt", "includeArtifacts", ["answer", "receipt"], s?.artifacts?.map((a) => a.name));
  const completed = await client.listTasks(ListTasksRequest.fromJSON({ status: "TASK_STATE_COMPLETED" }));
  expect(completed.tasks.length > 0 && completed.tasks.every((t) => t.status.state === TaskState.TASK_STATE_COMPLETED), "the status filter", "only COMPLETED tasks", completed.tasks.map((t) => state(t.status.state)));
  return { tasks: ids.length, shape };
});

// ListTasks validation (A2A 1.0 a2a.proto ListTasksRequest, §3.3.2 validation errors, §6.5):
// each invalid parameter is InvalidParams (-32602) on JSON-RPC and 400 INVALID_ARGUMENT on HTTP+JSON.
// (Was a known departure on both bindings; fixed: docs/wire.md, Interop, 4.)
const invalidLists = [
  ["pageSize 0", { pageSize: 0 }],
  ["pageSize -1", { pageSize: -1 }],
  ["pageSize 101", { pageSize: 101 }],
  ["historyLength -1", { historyLength: -1 }],
  ["statusTimestampAfter not a timestamp", { statusTimestampAfter: "yesterday" }],
  ["pageToken not one the node gave", { pageToken: "not-a-page-token" }],
  // The SDK turns an unknown TaskState into "UNRECOGNIZED" on the wire.
  ["status not a TaskState", { status: "TASK_STATE_BOGUS" }],
];
for (const [name, req] of invalidLists) {
  await step(`ListTasks ${name} is InvalidParams`, async () => {
    let page;
    try {
      page = await client.listTasks(ListTasksRequest.fromJSON(req));
    } catch {
      // Read from the wire below.
    }
    const raw = await lastJSON();
    const sent = binding === "JSONRPC" ? JSON.parse(wire.last.requestBody).params : new URL(wire.last.url).search;
    const got =
      binding === "JSONRPC"
        ? { http: wire.last.status, code: raw?.error?.code ?? null, ...(page ? { tasks: page.tasks.length } : {}) }
        : { http: wire.last.status, status: raw?.error?.status ?? null, ...(page ? { tasks: page.tasks.length } : {}) };
    const expected = binding === "JSONRPC" ? { http: 200, code: -32602 } : { http: 400, status: "INVALID_ARGUMENT" };
    const ok = binding === "JSONRPC" ? got.code === -32602 && got.http === 200 : got.http === 400 && got.status === "INVALID_ARGUMENT";
    expect(ok && page === undefined, `ListTasks ${name}`, expected, { ...got, sent });
    return { ...got, sent };
  });
}

// CancelTask on a long turn ([fake:hang] runs until it is canceled): the turn's stream and a
// subscriber end CANCELED, the answer is the task with a canceled receipt.
await step("CancelTask on a running turn", async () => {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), waitMs);
  try {
    const it = client.sendMessageStream(userMessage("cancel me [fake:hang]"), { signal: ac.signal })[Symbol.asyncIterator]();
    const seq = [];
    let id;
    for (;;) {
      const { value, done: end } = await it.next();
      expect(!end, "the running turn's stream", "open until canceled", seq);
      seq.push(describe(value));
      if (value.payload.$case === "task") id = value.payload.value.id;
      if (seq.at(-1) === "status:TASK_STATE_WORKING") break;
    }
    expect(seq[0] === "task:TASK_STATE_SUBMITTED", "the running turn's first event", "task:TASK_STATE_SUBMITTED", seq);

    const sub = client.resubscribeTask({ tenant: "", id }, { signal: ac.signal })[Symbol.asyncIterator]();
    const first = await sub.next();
    expect(!first.done && describe(first.value) === "task:TASK_STATE_WORKING", "SubscribeToTask on the running task", "its WORKING task first", first.done ? "ended" : describe(first.value));

    const t0 = Date.now();
    const canceled = await client.cancelTask({ tenant: "", id, metadata: undefined });
    const cancelMs = Date.now() - t0;
    expect(canceled.id === id && canceled.status?.state === TaskState.TASK_STATE_CANCELED, "CancelTask's answer", { id, state: "TASK_STATE_CANCELED" }, { id: canceled.id, state: state(canceled.status?.state) });
    expect(answerOf(canceled) === undefined, "no answer on a canceled turn", undefined, answerOf(canceled));
    const claims = await receiptOf(canceled);
    expect(claims.status === "canceled", "its receipt", "canceled", claims.status);

    const rest = [];
    for (;;) {
      const { value, done: end } = await it.next();
      if (end) break;
      rest.push(describe(value));
    }
    expect(rest.at(-1) === "status:TASK_STATE_CANCELED", "the turn's stream after CancelTask", "…status:TASK_STATE_CANCELED, then its end", rest);
    const followed = [];
    for (;;) {
      const { value, done: end } = await sub.next();
      if (end) break;
      followed.push(describe(value));
    }
    expect(followed.at(-1) === "status:TASK_STATE_CANCELED", "the subscriber after CancelTask", "…status:TASK_STATE_CANCELED, then its end", followed);
    const stored = await client.getTask({ tenant: "", id });
    expect(stored.status?.state === TaskState.TASK_STATE_CANCELED, "the stored task", "TASK_STATE_CANCELED", state(stored.status?.state));

    // Cancel is idempotent (A2A 1.0 §3.3.1): a second CancelTask may answer the canceled task again
    // (the node does, as a2a-go) or TaskNotCancelable.
    let second;
    try {
      const t = await client.cancelTask({ tenant: "", id, metadata: undefined });
      second = state(t.status?.state);
    } catch (e) {
      second = describeError(e).name;
    }
    expect(["TASK_STATE_CANCELED", "TaskNotCancelableError"].includes(second), "a second CancelTask", "the canceled task, or TaskNotCancelableError", second);
    return { task: id, stream: [...seq, ...rest], subscriber: followed, receipt: claims.status, secondCancel: second, cancelMs };
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
});

await step("CancelTask on a finished task is TaskNotCancelable", async () => {
  const { error } = await expectError("CancelTask on a completed task", () => client.cancelTask({ tenant: "", id: done.id, metadata: undefined }), "TaskNotCancelableError");
  const want = binding === "JSONRPC" ? { name: "TaskNotCancelableError", jsonrpcCode: -32002 } : { name: "TaskNotCancelableError", httpStatus: 400 };
  for (const [k, v] of Object.entries(want)) expect(error[k] === v, "the error", want, error);
  return error;
});

// SubscribeToTask on a terminal task is UnsupportedOperation (A2A 1.0 §3.1.6, §9.4.6).
await step("SubscribeToTask on a finished task is UnsupportedOperation", async () => {
  let evs;
  let error;
  try {
    evs = (await collect(client.resubscribeTask({ tenant: "", id: done.id }), "SubscribeToTask on a finished task")).map(describe);
  } catch (e) {
    error = describeError(e);
  }
  const ex = wire.last;
  const body = (await ex.body).slice(0, 600);
  const got = { http: ex.status, contentType: ex.headers["content-type"], ...(error ? { error } : { events: evs }), body };
  const want = binding === "JSONRPC" ? { name: "UnsupportedOperationError", jsonrpcCode: -32004 } : { name: "UnsupportedOperationError", httpStatus: 400 };
  // The error as a data event of an HTTP 200 event stream was a known departure (docs/wire.md,
  // Interop, 6, 8); fixed on both bindings: the error is the plain answer, before any stream.
  expect(Object.entries(want).every(([k, v]) => error?.[k] === v) && /^application\/json/.test(got.contentType ?? ""), "the error, as application/json", want, got);
  return got;
});

await step("SendStreamingMessage to a finished task is UnsupportedOperation", async () => {
  let evs;
  let error;
  try {
    evs = (await collect(client.sendMessageStream(userMessage("one more thing", { taskId: done.id })), "a stream to a finished task")).map(describe);
  } catch (e) {
    error = describeError(e);
  }
  const ex = wire.last;
  const got = { http: ex.status, contentType: ex.headers["content-type"], ...(error ? { error } : { events: evs }), body: (await ex.body).slice(0, 600) };
  const want = binding === "JSONRPC" ? { name: "UnsupportedOperationError", jsonrpcCode: -32004 } : { name: "UnsupportedOperationError", httpStatus: 400 };
  // The error as a data event of an HTTP 200 event stream was a known departure (docs/wire.md,
  // Interop, 6, 8); fixed on both bindings: the error is the plain answer, before any stream.
  expect(Object.entries(want).every(([k, v]) => error?.[k] === v) && /^application\/json/.test(got.contentType ?? ""), "the error, as application/json", want, got);
  return got;
});

// google.protobuf.Struct (message metadata) takes any keys, and keys that differ only in case are
// two keys. Fixed (docs/wire.md, Interop, 7): the node refused them anywhere in a body; it now folds
// case only where a2a-go decodes into structs (docs/threats.md R12, R18).
await step("message metadata with keys that differ only in case", async () => {
  let res;
  let error;
  const req = userMessage("Review main.go please");
  req.message.metadata = { trace: "a", Trace: "b" };
  try {
    res = await client.sendMessage(req);
  } catch (e) {
    error = describeError(e);
  }
  const sent = JSON.parse(wire.last.requestBody ?? "{}");
  const metadata = (sent.params ?? sent).message?.metadata;
  expect(metadata?.trace === "a" && metadata?.Trace === "b", "the SDK sent both keys", { trace: "a", Trace: "b" }, metadata);
  const got = { http: wire.last.status, ...(error ? { error } : { state: state(res?.status?.state) }) };
  expect(isTask(res), "a task (the metadata is a valid Struct)", "a task", got);
  return got;
});

// JSON-RPC errors travel in HTTP 200 (JSON-RPC 2.0 over HTTP; a2a-go's and the JS SDK's own
// servers answer so); 401 stays for a missing identity. The SDK reads either; the status is checked.
if (binding === "JSONRPC") {
  await step("JSON-RPC unknown method is MethodNotFound in HTTP 200", async () => {
    const { error, exchange } = await expectError("an unknown method", () => client.transport.callExtensionMethod("NoSuchMethod", {}, {}), "-32601");
    expect(error.jsonrpcCode === -32601 && exchange.status === 200, "an unknown method", { jsonrpcCode: -32601, http: 200 }, { ...error, http: exchange.status });
    return { ...error, http: exchange.status };
  });
  await step("JSON-RPC params of the wrong type is InvalidParams in HTTP 200", async () => {
    const { error, exchange } = await expectError("params that are not an object", () => client.transport.callExtensionMethod("GetTask", "not-an-object", {}), "-32602");
    expect(error.jsonrpcCode === -32602 && exchange.status === 200, "params that are not an object", { jsonrpcCode: -32602, http: 200 }, { ...error, http: exchange.status });
    return { ...error, http: exchange.status };
  });
  // The gateway's own checks run before a2a-go: a body nested deeper than 64 (R3) is refused there.
  await step("JSON-RPC error from the gateway in HTTP 200", async () => {
    let deep = "bottom";
    for (let i = 0; i < 70; i++) deep = { d: deep };
    const req = userMessage("Review main.go please");
    req.message.metadata = { deep };
    let error;
    try {
      await client.sendMessage(req);
    } catch (e) {
      error = describeError(e);
    }
    const got = { http: wire.last.status, ...(error ?? { error: "none" }) };
    // Was a known departure (HTTP 400); fixed: docs/wire.md, Interop, 5.
    expect(wire.last.status === 200 && error?.jsonrpcCode === -32600, "the gateway's JSON-RPC error", { http: 200, jsonrpcCode: -32600 }, got);
    return got;
  });
  await step("JSON-RPC without identity is 401", async () => {
    const r = await fetch(brandUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json", "A2A-Version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: done.id } }),
    });
    const body = await r.json();
    expect(r.status === 401 && /^Bearer /.test(r.headers.get("www-authenticate") ?? "") && body?.error?.code === -31401, "no identity", { http: 401, "www-authenticate": "Bearer …", code: -31401 }, { http: r.status, body });
    return { http: r.status, code: body.error.code };
  });
}

emit({ done: true, binding });
