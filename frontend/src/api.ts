// The admin JSON API (docs/admin-api.md). Every call goes through request(), which adds the
// CSRF header to non-GET calls and turns a 401 into the sign-in screen. The exported interfaces
// are owner's JSON shapes (backend/owner): backend/owner/edges_test.go fails when they differ.

/** An agent; site, siteName, host and claim are what the owner reads, the same everywhere (C13–C15). */
export interface Agent {
  issuer: string;
  subject: string;
  issuerOrigin: string;
  site: string;
  siteName: string;
  host: string;
  claim: string;
}

export interface Scope {
  id: string;
  description: string;
}

export type AccessMode = "read_only" | "read_write";

export interface Brand {
  id: string;
  name: string;
  description: string;
  capability: string;
  workspace: string;
  accessMode: AccessMode;
  scope: Scope;
  cardUrl?: string;
}

/** What became of the request with a user code (GET /api/consent?user_code=). */
export interface CodeLookup {
  userCode: string;
  status: "pending" | "allowed" | "denied" | "expired" | "unknown";
}

export interface ConsentRequest {
  id: string;
  userCode: string;
  agent: Agent;
  brand: { id: string; name: string };
  scope: Scope;
  createdAt: string;
  expiresAt: string;
  /** The brand's model tokens a day, the approval's default; 0 = no limit. */
  tokensPerDay: number;
}

export type GrantStatus = "active" | "revoked" | "expired";

export interface Grant {
  id: string;
  agent: Agent;
  brand: { id: string; name: string };
  scope: Scope;
  accessMode: AccessMode;
  issuedAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  uses: number;
  status: GrantStatus;
  revokedAt: string | null;
  /** Model tokens the grant's turns used today (UTC), as the node's model gateway counted them. */
  tokensToday: number;
  /** The brand's budget a day; 0 = no limit. */
  tokensPerDay: number;
}

export type ReceiptStatus = "completed" | "failed" | "canceled";

export interface ReceiptSummary {
  id: string;
  seq: number;
  taskId: string;
  brand: string;
  scope: string;
  grantId: string;
  agent: Agent;
  status: ReceiptStatus | string;
  exitCode: number;
  startedAt: string;
  endedAt: string;
  answerHash: string;
}

export interface Problem {
  path: string;
  message: string;
}

export interface PolicyError {
  message: string;
  problems?: Problem[];
}

export interface Status {
  version: string;
  gateway: { listen: string; publicUrl: string; paused: boolean; running: boolean };
  admin: { url: string };
  brands: Brand[];
  codex: {
    found: boolean;
    path: string;
    version: string;
    versionOk: boolean;
    loggedIn: boolean;
    error: string;
    /** The Codex release Aether pins; pinNote says when the codex in use is another one. */
    pinned: string;
    pinNote: string;
    credential: { kind: string; summary: string; problem: string };
  };
  confinement: { available: boolean; mechanism: string; text: string };
  pending: number;
  policy: { path: string; error: PolicyError | null };
  lastReceipts: ReceiptSummary[];
  model: ModelStatus;
  download: CodexDownload;
  setup: SetupStep[];
  reachability: Reachability;
}

/** One line of the first-run checklist (codex, model, brand, reachable, ready). */
export interface SetupStep {
  id: string;
  done: boolean;
  text: string;
  link: string;
}

/** Get Codex's state: idle, downloading, installed, failed or unavailable. */
export interface CodexDownload {
  version: string;
  package: string;
  state: "idle" | "downloading" | "installed" | "failed" | "unavailable";
  done: number;
  total: number;
  path: string;
  error: string;
}

export interface ModelCheck {
  ok: boolean;
  answer?: string;
  error?: string;
  at: string;
}

/** How Codex reaches its model: whether a key is set, never the key. */
export interface ModelStatus {
  keySet: boolean;
  /** The server the saved key belongs to, when it is not the one set now: that one gets no key. */
  keyFor?: string;
  baseUrl: string;
  model: string;
  codexPath: string;
  check: ModelCheck | null;
  gateway: ModelGateway | null;
}

/** The node's model gateway: where it forwards, whether it has a key (never the key), its last error. */
export interface ModelGateway {
  upstream: string;
  keyPresent: boolean;
  lastError?: string;
  lastErrorAt?: string;
  /** The server's last answer reported no usage: budgets count the gateway's estimate. */
  noUsage?: boolean;
}

export interface ModelRequest {
  key?: string;
  removeKey?: boolean;
  baseUrl?: string;
  model?: string;
}

/** Reachability is how agents elsewhere reach the gateway (owner.Reachability). */
export interface Reachability {
  mode: "off" | "funnel" | "tailnet" | "proxy";
  state: "off" | "starting" | "logging_in" | "published" | "tailnet" | "failed";
  url: string;
  device: string;
  reason: string;
  fix: string;
  loginUrl: string;
  /** What the published address answered when the node last asked it as an agent would. */
  probe: "" | "checking" | "reachable" | "unreachable";
  probeReason: string;
  inUse: boolean;
}

