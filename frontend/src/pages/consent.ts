import { api, ApiError, errorMessage, type ConsentRequest, type DecisionAnswer, type Duration } from "../api";
import { h, replace, banner, clean, untrusted, agentView, agentClaim, agentSite, countdown, parseTime, fmtTime, uid, confirmDialog } from "../dom";
import { on } from "../events";
import type { PageDef } from "../router";
import { setPending } from "../pending";
import { pageHeader, loading, durationLabel } from "./common";

type CardState = "pending" | "expiring" | "busy" | "done";

interface Card {
  req: ConsentRequest;
  el: HTMLElement;
  group: Group;
  armedAt: number; // performance.now() from which its buttons take clicks
  state: CardState;
  timer: HTMLElement;
  timerText: HTMLElement;
  error: HTMLElement;
  buttons: HTMLButtonElement[];
  select: HTMLSelectElement;
  budget: HTMLInputElement; // the grant's model tokens a day; empty = no limit
}

/** The requests of one issuer (its registrable domain, agent.site), shown together (C19). */
interface Group {
  site: string;
  el: HTMLElement;
  list: HTMLElement;
  count: HTMLElement;
  denyAll: HTMLButtonElement;
  armedAt: number;
}

type Known = "allowed" | "denied" | "already_decided" | "expired" | "decided_elsewhere";

/** normalizeCode turns "bcdfghjk" or "bcdf-ghjk" into "BCDF-GHJK" (display only). */
export function normalizeCode(raw: string): string {
  const s = clean(raw).toUpperCase().replace(/[^A-Z0-9]/g, "").slice(0, 16);
  return s.length === 8 ? s.slice(0, 4) + "-" + s.slice(4) : s;
}

const DEFAULT_DURATION: Duration = "30d";

/**
 * ARM_MS: Allow, Deny and Deny all take clicks only once the page has been visible and focused
 * this long, and a new request's buttons once it has been on screen this long (C16), as browsers
 * do for permission prompts: a window raised by a link, or a card that just appeared, cannot be
 * timed under a click meant for something else.
 */
export const ARM_MS = 1000;

// What this window saw happen to requests, by normalized user code. It outlives the page, so that
// coming Back to a consent link after deciding says "already decided", not "no such request".
const known = new Map<string, Known>();

