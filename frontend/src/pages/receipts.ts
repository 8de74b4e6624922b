import { api, ApiError, errorMessage, type ReceiptSummary, type ReceiptDetail } from "../api";
import { h, replace, banner, clean, untrusted, agentView, timeCell, fmtTime, copyText, parseTime, uid } from "../dom";
import { on } from "../events";
import { navigate, type PageDef } from "../router";
import { receivedSection } from "./received";
import { pageHeader, loading, receiptStatusBadge, receiptAgentCell } from "./common";
import { receiptLogCard } from "./receiptlog";
import { whatRan } from "./whatran";

const PAGE_SIZE = 50;
const FILTER_KEYS = ["agent", "brand", "status", "from", "to"] as const;
type Filters = Record<(typeof FILTER_KEYS)[number], string>;

function filtersFrom(url: URL): Filters {
  const f = {} as Filters;
  for (const k of FILTER_KEYS) f[k] = url.searchParams.get(k) ?? "";
  return f;
}

function filterQuery(f: Filters): URLSearchParams {
  const q = new URLSearchParams();
  for (const k of FILTER_KEYS) if (f[k]) q.set(k, f[k]);
  return q;
}

/** toLocalInput renders an RFC 3339 time for <input type="datetime-local">. */
function toLocalInput(rfc: string): string {
  const d = parseTime(rfc);
  if (!d) return "";
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function fromLocalInput(v: string): string {
  if (!v) return "";
  const d = new Date(v);
  return isNaN(d.getTime()) ? "" : d.toISOString();
}

function duration(a: string, b: string): string {
  const s = parseTime(a)?.getTime();
  const e = parseTime(b)?.getTime();
  if (s === undefined || e === undefined || e < s) return "—";
  const sec = (e - s) / 1000;
  if (sec < 60) return sec.toFixed(sec < 10 ? 1 : 0) + " s";
  const m = Math.floor(sec / 60);
  return `${m} min ${Math.round(sec % 60)} s`;
}

const TIME_CLAIMS = new Set(["iat", "exp", "nbf", "started_at", "ended_at", "startedAt", "endedAt", "auth_time"]);

function claimValue(key: string, v: unknown): Node {
  if (typeof v === "string") return h("span", { class: "claim-str" }, clean(v));
  if (typeof v === "number" && TIME_CLAIMS.has(key) && v > 1e9 && v < 1e11) {
    return h("span", null, String(v), h("span", { class: "sub" }, fmtTime(new Date(v * 1000).toISOString(), true)));
  }
  if (v === null || typeof v !== "object") return h("code", null, JSON.stringify(v));
  return h("pre", { class: "claim-json" }, clean(JSON.stringify(v, null, 2)));
}

export const receiptsPage: PageDef = {
  title: "Receipts",
  mount(root, url) {
    let alive = true;
    let filters = filtersFrom(url);
    let openId = url.searchParams.get("id") ?? "";
    let rows: ReceiptSummary[] = [];
    let cursor = "";
    let loadSeq = 0;
    let newArrived = 0;

    const brandSel = h("select", { class: "select", name: "brand", id: uid("f-brand") }, h("option", { value: "" }, "All brands"));
    const statusSel = h(
      "select",
      { class: "select", name: "status", id: uid("f-status") },
      h("option", { value: "" }, "Any status"),
      h("option", { value: "completed" }, "Completed"),
      h("option", { value: "failed" }, "Failed"),
      h("option", { value: "canceled" }, "Canceled"),
    );
    const agentIn = h("input", { class: "input", type: "search", name: "agent", id: uid("f-agent"), placeholder: "Issuer or subject contains…", autocomplete: "off" });
    const fromIn = h("input", { class: "input", type: "datetime-local", name: "from", id: uid("f-from") });
    const toIn = h("input", { class: "input", type: "datetime-local", name: "to", id: uid("f-to") });
    const exportLink = h("a", { class: "btn", href: "/api/receipts/export", download: "receipts.jsonl" }, "Export JSON Lines");
    const clearBtn = h("button", { type: "button", class: "btn btn-ghost" }, "Clear");
    const field = (label: string, input: HTMLElement) => h("div", { class: "filter" }, h("label", { for: input.id }, label), input);
    const form = h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter receipts" },
      field("Agent", agentIn),
      field("Brand", brandSel),
      field("Status", statusSel),
      field("From", fromIn),
      field("To", toIn),
      h("div", { class: "filter filter-buttons" }, h("button", { type: "submit", class: "btn btn-primary" }, "Apply"), clearBtn),
    );

    const listArea = h("div", { class: "receipts-list" }, loading("Loading receipts…"));
    const newNote = h("div", { class: "notice-slot", "aria-live": "polite" });
    const detail = h("aside", { class: "detail", "aria-label": "Receipt", tabindex: "-1", hidden: true });
    const layout = h("div", { class: "receipts-layout" }, newNote, listArea, detail);
    const logArea = h("div", { class: "receipt-log-slot" });
    replace(root, pageHeader("Receipts", "Every answered turn, signed by this node. Newest first.", exportLink), logArea, form, layout, receivedSection());

    function syncForm(): void {
      agentIn.value = filters.agent;
      brandSel.value = filters.brand;
      if (filters.brand && brandSel.value !== filters.brand) {
        brandSel.appendChild(h("option", { value: filters.brand }, clean(filters.brand)));
        brandSel.value = filters.brand;
      }
      statusSel.value = filters.status;
      fromIn.value = toLocalInput(filters.from);
      toIn.value = toLocalInput(filters.to);
      const q = filterQuery(filters).toString();
      exportLink.href = "/api/receipts/export" + (q ? "?" + q : "");
    }

    function pushUrl(f: Filters, id: string): void {
      const q = filterQuery(f);
      if (id) q.set("id", id);
      const s = q.toString();
      navigate("/receipts" + (s ? "?" + s : ""));
    }

    function readForm(): Filters {
      return {
        agent: agentIn.value.trim(),
        brand: brandSel.value,
        status: statusSel.value,
        from: fromLocalInput(fromIn.value),
        to: fromLocalInput(toIn.value),
      };
    }

    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      pushUrl(readForm(), "");
    });
    brandSel.addEventListener("change", () => pushUrl(readForm(), openId));
    statusSel.addEventListener("change", () => pushUrl(readForm(), openId));
    clearBtn.addEventListener("click", () => pushUrl({ agent: "", brand: "", status: "", from: "", to: "" }, ""));

    const hasFilters = () => FILTER_KEYS.some((k) => filters[k]);

    function renderList(more: boolean): void {
      if (rows.length === 0) {
        replace(
          listArea,
          h(
            "section",
            { class: "empty" },
            h("div", { class: "empty-icon", "aria-hidden": "true" }, "≡"),
            h("h2", null, hasFilters() ? "No receipts match these filters" : "No receipts yet"),
            h("p", null, hasFilters() ? "Try a wider time range or clear the filters." : "Each turn an allowed agent runs leaves a signed receipt here, which you can verify and export."),
          ),
        );
        return;
      }
      const tbody = h(
        "tbody",
        null,
        rows.map((r) => {
          const href = "/receipts?" + (() => {
            const q = filterQuery(filters);
            q.set("id", r.id);
            return q.toString();
          })();
          const tr = h(
            "tr",
            { class: "row-link" + (r.id === openId ? " selected" : ""), "data-id": clean(r.id) },
            h("td", { class: "num" }, h("a", { href, "aria-label": `Open receipt ${r.seq}` }, "#" + r.seq)),
            h("td", null, receiptAgentCell(r.agent)),
            h("td", null, untrusted(r.brand, 60)),
            h("td", null, h("code", null, untrusted(r.scope, 60))),
            h("td", null, receiptStatusBadge(r.status), r.status !== "completed" && r.exitCode ? h("div", { class: "sub" }, "exit " + r.exitCode) : null),
            h("td", null, timeCell(r.startedAt)),
            h("td", { class: "num" }, duration(r.startedAt, r.endedAt)),
          );
          tr.addEventListener("click", (ev) => {
            if ((ev.target as Element).closest("a")) return;
            navigate(href);
          });
          return tr;
        }),
      );
      const loadMore = h("button", { type: "button", class: "btn" }, "Load more");
      loadMore.addEventListener("click", () => {
        loadMore.disabled = true;
        loadMore.textContent = "Loading…";
        fetchPage(false);
      });
      replace(
        listArea,
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table table-receipts" },
            h("thead", null, h("tr", null, ["#", "Agent", "Brand", "Scope", "Status", "Started", "Took"].map((t) => h("th", { scope: "col", class: t === "#" || t === "Took" ? "num" : "" }, t)))),
            tbody,
          ),
        ),
        h("div", { class: "list-foot" }, h("span", { class: "muted" }, `${rows.length} receipt${rows.length === 1 ? "" : "s"} shown`), more ? loadMore : h("span", { class: "muted" }, "· that is all")),
      );
    }

    async function fetchPage(first: boolean): Promise<void> {
      const seq = ++loadSeq;
      const q = filterQuery(filters);
      q.set("limit", String(PAGE_SIZE));
      if (!first && cursor) q.set("cursor", cursor);
      try {
        const res = await api.receipts(q);
        if (!alive || seq !== loadSeq) return;
        rows = first ? res.receipts ?? [] : rows.concat(res.receipts ?? []);
        cursor = res.nextCursor ?? "";
        if (first) replace(logArea, receiptLogCard(res.log ?? null));
        renderList(Boolean(cursor));
      } catch (e) {
        if (!alive || seq !== loadSeq || !(e instanceof ApiError)) return;
        replace(listArea, banner("bad", "Could not load receipts", errorMessage(e)));
      }
    }

    function reload(): void {
      newArrived = 0;
      replace(newNote);
      cursor = "";
      fetchPage(true);
    }

    let detailSeq = 0;
    async function openDetail(id: string): Promise<void> {
      for (const tr of listArea.querySelectorAll<HTMLTableRowElement>("tr[data-id]")) tr.classList.toggle("selected", tr.dataset.id === id);
      if (!id) {
        detail.hidden = true;
        replace(detail);
        return;
      }
      const wasHidden = detail.hidden;
      detail.hidden = false;
      if (wasHidden) detail.focus({ preventScroll: true });
      const seq = ++detailSeq;
      replace(detail, loading("Loading receipt…"));
      try {
        const d = await api.receipt(id);
        if (!alive || seq !== detailSeq) return;
        renderDetail(d);
      } catch (e) {
        if (!alive || seq !== detailSeq || !(e instanceof ApiError)) return;
        replace(
          detail,
          detailHead("Receipt"),
          e.status === 404 ? banner("warn", "Receipt not found", "There is no receipt with id ", h("code", null, clean(id).slice(0, 100)), ".") : banner("bad", "Could not load the receipt", errorMessage(e)),
        );
      }
    }

    function detailHead(title: string): HTMLElement {
      const close = h("button", { type: "button", class: "btn btn-ghost btn-sm", "aria-label": "Close receipt" }, "✕");
      close.addEventListener("click", () => pushUrl(filters, ""));
      return h("div", { class: "detail-head" }, h("h2", null, title), close);
    }

    function verifyBox(v: ReceiptDetail["verify"], checkedAt: Date): HTMLElement {
      return h(
        "div",
        { class: "verify " + (v.ok ? "verify-ok" : "verify-bad"), role: "status" },
        h("span", { class: "verify-icon", "aria-hidden": "true" }, v.ok ? "✓" : "✗"),
        h(
          "div",
          null,
          h("div", { class: "verify-title" }, v.ok ? "✓ Valid signature" : "✗ Verification failed"),
          h("div", { class: "small" }, v.ok ? "The node checked this receipt's signature and found it intact." : clean(v.error) || "unknown reason"),
          h("div", { class: "muted small" }, "Checked " + fmtTime(checkedAt.toISOString(), true)),
        ),
      );
    }

    function renderDetail(d: ReceiptDetail): void {
      const r = d.receipt;
      const verifySlot = h("div", null, verifyBox(d.verify, new Date()));
      const verifyBtn = h("button", { type: "button", class: "btn btn-sm" }, "Verify");
      verifyBtn.addEventListener("click", async () => {
        verifyBtn.disabled = true;
        try {
          const again = await api.receipt(r.id);
          if (alive) replace(verifySlot, verifyBox(again.verify, new Date()));
        } catch (e) {
          if (alive && e instanceof ApiError) replace(verifySlot, verifyBox({ ok: false, error: "could not verify: " + errorMessage(e) }, new Date()));
        } finally {
          verifyBtn.disabled = false;
        }
      });
      const copyBtn = h("button", { type: "button", class: "btn btn-sm" }, "Copy JWS");
      copyBtn.addEventListener("click", () => copyText(d.jws, copyBtn));
      const kv = (k: string, v: Node | string) => h("div", { class: "kv" }, h("dt", null, k), h("dd", null, v));
      const claims = Object.entries(d.claims ?? {});
      replace(
        detail,
        detailHead(`Receipt #${r.seq}`),
        h("div", { class: "detail-verify" }, verifySlot, verifyBtn),
        h(
          "dl",
          { class: "kvs" },
          kv("Agent", agentView(r.agent)),
          kv("Brand", untrusted(r.brand, 120)),
          kv("Scope", h("code", null, untrusted(r.scope, 120))),
          kv("Status", h("span", null, receiptStatusBadge(r.status), " exit code " + String(r.exitCode))),
          kv("Started", timeCell(r.startedAt)),
          kv("Ended", timeCell(r.endedAt)),
          kv("Grant", r.grantId ? h("a", { href: "/sharing" }, h("code", null, clean(r.grantId))) : "—"),
          kv("Task", h("code", { class: "break" }, clean(r.taskId))),
          kv("Receipt id", h("code", { class: "break" }, clean(r.id))),
          kv("Answer hash", h("code", { class: "break" }, clean(r.answerHash))),
        ),
        ...whatRan(d.claims),
        h("h3", { class: "detail-sub" }, "Signed claims"),
        claims.length
          ? h(
              "table",
              { class: "claims" },
              h("tbody", null, claims.map(([k, v]) => h("tr", null, h("th", { scope: "row" }, h("code", null, clean(k))), h("td", null, claimValue(k, v))))),
            )
          : h("p", { class: "muted" }, "No claims."),
        h("div", { class: "detail-sub-row" }, h("h3", { class: "detail-sub" }, "Compact JWS"), copyBtn),
        h("pre", { class: "jws", tabindex: "0", "aria-label": "Compact JWS" }, clean(d.jws)),
      );
    }

    api.brands().then(
      (b) => {
        if (!alive) return;
        for (const br of b.brands ?? []) brandSel.appendChild(h("option", { value: br.id }, clean(br.name || br.id)));
        syncForm();
      },
      () => {},
    );

    const onKey = (ev: KeyboardEvent) => {
      if (ev.key === "Escape" && openId && !document.querySelector("dialog[open]")) pushUrl(filters, "");
    };
    document.addEventListener("keydown", onKey);

    syncForm();
    fetchPage(true);
    if (openId) openDetail(openId);

    const offs = [
      on("receipt", (r) => {
        if (!hasFilters() && rows.length > 0 && !rows.some((x) => x.id === r.id)) {
          rows.unshift(r);
          renderList(Boolean(cursor));
          return;
        }
        if (rows.length === 0 && !hasFilters()) {
          reload();
          return;
        }
        newArrived += 1;
        const show = h("button", { type: "button", class: "btn btn-sm" }, "Show");
        show.addEventListener("click", reload);
        replace(newNote, banner("info", `${newArrived} new receipt${newArrived === 1 ? "" : "s"} since you filtered`, show));
      }),
      on("resync", () => {
        if (!hasFilters()) reload();
      }),
    ];

    return {
      update(u) {
        const f = filtersFrom(u);
        const id = u.searchParams.get("id") ?? "";
        const changed = FILTER_KEYS.some((k) => f[k] !== filters[k]);
        filters = f;
        syncForm();
        if (changed) reload();
        if (id !== openId) {
          openId = id;
          openDetail(id);
        }
      },
      destroy() {
        alive = false;
        document.removeEventListener("keydown", onKey);
        offs.forEach((f) => f());
      },
    };
  },
};