export interface ReceiptWorkCommand {
  line: string;
  line_sha256: string;
  status: string;
  exit?: number;
  ms?: number;
  output_sha256?: string;
}

export interface ReceiptWorkFile {
  path: string;
  kind: string;
  type?: string;
  size?: number;
  sha256?: string;
}

export interface ReceiptWorkPatch {
  path: string;
  kind: string;
  status: string;
}

/** A bounded list of a receipt's work: its first items, the count of all, and when cut a digest of all. */
export interface ReceiptCommandList {
  count: number;
  digest?: string;
  items?: ReceiptWorkCommand[];
}

export interface ReceiptFileList {
  count: number;
  digest?: string;
  items?: ReceiptWorkFile[];
}

export interface ReceiptPatchList {
  count: number;
  digest?: string;
  items?: ReceiptWorkPatch[];
}

/** The signed claim `work` of a version 2 receipt (docs/wire.md, "What the turn did"); its names are the claims'. */
export interface ReceiptWork {
  codex: string;
  model: string;
  upstream: string;
  sandbox: string;
  confinement: string;
  before?: string;
  after?: string;
  partial?: boolean;
  commands: ReceiptCommandList;
  files: ReceiptFileList;
  patches: ReceiptPatchList;
}

export interface ReceiptDetail {
  receipt: ReceiptSummary;
  claims: Record<string, unknown> & { v?: number; work?: ReceiptWork };
  jws: string;
  verify: { ok: boolean; error: string };
}

export interface BrandsAnswer {
  policyPath: string;
  brands: Brand[];
  error: PolicyError | null;
}

export interface FieldError {
  field: string;
  message: string;
}

export interface ErrorBody {
  error?: string;
  status?: string;
  fields?: FieldError[];
  [k: string]: unknown;
}

export type DecisionStatus = "allowed" | "denied" | "already_decided" | "expired";

export interface DecisionAnswer {
  status: DecisionStatus;
  grant?: Grant;
  error?: string;
}

export type Duration = "1d" | "30d" | "forever";

export interface DecisionRequest {
  userCode: string;
  decision: "allow" | "deny";
  duration: Duration;
  /** The grant's model tokens a day; absent = the brand's, 0 = no limit. */
  tokensPerDay?: number;
}

/** GET /api/consent; lookup only when a user_code was asked about. */
export interface ConsentList {
  lookup?: CodeLookup;
  requests: ConsentRequest[];
}

export interface GrantList {
  grants: Grant[];
}

export interface GrantAnswer {
  grant: Grant;
}

/** Every brand after a PUT or DELETE. */
export interface BrandList {
  brands: Brand[];
}

/** One of the owner's own agents: the node is its identity issuer (docs/assistants.md). */
export interface MyAgent {
  name: string;
  on: boolean;
  created: string;
}

/** GET /api/agents: the agents, their issuer, and whether tokens can be minted, else what is missing. */
export interface MyAgents {
  agents: MyAgent[];
  issuer: string;
  ready: boolean;
  missing: string;
}

export interface AgentRequest {
  name: string;
}

export interface AgentSwitch {
  on: boolean;
}

/** A receipt one of the owner's agents received from another node. */
export interface ReceivedReceipt {
  id: number;
  node: string;
  rid: string;
  agent: string;
  brand: string;
  task: string;
  status: string;
  verified: boolean;
  logConsistent: boolean;
  problem: string;
  ran: string;
  receivedAt: string;
}

export interface ReceivedList {
  receipts: ReceivedReceipt[];
}

export interface ReceiptPage {
  receipts: ReceiptSummary[];
  nextCursor: string;
  /** The receipts log; null before its first checkpoint. */
  log: ReceiptLog | null;
}

/** The receipts log's newest checkpoint, whether it holds, and its witnesses. */
export interface ReceiptLog {
  origin: string;
  size: number;
  root: string;
  time: string;
  verify: { ok: boolean; error: string };
  witnesses: number;
  agents: AgentWitnesses[];
}

/** One agent's history: its last receipt and how many agents cosigned a checkpoint holding it. */
export interface AgentWitnesses {
  agent: Agent;
  lastSeq: number;
  witnessedBy: number;
}

export interface DenyIssuerRequest {
  site: string;
}

export interface CodexPathRequest {
  path: string;
}

export interface FunnelRequest {
  on: boolean;
}

export interface DenyIssuerResult {
  site: string;
  denied: number;
}

