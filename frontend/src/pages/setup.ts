// The first run on the Status page: the checklist to "Ready for agents", the Codex card (Get
// Codex with its progress, or a Codex the owner installed) and the Model card (the API key,
// an OpenAI-compatible server, Check). The cards are made once and updated in place, so a
// reload of the page's data never wipes what the owner is typing. The key is sent once and
// never shown back: the node answers only whether one is set (docs/admin-api.md).

import { api, ApiError, errorMessage, type Status, type SetupStep, type CodexDownload, type ModelCheck, type ModelGateway } from "../api";
import { h, replace, badge, clean, fmtTime } from "../dom";

export interface SetupSection {
  checklist: HTMLElement;
  cards: HTMLElement;
  update(s: Status): void;
  destroy(): void;
}

const STEP_TITLES: Record<string, string> = {
  codex: "Codex ready",
  model: "A model",
  brand: "A brand",
  reachable: "Reachable",
  ready: "Ready for agents",
  agents: "My agents can call other nodes",
};

const STEP_ACTIONS: Record<string, string> = {
  codex: "Get Codex",
  model: "Set a key",
  brand: "Add a brand",
  reachable: "Set up reachability",
  agents: "My agents",
};

function mb(n: number): string {
  return (n / (1 << 20)).toFixed(0) + " MB";
}

function checklistView(steps: SetupStep[]): HTMLElement {
  const ready = steps.find((s) => s.id === "ready")?.done ?? false;
  return h(
    "section",
    { class: "card card-wide setup", id: "setup", "aria-label": "First run" },
    h("div", { class: "card-head" }, h("h2", null, "First run"), ready ? badge("Ready for agents", "ok") : badge("Not ready yet", "warn")),
    h(
      "ol",
      { class: "setup-steps" },
      steps.map((s) =>
        h(
          "li",
          { class: "setup-step" + (s.done ? " done" : ""), "data-step": s.id },
          h("span", { class: "setup-mark", "aria-hidden": "true" }, s.done ? "✓" : "○"),
          h("span", { class: "setup-title" }, STEP_TITLES[s.id] ?? clean(s.id)),
          h("span", { class: "setup-text muted", title: clean(s.text) }, clean(s.text)),
          !s.done && s.link && STEP_ACTIONS[s.id] ? h("a", { href: s.link, class: "link-quiet setup-link" }, STEP_ACTIONS[s.id] + " →") : null,
        ),
      ),
    ),
  );
}

/** setupSection builds the checklist and the two cards; reload asks the page for fresh data. */
export function setupSection(reload: () => void): SetupSection {
  const checklist = h("div", null);
  const codex = codexCard(reload);
  const model = modelCard(reload);
  const cards = h("div", { class: "grid grid-2" }, codex.el, model.el);
  return {
    checklist,
    cards,
    update(s) {
      replace(checklist, checklistView(s.setup ?? []));
      codex.update(s);
      model.update(s);
    },
    destroy() {
      codex.destroy();
    },
  };
}