/** The budget input's tokens a day: empty is 0 (no limit); null when not a whole number ≥ 0. */
function budgetOf(input: HTMLInputElement): number | null {
  const v = input.value.trim();
  if (v === "") return 0;
  const n = Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

function durationPhrase(d: Duration): string {
  return d === "forever" ? "until revoked" : "for " + durationLabel(d);
}

export const consentPage: PageDef = {
  title: "Consent",
  mount(root, url) {
    const cards = new Map<string, Card>();
    const notice = h("div", { class: "notice-slot" });
    const list = h("div", { class: "consent-list", "aria-live": "polite" });
    const empty = emptyState();
    const body = h("div", null, loading("Loading requests…"));
    let wanted = url.searchParams.has("user_code") ? normalizeCode(url.searchParams.get("user_code") ?? "") : "";
    let loaded = false;
    let alive = true;
    const groups = new Map<string, Group>();

    // Arming (C16): the page-wide time from which buttons take clicks, moved on every change
    // of visibility or focus and on every navigation to a request.
    let pageArmedAt = 0;
    let armTimer = 0;
    const live = () => document.visibilityState === "visible" && document.hasFocus();
    const isArmed = (at: number) => live() && performance.now() >= Math.max(pageArmedAt, at);
    function showArming(): void {
      for (const c of cards.values()) for (const b of c.buttons) b.dataset.armed = String(isArmed(c.armedAt));
      for (const g of groups.values()) g.denyAll.dataset.armed = String(isArmed(g.armedAt));
      // Wake up when the next button arms.
      window.clearTimeout(armTimer);
      const now = performance.now();
      const next = [pageArmedAt, ...[...cards.values()].map((c) => c.armedAt), ...[...groups.values()].map((g) => g.armedAt)].filter((t) => t > now);
      if (live() && next.length) armTimer = window.setTimeout(showArming, Math.min(...next) - now + 10);
    }
    function rearm(): void {
      pageArmedAt = performance.now() + ARM_MS;
      showArming();
    }
    const onAttention = () => rearm();
    document.addEventListener("visibilitychange", onAttention);
    window.addEventListener("focus", onAttention);
    window.addEventListener("blur", onAttention);
    rearm();

    replace(
      root,
      pageHeader("Consent", "Agents asking to use your brands. Check who is asking, and that the code matches the one the agent showed, before you allow."),
      notice,
      body,
    );

    const pendingCount = () => [...cards.values()].filter((c) => c.state !== "done").length;

    function refreshEmpty(): void {
      const any = cards.size > 0;
      empty.hidden = any;
      list.hidden = !any;
    }

    function showNotice(): void {
      if (!wanted || !loaded) {
        replace(notice);
        return;
      }
      const match = [...cards.values()].find((c) => normalizeCode(c.req.userCode) === wanted);
      if (match && match.state !== "done") {
        replace(notice);
        return;
      }
      if (match) return; // its card already says what happened
      const k = known.get(wanted);
      const code = h("code", { class: "mono" }, wanted || "—");
      if (k === "expired") {
        replace(notice, banner("warn", "This request has expired", "The request with code ", code, " expired before it was answered. The agent can ask again."));
      } else if (k === "allowed" || k === "denied" || k === "already_decided" || k === "decided_elsewhere") {
        replace(notice, banner("info", "This request was already decided", "The request with code ", code, " has already been answered."));
      } else {
        replace(
          notice,
          banner(
            "warn",
            "No pending request with this code",
            "There is no pending request with code ",
            code,
            ". It may have expired or already been decided — or the code is not right. Requests appear here as soon as an agent asks.",
          ),
        );
      }
    }

    function highlight(): void {
      if (!wanted) return;
      for (const c of cards.values()) {
        const hit = normalizeCode(c.req.userCode) === wanted;
        c.el.classList.toggle("highlight", hit);
        if (hit) {
          c.el.scrollIntoView({ block: "center", behavior: "smooth" });
          c.el.focus({ preventScroll: true });
        }
      }
    }

    function setOutcome(c: Card, tone: "ok" | "bad" | "neutral" | "warn", title: string, detail: (Node | string)[], grantId = ""): void {
      c.state = "done";
      c.el.classList.remove("expiring", "highlight");
      c.el.classList.add("consent-done", "consent-done-" + tone);
      const titleEl = h("div", { class: "outcome-title" }, title);
      replace(
        c.el,
        h(
          "div",
          { class: "outcome", role: "status" },
          h("span", { class: "outcome-icon outcome-icon-" + tone, "aria-hidden": "true" }, tone === "ok" ? "✓" : tone === "bad" ? "✕" : "!"),
          h(
            "div",
            null,
            titleEl,
            h("div", { class: "outcome-detail" }, ...detail),
            h(
              "div",
              { class: "outcome-who muted small" },
              "Request ",
              h("code", null, clean(c.req.userCode)),
              " from the agent that ",
              agentClaim(c.req.agent),
              grantId ? [" · grant ", h("code", { class: "outcome-grant" }, grantId)] : null,
            ),
          ),
        ),
      );
      setPending(pendingCount());
      refreshGroup(c.group);
    }

    function applyAnswer(c: Card, ans: DecisionAnswer, duration: Duration): void {
      const code = normalizeCode(c.req.userCode);
      switch (ans.status) {
        case "allowed": {
          known.set(code, "allowed");
          const gid = ans.grant?.id ? clean(ans.grant.id) : "";
          if (gid) c.el.dataset.grantId = gid;
          setOutcome(
            c,
            "ok",
            `Allowed ${durationPhrase(duration)}`,
            ["The agent can now use ", untrusted(c.req.brand.name || c.req.brand.id, 80), ". ", h("a", { href: "/sharing" }, "See it on Sharing"), ", where you can revoke it at any time."],
            gid,
          );
          break;
        }
        case "denied":
          known.set(code, "denied");
          setOutcome(c, "bad", "Denied", ["The agent was told no. It gets no access."]);
          break;
        case "already_decided":
          known.set(code, "already_decided");
          setOutcome(c, "neutral", "Already decided", ["This request was answered before (perhaps from a notification or another window). Nothing changed."]);
          break;
        case "expired":
          known.set(code, "expired");
          setOutcome(c, "warn", "Expired", ["The request expired before your answer reached the node. No access was given; the agent can ask again."]);
          break;
        default:
          c.state = "pending";
          showError(c, "Unexpected answer from the node: " + clean(String((ans as { status?: unknown }).status)));
      }
    }

    function showError(c: Card, msg: string): void {
      replace(c.error, msg);
      c.error.hidden = false;
      for (const b of c.buttons) b.disabled = false;
      c.select.disabled = false;
      c.budget.disabled = false;
    }

    async function decide(c: Card, decision: "allow" | "deny"): Promise<void> {
      if (c.state !== "pending" || !isArmed(c.armedAt)) return;
      // A denial writes no grant: its budget input does not matter.
      const tokensPerDay = decision === "allow" ? budgetOf(c.budget) : undefined;
      if (tokensPerDay === null) {
        showError(c, "Model tokens a day must be a whole number, or empty for no limit.");
        return;
      }
      c.state = "busy";
      c.error.hidden = true;
      for (const b of c.buttons) b.disabled = true;
      c.select.disabled = true;
      c.budget.disabled = true;
      const duration = c.select.value as Duration;
      try {
        const ans = await api.decide(c.req.id, c.req.userCode, decision, duration, tokensPerDay);
        if (!alive) return;
        applyAnswer(c, ans, duration);
      } catch (e) {
        if (!alive) return;
        c.state = "pending";
        if (e instanceof ApiError && e.status === 400) {
          showError(c, "The node refused this answer: " + clean(e.body.error || "the code does not match this request") + ". Reload the page and check the code.");
        } else {
          showError(c, "Your answer was not recorded: " + clean(errorMessage(e)) + ". Try again.");
        }
      }
      showNotice();
    }

    function addCard(req: ConsentRequest): void {
      if (cards.has(req.id)) return;
      const titleId = uid("req");
      const selId = uid("dur");
      const hintId = uid("durhint");
      const timerText = h("span", { class: "countdown" });
      const timer = h("div", { class: "expiry", title: "Expires at " + fmtTime(req.expiresAt, true) }, h("span", { class: "expiry-label" }, "Expires in "), timerText);
      const error = h("div", { class: "card-error", role: "alert", hidden: true });
      const select = h(
        "select",
        { id: selId, class: "select", "aria-describedby": hintId },
        h("option", { value: "1d" }, "1 day"),
        h("option", { value: "30d", selected: true }, "30 days"),
        h("option", { value: "forever" }, "Until revoked"),
      );
      select.value = DEFAULT_DURATION;
      const budgetId = uid("budget");
      const budget = h("input", {
        id: budgetId, class: "input budget-input", type: "number", min: "0", step: "1000", inputmode: "numeric",
        placeholder: "no limit", value: req.tokensPerDay ? String(req.tokensPerDay) : "",
      }) as HTMLInputElement;
      const allow = h("button", { type: "button", class: "btn btn-primary btn-lg" }, "Allow");
      const deny = h("button", { type: "button", class: "btn btn-lg btn-deny" }, "Deny");
      const a = req.agent;
      const el = h(
        "article",
        { class: "consent-card", id: "request-" + clean(req.id), tabindex: "-1", "aria-labelledby": titleId },
        h(
          "div",
          { class: "consent-top" },
          h(
            "div",
            { class: "consent-agent" },
            h("div", { class: "eyebrow", id: titleId }, "Agent asking for access"),
            agentView(a),
          ),
          timer,
        ),
        h(
          "dl",
          { class: "consent-facts" },
          h("div", { class: "fact" }, h("dt", null, "Brand"), h("dd", null, h("span", { class: "fact-strong" }, untrusted(req.brand.name || req.brand.id, 120)), " ", h("code", { class: "muted" }, untrusted(req.brand.id, 60)))),
          h(
            "div",
            { class: "fact" },
            h("dt", null, "Scope"),
            h("dd", null, h("code", { class: "fact-strong" }, untrusted(req.scope.id, 80)), req.scope.description ? h("div", { class: "muted" }, untrusted(req.scope.description, 300)) : null),
          ),
          h(
            "div",
            { class: "fact fact-code" },
            h("dt", null, "User code"),
            h("dd", null, h("div", { class: "user-code mono" }, clean(req.userCode)), h("div", { class: "muted small" }, "Must match the code the agent showed its user.")),
          ),
        ),
        error,
        h(
          "div",
          { class: "consent-actions" },
          h(
            "div",
            { class: "duration" },
            h("label", { for: selId }, "Allow for"),
            select,
            h("span", { id: hintId, class: "muted small" }, "Default: 30 days. You can revoke it any time on Sharing."),
          ),
          h(
            "div",
            { class: "duration budget" },
            h("label", { for: budgetId }, "Model tokens a day"),
            budget,
            h("span", { class: "muted small" }, "Default: the brand's (" + (req.tokensPerDay ? req.tokensPerDay.toLocaleString("en-US") : "no limit") + "). Empty = no limit."),
          ),
          h("div", { class: "decide" }, deny, allow),
        ),
      );
      const group = groupOf(req);
      const c: Card = { req, el, group, armedAt: performance.now() + ARM_MS, state: "pending", timer, timerText, error, buttons: [allow, deny], select, budget };
      allow.addEventListener("click", () => decide(c, "allow"));
      deny.addEventListener("click", () => decide(c, "deny"));
      cards.set(req.id, c);
      // Oldest first within the issuer's group: keep the server's order by creation time.
      const created = (r: ConsentRequest) => parseTime(r.createdAt)?.getTime() ?? 0;
      const after = [...cards.values()].find((o) => o !== c && o.group === group && created(o.req) > created(req));
      if (after) group.list.insertBefore(el, after.el);
      else group.list.appendChild(el);
      refreshGroup(group);
      tick(c, Date.now());
      showArming();
    }

    function groupOf(req: ConsentRequest): Group {
      const site = clean(req.agent.site) || agentSite(req.agent);
      let g = groups.get(site);
      if (g) return g;
      const count = h("span", { class: "group-count muted" });
      const denyAll = h("button", { type: "button", class: "btn btn-sm btn-danger-outline group-deny-all" }, "Deny all from this issuer");
      const gl = h("div", { class: "group-list" });
      const el = h(
        "section",
        { class: "issuer-group", "data-site": site, "aria-label": "Requests from " + agentSite(req.agent) },
        h("header", { class: "group-head" }, h("div", { class: "group-title" }, h("span", { class: "muted" }, "From "), h("strong", { class: "site-name" }, agentSite(req.agent)), " ", count), denyAll),
        gl,
      );
      g = { site, el, list: gl, count, denyAll, armedAt: performance.now() + ARM_MS };
      const group = g;
      denyAll.addEventListener("click", () => denyAllFrom(group, agentSite(req.agent)));
      groups.set(site, g);
      list.appendChild(el); // groups in the order their first request came
      return g;
    }

    function refreshGroup(g: Group): void {
      const mine = [...cards.values()].filter((c) => c.group === g);
      if (mine.length === 0) {
        groups.delete(g.site);
        g.el.remove();
        return;
      }
      const pending = mine.filter((c) => c.state === "pending" || c.state === "expiring").length;
      g.count.textContent = pending === 1 ? "· 1 request waiting" : `· ${pending} requests waiting`;
      g.denyAll.hidden = pending < 2;
    }

    async function denyAllFrom(g: Group, siteName: string): Promise<void> {
      if (!isArmed(g.armedAt)) return;
      const mine = [...cards.values()].filter((c) => c.group === g && c.state === "pending");
      const ok = await confirmDialog({
        title: `Deny all ${mine.length} requests from ${siteName}?`,
        body: [h("p", null, "Every request waiting from this issuer is denied at once; the agents are told no. Requests from other issuers stay as they are.")],
        confirm: "Deny all",
        danger: true,
      });
      if (!ok || !alive) return;
      g.denyAll.disabled = true;
      try {
        await api.denyIssuer(g.site);
        if (!alive) return;
        for (const c of mine) {
          if (c.state !== "pending") continue;
          known.set(normalizeCode(c.req.userCode), "denied");
          setOutcome(c, "bad", "Denied", ["You denied every request from this issuer. The agent gets no access."]);
        }
        refreshGroup(g);
      } catch (e) {
        if (!alive) return;
        replace(notice, banner("bad", "Could not deny the requests", errorMessage(e)));
      } finally {
        g.denyAll.disabled = false;
      }
      load(false);
    }

    function removeCard(id: string): void {
      const c = cards.get(id);
      if (!c) return;
      cards.delete(id);
      refreshGroup(c.group);
      c.el.classList.add("leaving");
      window.setTimeout(() => c.el.remove(), 250);
    }

    function tick(c: Card, now: number): void {
      if (c.state === "done") return;
      const exp = parseTime(c.req.expiresAt)?.getTime() ?? now;
      const left = exp - now;
      if (left <= 0) {
        c.timerText.textContent = "Expired";
        c.timer.firstChild!.textContent = "";
        c.el.classList.add("expiring");
        c.timer.classList.add("expiry-over");
        if (c.state === "pending") {
          c.state = "expiring";
          known.set(normalizeCode(c.req.userCode), "expired");
          for (const b of c.buttons) b.disabled = true;
          c.select.disabled = true;
          c.budget.disabled = true;
        }
        return;
      }
      c.timerText.textContent = countdown(left);
      c.timer.classList.toggle("expiry-soon", left < 60_000);
    }

    const interval = window.setInterval(() => {
      const now = Date.now();
      for (const c of cards.values()) tick(c, now);
    }, 1000);

    async function load(initial: boolean): Promise<void> {
      let reqs: ConsentRequest[];
      try {
        const ans = await api.consent(wanted || undefined);
        reqs = ans.requests ?? [];
        // The node's word on a linked code that is no longer pending (expired, decided).
        const st = ans.lookup?.status;
        if (wanted && !known.has(wanted) && (st === "allowed" || st === "denied" || st === "expired")) {
          known.set(wanted, st);
        }
      } catch (e) {
        if (!alive || !(e instanceof ApiError)) return;
        if (initial) replace(body, banner("bad", "Could not load the requests", errorMessage(e)));
        return;
      }
      if (!alive) return;
      if (initial) replace(body, list, empty);
      const ids = new Set(reqs.map((r) => r.id));
      for (const [id, c] of cards) {
        if (!ids.has(id) && c.state !== "done" && c.state !== "busy") {
          const past = (parseTime(c.req.expiresAt)?.getTime() ?? 0) <= Date.now();
          known.set(normalizeCode(c.req.userCode), past ? "expired" : "decided_elsewhere");
          removeCard(id);
        }
      }
      for (const r of reqs) addCard(r);
      loaded = true;
      setPending(pendingCount());
      refreshEmpty();
      showNotice();
      if (initial) highlight();
    }

    const offs = [
      on("consent", (ev) => {
        const r = ev.request;
        if (!r) {
          load(false);
          return;
        }
        const code = normalizeCode(r.userCode);
        if (ev.kind === "added") {
          addCard(r);
          if (code === wanted) highlight();
        } else if (ev.kind === "expired") {
          known.set(code, "expired");
          const c = cards.get(r.id);
          if (c && c.state !== "done" && c.state !== "busy") removeCard(r.id);
        } else if (ev.kind === "decided") {
          const c = cards.get(r.id);
          if (c && (c.state === "pending" || c.state === "expiring")) {
            known.set(code, "decided_elsewhere");
            setOutcome(c, "neutral", "Already decided", ["This request was answered somewhere else (a notification or another window)."]);
          }
        }
        refreshEmpty();
        showNotice();
      }),
      on("poll", () => load(false)),
      on("resync", () => load(false)),
    ];

    load(true);

    return {
      update(u) {
        wanted = u.searchParams.has("user_code") ? normalizeCode(u.searchParams.get("user_code") ?? "") : "";
        rearm(); // a link brought a request forward: nothing takes a click at once
        for (const c of cards.values()) c.el.classList.remove("highlight");
        showNotice();
        highlight();
      },
      destroy() {
        alive = false;
        window.clearInterval(interval);
        window.clearTimeout(armTimer);
        document.removeEventListener("visibilitychange", onAttention);
        window.removeEventListener("focus", onAttention);
        window.removeEventListener("blur", onAttention);
        offs.forEach((f) => f());
      },
    };
  },
};

function emptyState(): HTMLElement {
  return h(
    "section",
    { class: "empty", hidden: true },
    h("div", { class: "empty-icon", "aria-hidden": "true" }, "✓"),
    h("h2", null, "No pending requests"),
    h(
      "p",
      null,
      "When someone's AI agent wants to use one of your brands, it asks this node for access. The agent shows its user a short code (like ",
      h("code", { class: "mono" }, "BCDF-GHJK"),
      ") and a link to this page, and the request appears here at once — no need to reload.",
    ),
    h("p", null, "Check the agent's origin and the code, then Allow or Deny. Requests expire after a few minutes; nothing happens until you decide."),
    h("p", { class: "muted small" }, "Agents find your brands through their agent cards, listed on ", h("a", { href: "/" }, "Status"), "."),
  );
}