/** ApiError carries the HTTP status and the decoded error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.error || `request failed (${status})`);
  }
}

export class Unauthorized extends Error {}

let csrfToken = "";
let desktop = false;
let onUnauthorized: () => void = () => {};

export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

export function isDesktop(): boolean {
  return desktop;
}

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  try {
    return await send<T>(method, path, body);
  } catch (e) {
    // A 403 on a mutating call may be a CSRF token from an older session: fetch it again once.
    if (method !== "GET" && e instanceof ApiError && e.status === 403) {
      await loadSession();
      return send<T>(method, path, body);
    }
    throw e;
  }
}

async function send<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (method !== "GET") {
    if (!csrfToken) await loadSession();
    headers["X-CSRF-Token"] = csrfToken;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store",
      // The desktop asset server does not follow redirects; the API never sends any.
      redirect: "manual",
    });
  } catch (e) {
    throw new ApiError(0, { error: "Cannot reach the node: " + (e instanceof Error ? e.message : String(e)) });
  }
  if (res.status === 401) {
    onUnauthorized();
    throw new Unauthorized("sign in required");
  }
  let data: unknown = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text.slice(0, 300) };
    }
  }
  if (!res.ok) {
    throw new ApiError(res.status, (data as ErrorBody) ?? {});
  }
  return data as T;
}

/** requestAllowing returns the listed 4xx answers as data (for the consent decision outcomes). */
async function requestAllowing<T>(method: string, path: string, body: unknown, statuses: number[]): Promise<T> {
  try {
    return await request<T>(method, path, body);
  } catch (e) {
    if (e instanceof ApiError && statuses.includes(e.status)) return e.body as unknown as T;
    throw e;
  }
}

export async function loadSession(): Promise<{ csrfToken: string; desktop: boolean }> {
  const s = await send<{ csrfToken: string; desktop: boolean }>("GET", "/api/session");
  csrfToken = s.csrfToken;
  desktop = Boolean(s.desktop);
  return s;
}

const enc = encodeURIComponent;

export const api = {
  status: () => request<Status>("GET", "/api/status"),
  consent: (userCode?: string) =>
    request<ConsentList>(
      "GET",
      userCode ? `/api/consent?user_code=${encodeURIComponent(userCode)}` : "/api/consent",
    ),
  decide: (id: string, userCode: string, decision: "allow" | "deny", duration: Duration, tokensPerDay?: number) =>
    requestAllowing<DecisionAnswer>("POST", `/api/consent/${enc(id)}/decision`, { userCode, decision, duration, tokensPerDay } satisfies DecisionRequest, [409, 410]),
  denyIssuer: (site: string) => request<DenyIssuerResult>("POST", "/api/consent/deny-issuer", { site } satisfies DenyIssuerRequest),
  grants: () => request<GrantList>("GET", "/api/grants"),
  revoke: (id: string) => request<GrantAnswer>("POST", `/api/grants/${enc(id)}/revoke`),
  receipts: (q: URLSearchParams) => request<ReceiptPage>("GET", "/api/receipts?" + q.toString()),
  receipt: (id: string) => request<ReceiptDetail>("GET", `/api/receipts/${enc(id)}`),
  brands: () => request<BrandsAnswer>("GET", "/api/brands"),
  putBrand: (b: Brand) => request<BrandList>("PUT", `/api/brands/${enc(b.id)}`, b),
  deleteBrand: (id: string) => request<BrandList>("DELETE", `/api/brands/${enc(id)}`),
  codexDownload: () => request<CodexDownload>("GET", "/api/codex/download"),
  getCodex: () => request<CodexDownload>("POST", "/api/codex/download"),
  cancelCodex: () => request<CodexDownload>("DELETE", "/api/codex/download"),
  useCodex: (path: string) => request<ModelStatus>("PUT", "/api/codex/path", { path } satisfies CodexPathRequest),
  setModel: (req: ModelRequest) => request<ModelStatus>("PUT", "/api/model", req),
  checkModel: () => request<ModelCheck>("POST", "/api/model/check"),
  setFunnel: (on: boolean) => request<Reachability>("POST", "/api/reachability/funnel", { on } satisfies FunnelRequest),
  useFunnelUrl: () => request<Reachability>("POST", "/api/reachability/use"),
  myAgents: () => request<MyAgents>("GET", "/api/agents"),
  addAgent: (name: string) => request<MyAgent>("POST", "/api/agents", { name } satisfies AgentRequest),
  setAgent: (name: string, on: boolean) => request<MyAgent>("POST", `/api/agents/${enc(name)}`, { on } satisfies AgentSwitch),
  received: () => request<ReceivedList>("GET", "/api/receipts/received"),
  checkReachability: () => request<Reachability>("POST", "/api/reachability/check"),
  setTailnet: (on: boolean) => request<Reachability>("POST", "/api/reachability/tailnet", { on } satisfies FunnelRequest),
};

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