function codexCard(reload: () => void) {
  const state = h("span", null);
  const facts = h("dl", { class: "kvs kvs-stacked" });
  const problem = h("p", { class: "error-text", hidden: true });
  const pinNote = h("p", { class: "hint pin-note", role: "note", hidden: true });
  const bar = h("progress", { class: "download-bar", max: 1, value: 0, "aria-label": "Codex download" });
  const barText = h("span", { class: "muted small download-text" });
  const getBtn = h("button", { type: "button", class: "btn btn-primary", id: "get-codex" }, "Get Codex");
  const cancelBtn = h("button", { type: "button", class: "btn", id: "cancel-codex", hidden: true }, "Cancel");
  const getText = h("p", { class: "hint" });
  const getError = h("p", { class: "error-text", role: "alert", hidden: true });
  const progress = h("div", { class: "download", hidden: true }, bar, barText);
  const get = h("div", { class: "get-codex" }, getText, h("div", { class: "form-actions" }, getBtn, cancelBtn), progress, getError);
  const path = h("input", { class: "input mono", id: "codex-path", type: "text", placeholder: "/usr/local/bin/codex", spellcheck: "false", autocomplete: "off" });
  const pathBtn = h("button", { type: "submit", class: "btn btn-sm" }, "Use this Codex");
  const pathError = h("p", { class: "field-error", hidden: true });
  const pathForm = h(
    "form",
    { class: "field codex-path-form", novalidate: true },
    h("label", { for: "codex-path" }, "Use a Codex I installed"),
    h("div", { class: "inline-form" }, path, pathBtn),
    h("p", { class: "field-hint" }, "The codex binary's full path (0.169.0 or newer). Leave it empty to forget it."),
    pathError,
  );
  const el = h(
    "section",
    { class: "card", id: "codex" },
    h("div", { class: "card-head" }, h("h2", null, "Codex"), state),
    facts,
    problem,
    pinNote,
    get,
    h("details", { class: "more" }, h("summary", null, "Use a Codex I installed"), pathForm),
  );
  let timer: number | undefined;
  const poll = () => {
    api.codexDownload().then(
      (d) => {
        showDownload(d);
        if (d.state === "downloading") timer = window.setTimeout(poll, 400);
        else reload();
      },
      () => (timer = window.setTimeout(poll, 1000)),
    );
  };
  const showDownload = (d: CodexDownload) => {
    const running = d.state === "downloading";
    progress.hidden = !running && d.state !== "installed";
    bar.max = Math.max(d.total, 1);
    bar.value = d.done;
    barText.textContent = running ? `Downloading: ${mb(d.done)} of ${mb(d.total)}` : d.state === "installed" ? "Installed and checked" : "";
    getBtn.disabled = running;
    getBtn.textContent = d.state === "failed" ? "Try again" : running ? "Getting Codex…" : "Get Codex";
    cancelBtn.hidden = !running;
    cancelBtn.disabled = false;
    getError.hidden = d.state !== "failed";
    getError.textContent = d.state === "failed" ? clean(d.error) : "";
  };
  getBtn.addEventListener("click", () => {
    getBtn.disabled = true;
    api.getCodex().then(
      (d) => {
        showDownload(d);
        poll();
      },
      (e) => {
        getBtn.disabled = false;
        getError.hidden = false;
        getError.textContent = errorMessage(e);
      },
    );
  });
  // Cancel stops the download under way; nothing of it is kept (docs/admin-api.md).
  cancelBtn.addEventListener("click", () => {
    cancelBtn.disabled = true;
    api.cancelCodex().then(
      (d) => {
        getError.hidden = true;
        showDownload(d);
        reload();
      },
      (e) => {
        cancelBtn.disabled = false;
        getError.hidden = false;
        getError.textContent = errorMessage(e);
      },
    );
  });
  pathForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    pathBtn.disabled = true;
    api.useCodex(path.value.trim()).then(
      () => {
        pathBtn.disabled = false;
        pathError.hidden = true;
        reload();
      },
      (e) => {
        pathBtn.disabled = false;
        pathError.hidden = false;
        pathError.textContent = errorMessage(e);
      },
    );
  });
  let pathShown = false;
  return {
    el,
    update(s: Status) {
      const c = s.codex;
      const d = s.download;
      const running = d?.state === "downloading";
      replace(
        state,
        running ? badge("Downloading", "info") : !c.found ? badge("Not found", "bad") : !c.versionOk ? badge("Unsupported version", "bad") : badge("Ready", "ok"),
      );
      replace(
        facts,
        h("div", { class: "kv" }, h("dt", null, "Version"), h("dd", null, versionText(c.version, c.pinned))),
        c.path ? h("div", { class: "kv" }, h("dt", null, "Path"), h("dd", null, h("code", { class: "mono break" }, clean(c.path)))) : null,
      );
      pinNote.hidden = !c.pinNote;
      pinNote.textContent = clean(c.pinNote);
      problem.hidden = !c.error || c.found;
      problem.textContent = c.found ? "" : clean(c.error);
      const needed = !c.found || !c.versionOk || running || d?.state === "failed";
      get.hidden = !needed || d?.state === "unavailable";
      if (d) {
        getText.textContent =
          `Aether downloads Codex ${clean(d.version)} (${clean(d.package)}, ${mb(d.total)}) from the npm registry, ` +
          "checks it against the hash pinned in Aether, and keeps it in its data folder. No terminal needed.";
        showDownload(d);
        if (running && timer === undefined) poll();
      }
      if (!pathShown && document.activeElement !== path) {
        path.value = s.model?.codexPath ?? "";
        pathShown = true;
      }
    },
    destroy() {
      if (timer !== undefined) window.clearTimeout(timer);
    },
  };
}

/** The codex in use and the release Aether pins, on one line. */
function versionText(version: string, pinned: string): string {
  if (!pinned) return version ? clean(version) : "—";
  if (!version) return `— (Aether pins ${clean(pinned)})`;
  return version === pinned ? `${clean(version)} (the pinned release)` : `${clean(version)} (Aether pins ${clean(pinned)})`;
}

function checkView(c: ModelCheck | null | undefined): HTMLElement | null {
  if (!c) return null;
  return c.ok
    ? h("p", { class: "check-ok", role: "status" }, badge("OK", "ok"), " The model answered", c.answer ? ": " + clean(c.answer) : "", h("span", { class: "muted small" }, " · " + fmtTime(c.at, true)))
    : h("div", { class: "check-bad", role: "alert" }, badge("Check failed", "bad"), h("p", { class: "error-text" }, clean(c.error)));
}

/** The model gateway's line: where turns' model calls go, whether it has a key, its last error. */
function gatewayView(g: ModelGateway | null | undefined): HTMLElement | null {
  if (!g) return null;
  return h(
    "div",
    null,
    h("p", { class: "hint" }, "Turns reach the model through Aether's gateway, which forwards to ", h("span", { class: "mono" }, clean(g.upstream)), " · key: ", g.keyPresent ? "present" : "none"),
    g.lastError
      ? h("p", { class: "error-text", role: "alert" }, "Last model error: " + clean(g.lastError), g.lastErrorAt ? h("span", { class: "muted small" }, " · " + fmtTime(g.lastErrorAt, true)) : "")
      : null,
    g.noUsage
      ? h("p", { class: "hint" }, badge("No usage", "warn"), " This server reports no token usage: grants' budgets count Aether's estimate (a token for every 4 bytes sent and received).")
      : null,
  );
}

function modelCard(reload: () => void) {
  const state = h("span", null);
  const summary = h("p", { class: "hint" });
  const keySet = h("span", { class: "key-set", hidden: true });
  const key = h("input", { class: "input mono", id: "model-key", type: "password", autocomplete: "off", spellcheck: "false", placeholder: "sk-…" });
  const keyBtn = h("button", { type: "submit", class: "btn btn-primary btn-sm" }, "Save key");
  const removeBtn = h("button", { type: "button", class: "btn btn-danger-outline btn-xs", hidden: true }, "Remove key");
  const keyError = h("p", { class: "field-error", role: "alert", hidden: true });
  const keyForm = h(
    "form",
    { class: "field key-form", novalidate: true },
    h("div", { class: "label-row" }, h("label", { for: "model-key" }, "API key ", keySet), removeBtn),
    h("div", { class: "inline-form" }, key, keyBtn),
    h(
      "p",
      { class: "field-hint" },
      "A dedicated, limited key. Aether keeps it in its data folder, readable by you only, and never shows it again. Aether's model gateway alone holds it: each turn's Codex gets a one-time token instead. It comes before CODEX_API_KEY and codex login.",
    ),
    keyError,
  );
  const base = h("input", { class: "input mono", id: "model-base-url", type: "url", autocomplete: "off", spellcheck: "false", placeholder: "https://llm.example/v1" });
  const modelName = h("input", { class: "input mono", id: "model-name", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "gpt-5" });
  const upBtn = h("button", { type: "submit", class: "btn btn-sm" }, "Save server");
  const upError = h("p", { class: "field-error", role: "alert", hidden: true });
  const upForm = h(
    "form",
    { class: "upstream-form", novalidate: true },
    h("div", { class: "field" }, h("label", { for: "model-base-url" }, "Server's base URL"), base,
      h("p", { class: "field-hint" }, "An OpenAI-compatible Responses API (https; plain http only on this machine). Empty: OpenAI.")),
    h("div", { class: "field" }, h("label", { for: "model-name" }, "Model"), modelName, h("p", { class: "field-hint" }, "Empty: Codex's default.")),
    h("div", { class: "form-actions" }, upBtn),
    upError,
  );
  const gateway = h("div", { class: "model-gateway", id: "model-gateway" });
  const checkBtn = h("button", { type: "button", class: "btn", id: "check-model" }, "Check");
  const checkOut = h("div", { class: "check-out", "aria-live": "polite" });
  const el = h(
    "section",
    { class: "card", id: "model" },
    h("div", { class: "card-head" }, h("h2", null, "Model"), state),
    keyForm,
    h("div", { class: "check-actions" }, checkBtn, h("span", { class: "muted small" }, "Runs one tiny confined turn.")),
    h("details", { class: "more" }, h("summary", null, "Use another server"), upForm),
    checkOut,
    summary,
    gateway,
  );
  const fail = (where: HTMLElement, e: unknown) => {
    where.hidden = false;
    where.textContent = e instanceof ApiError ? e.message : errorMessage(e);
  };
  keyForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = key.value;
    key.value = ""; // the key leaves the page as it is sent
    keyBtn.disabled = true;
    api.setModel({ key: value }).then(
      () => {
        keyBtn.disabled = false;
        keyError.hidden = true;
        reload();
      },
      (e) => {
        keyBtn.disabled = false;
        fail(keyError, e);
      },
    );
  });
  removeBtn.addEventListener("click", () => {
    api.setModel({ removeKey: true }).then(reload, (e) => fail(keyError, e));
  });
  upForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    upBtn.disabled = true;
    api.setModel({ baseUrl: base.value.trim(), model: modelName.value.trim() }).then(
      () => {
        upBtn.disabled = false;
        upError.hidden = true;
        reload();
      },
      (e) => {
        upBtn.disabled = false;
        fail(upError, e);
      },
    );
  });
  checkBtn.addEventListener("click", () => {
    checkBtn.disabled = true;
    checkBtn.textContent = "Checking…";
    replace(checkOut, h("p", { class: "muted" }, "Asking the model through a confined Codex turn…"));
    const done = () => {
      checkBtn.disabled = false;
      checkBtn.textContent = "Check";
    };
    api.checkModel().then(
      (c) => {
        done();
        replace(checkOut, checkView(c));
        reload();
      },
      (e) => {
        done();
        replace(checkOut, h("p", { class: "error-text" }, errorMessage(e)));
      },
    );
  });
  let filled = false;
  return {
    el,
    update(s: Status) {
      const m = s.model;
      const cred = s.codex.credential;
      const check = m?.check;
      replace(
        state,
        check && !check.ok ? badge("Check failed", "bad") : check?.ok ? badge("Checked", "ok") : cred?.problem ? badge("No key", "warn") : badge("Set", "ok"),
      );
      summary.textContent = cred?.problem ? clean(cred.problem) : clean(cred?.summary);
      keySet.hidden = !m?.keySet && !m?.keyFor;
      keySet.textContent = m?.keySet ? "· a key is set" : m?.keyFor ? "· the saved key is for " + clean(m.keyFor) + ", not this server: it gets none" : "";
      removeBtn.hidden = !m?.keySet;
      if (!filled && m && document.activeElement !== base && document.activeElement !== modelName) {
        base.value = m.baseUrl ?? "";
        modelName.value = m.model ?? "";
        filled = true;
      }
      if (!checkBtn.disabled) replace(checkOut, checkView(check));
      replace(gateway, gatewayView(m?.gateway));
    },
  };
}
