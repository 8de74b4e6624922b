import { api, ApiError, errorMessage, isDesktop, type Brand, type BrandsAnswer, type FieldError } from "../api";
import { h, replace, banner, clean, uid, confirmDialog, copyText } from "../dom";
import { on } from "../events";
import type { PageDef } from "../router";
import { pageHeader, loading, accessModeBadge } from "./common";
import { policyErrorBanner } from "./status";

declare global {
  interface Window {
    // Wails binding (may not exist yet): opens the OS folder picker, resolves "" when cancelled.
    go?: { app?: { Shell?: { ChooseFolder?: () => Promise<string> } } };
  }
}

type FieldKey = "id" | "name" | "description" | "capability" | "workspace" | "accessMode" | "scope.id" | "scope.description";

const FIELD_ALIASES: Record<string, FieldKey> = {
  id: "id",
  name: "name",
  description: "description",
  capability: "capability",
  workspace: "workspace",
  accessmode: "accessMode",
  access_mode: "accessMode",
  "scope.id": "scope.id",
  scopeid: "scope.id",
  scope: "scope.id",
  "scope.description": "scope.description",
  scopedescription: "scope.description",
};

/** fieldKey maps "pact.brands[0].scope.id", "scope.id" or "workspace" to a form field. */
function fieldKey(field: string): FieldKey | null {
  const f = field.replace(/^.*brands\[[^\]]*\]\.?/, "");
  return FIELD_ALIASES[f] ?? FIELD_ALIASES[f.toLowerCase()] ?? null;
}

interface BrandForm {
  el: HTMLElement;
  isNew: boolean;
  saved: Brand | null;
  dirty: boolean;
  read(): Brand;
  setErrors(fields: FieldError[], message: string): void;
  setSaved(b: Brand): void;
}

function chooseFolder(): (() => Promise<string>) | null {
  const fn = window.go?.app?.Shell?.ChooseFolder;
  return isDesktop() && typeof fn === "function" ? fn : null;
}

export const brandsPage: PageDef = {
  title: "Brands",
  mount(root) {
    let alive = true;
    const forms: BrandForm[] = [];
    // The save's own "policy" event reloads the list; keep saying which brand was just saved.
    let justSaved = "";
    const addBtn = h("button", { type: "button", class: "btn btn-primary" }, "Add brand");
    const top = h("div", { class: "notice-slot", "aria-live": "polite" });
    const pathLine = h("p", { class: "muted small policy-path" });
    const list = h("div", { class: "brand-forms" });
    const body = h("div", null, loading("Loading brands…"));
    replace(root, pageHeader("Brands", "What agents can ask for. Saving writes policy.json; the gateway picks the change up at once.", addBtn), top, body);

    addBtn.addEventListener("click", () => {
      const f = brandForm(null);
      list.prepend(f.el);
      (f.el.querySelector("input") as HTMLInputElement | null)?.focus();
    });

    function render(res: BrandsAnswer): void {
      forms.length = 0;
      replace(pathLine, res.policyPath ? ["Policy file: ", h("code", null, clean(res.policyPath))] : []);
      replace(list, (res.brands ?? []).map((b) => brandForm(b).el));
      replace(
        body,
        res.error ? policyErrorBanner(res.error) : null,
        pathLine,
        list,
        h(
          "section",
          { class: "empty empty-brands" },
          h("div", { class: "empty-icon", "aria-hidden": "true" }, "◆"),
          h("h2", null, "No brands yet"),
          h("p", null, "A brand is one thing you offer to agents — for example “Code review” of a workspace folder, read only. Use ", h("strong", null, "Add brand"), " to create the first one."),
        ),
      );
      refreshEmpty();
    }

    function refreshEmpty(): void {
      const empty = body.querySelector<HTMLElement>(".empty-brands");
      if (empty) empty.hidden = list.children.length > 0;
    }

    function brandForm(initial: Brand | null): BrandForm {
      const isNew = initial === null;
      const b: Brand = initial ?? {
        id: "",
        name: "",
        description: "",
        capability: "review",
        workspace: "",
        accessMode: "read_only",
        scope: { id: "", description: "" },
      };
      const errors = new Map<FieldKey, HTMLElement>();
      const inputs = new Map<FieldKey, HTMLInputElement | HTMLTextAreaElement>();
      const formError = h("div", { class: "form-error", role: "alert", hidden: true });
      const status = h("span", { class: "save-status", role: "status" });

      function textField(key: FieldKey, label: string, value: string, opts: { hint?: string; area?: boolean; readonly?: boolean; mono?: boolean; extra?: Node | null; placeholder?: string } = {}): HTMLElement {
        const id = uid("bf");
        const errId = id + "-err";
        const hintId = id + "-hint";
        const input = opts.area
          ? h("textarea", { id, class: "input", rows: "2", name: key })
          : h("input", { id, class: "input" + (opts.mono ? " mono" : ""), type: "text", name: key, autocomplete: "off", spellcheck: "false" });
        input.value = value;
        if (opts.placeholder) input.placeholder = opts.placeholder;
        if (opts.readonly) input.readOnly = true;
        input.setAttribute("aria-describedby", [opts.hint ? hintId : "", errId].filter(Boolean).join(" "));
        const err = h("p", { id: errId, class: "field-error", hidden: true });
        errors.set(key, err);
        inputs.set(key, input);
        input.addEventListener("input", () => {
          markDirty();
          clearError(key);
        });
        return h(
          "div",
          { class: "field field-" + key.replace(".", "-") },
          h("label", { for: id }, label),
          opts.extra ? h("div", { class: "input-row" }, input, opts.extra) : input,
          opts.hint ? h("p", { id: hintId, class: "field-hint" }, opts.hint) : null,
          err,
        );
      }

      function clearError(key: FieldKey): void {
        const e = errors.get(key);
        if (e) {
          e.hidden = true;
          e.textContent = "";
        }
        inputs.get(key)?.removeAttribute("aria-invalid");
        if (key === "accessMode") modeSet.removeAttribute("aria-invalid");
      }

      // Access mode radios.
      const groupName = uid("mode");
      const modeErrId = uid("mode-err");
      const radios: HTMLInputElement[] = [];
      const radio = (value: "read_only" | "read_write", label: string, hint: string) => {
        const id = uid("r");
        const r = h("input", { type: "radio", id, name: groupName, value, checked: b.accessMode === value });
        r.addEventListener("change", () => {
          markDirty();
          clearError("accessMode");
        });
        radios.push(r);
        return h("div", { class: "radio" }, r, h("label", { for: id }, h("span", { class: "radio-label" }, label), h("span", { class: "field-hint" }, hint)));
      };
      const modeErr = h("p", { id: modeErrId, class: "field-error", hidden: true });
      errors.set("accessMode", modeErr);
      const modeSet = h(
        "fieldset",
        { class: "field field-accessMode", "aria-describedby": modeErrId },
        h("legend", null, "Access mode"),
        h(
          "div",
          { class: "radios" },
          radio(
            "read_only",
            "Read only",
            "An agent's turn sees this folder and nothing else of your machine: Codex and the commands it runs may read it, never change it.",
          ),
          radio(
            "read_write",
            "Read & write",
            "An agent's turn sees this folder and nothing else of your machine: Codex and the commands it runs may read and change files inside it, nowhere else.",
          ),
        ),
        modeErr,
      );

      const picker = chooseFolder();
      let chooseBtn: HTMLButtonElement | null = null;
      if (picker) {
        chooseBtn = h("button", { type: "button", class: "btn" }, "Choose folder…");
        chooseBtn.addEventListener("click", async () => {
          try {
            const dir = await picker();
            if (dir) {
              const ws = inputs.get("workspace")!;
              ws.value = dir;
              markDirty();
              clearError("workspace");
            }
          } catch (e) {
            showFormError("Could not open the folder picker: " + errorMessage(e));
          }
        });
      }

      const titleText = h("span", null, clean(b.name) || (isNew ? "New brand" : clean(b.id)));
      const modeBadge = h("span", null, isNew ? null : accessModeBadge(b.accessMode));
      const cardUrl = h("div", { class: "card-url" });
      const setCardUrl = (url: string | undefined) => {
        if (!url) {
          replace(cardUrl);
          return;
        }
        const btn = h("button", { type: "button", class: "btn btn-ghost btn-xs", "aria-label": "Copy agent card URL" }, "Copy");
        btn.addEventListener("click", () => copyText(url, btn));
        replace(cardUrl, h("span", { class: "label-inline" }, "Agent card"), h("code", { class: "mono" }, clean(url)), btn);
      };
      setCardUrl(b.cardUrl);

      const saveBtn = h("button", { type: "submit", class: "btn btn-primary" }, "Save");
      const removeBtn = h("button", { type: "button", class: "btn btn-danger-outline" }, isNew ? "Discard" : "Remove");

      const el = h(
        "form",
        { class: "card brand-form" + (isNew ? " brand-new" : ""), novalidate: true, "aria-label": isNew ? "New brand" : "Brand " + clean(b.name || b.id) },
        h("div", { class: "card-head" }, h("h2", null, titleText, " ", modeBadge), cardUrl),
        h(
          "div",
          { class: "form-grid" },
          textField("id", "ID", b.id, { readonly: !isNew, mono: true, hint: isNew ? "Short and stable, e.g. “review”; used in URLs." : "Fixed once saved." }),
          textField("name", "Name", b.name, { placeholder: "Code review" }),
          textField("capability", "Capability", b.capability, { mono: true, hint: "Which instructions Codex gets, e.g. the built-in “review”." }),
          textField("description", "Description", b.description, { area: true, placeholder: "What agents get from this brand" }),
          textField("workspace", "Workspace", b.workspace, { mono: true, hint: "A folder; relative paths are relative to the folder of policy.json.", extra: chooseBtn }),
          modeSet,
          textField("scope.id", "Scope ID", b.scope?.id ?? "", { mono: true, placeholder: "review:read_only", hint: "What the agent asks for. “pact” is reserved: the node adds it." }),
          textField("scope.description", "Scope description", b.scope?.description ?? "", { placeholder: "Review code (read only)" }),
        ),
        formError,
        h("div", { class: "form-actions" }, status, removeBtn, saveBtn),
      );

      function showFormError(msg: string, extra: FieldError[] = []): void {
        replace(formError, h("div", null, msg), extra.length ? h("ul", null, extra.map((f) => h("li", null, h("code", null, clean(f.field)), " — ", clean(f.message)))) : null);
        formError.hidden = false;
      }

      const form: BrandForm = {
        el,
        isNew,
        saved: initial,
        dirty: false,
        read() {
          const v = (k: FieldKey) => inputs.get(k)!.value.trim();
          const mode = radios.find((r) => r.checked)?.value === "read_write" ? "read_write" : "read_only";
          return {
            id: v("id"),
            name: v("name"),
            description: v("description"),
            capability: v("capability"),
            workspace: v("workspace"),
            accessMode: mode,
            scope: { id: v("scope.id"), description: v("scope.description") },
          };
        },
        setErrors(fields, message) {
          const unknown: FieldError[] = [];
          let first: HTMLElement | null = null;
          for (const f of fields) {
            const key = fieldKey(f.field);
            const err = key ? errors.get(key) : undefined;
            if (!key || !err) {
              unknown.push(f);
              continue;
            }
            err.textContent = clean(f.message);
            err.hidden = false;
            if (key === "accessMode") {
              modeSet.setAttribute("aria-invalid", "true");
              first ??= radios[0];
            } else {
              const input = inputs.get(key)!;
              input.setAttribute("aria-invalid", "true");
              first ??= input;
            }
          }
          if (unknown.length || !fields.length) showFormError(message || "The brand was not saved.", unknown);
          else showFormError("Please fix the highlighted fields.");
          first?.focus();
        },
        setSaved(saved) {
          form.saved = saved;
          form.isNew = false;
          form.dirty = false;
          el.classList.remove("dirty", "brand-new");
          el.setAttribute("aria-label", "Brand " + clean(saved.name || saved.id));
          titleText.textContent = clean(saved.name) || clean(saved.id);
          replace(modeBadge, accessModeBadge(saved.accessMode));
          const idIn = inputs.get("id")!;
          idIn.readOnly = true;
          idIn.value = saved.id;
          setCardUrl(saved.cardUrl);
          removeBtn.textContent = "Remove";
          status.textContent = "Saved — the gateway uses it now.";
          status.className = "save-status save-ok";
        },
      };

      function markDirty(): void {
        form.dirty = true;
        el.classList.add("dirty");
        status.textContent = "Unsaved changes";
        status.className = "save-status save-dirty";
      }

      el.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        for (const k of errors.keys()) clearError(k);
        formError.hidden = true;
        const data = form.read();
        if (!data.id) {
          form.setErrors([{ field: "id", message: "Give the brand an ID." }], "");
          return;
        }
        saveBtn.disabled = true;
        status.textContent = "Saving…";
        status.className = "save-status";
        try {
          const res = await api.putBrand(data);
          if (!alive) return;
          const saved = (res.brands ?? []).find((x) => x.id === data.id) ?? data;
          form.setSaved(saved);
          justSaved = saved.id;
          replace(top);
        } catch (e) {
          if (!alive || !(e instanceof ApiError)) return;
          status.textContent = "Not saved";
          status.className = "save-status save-bad";
          if (e.status === 422) form.setErrors(e.body.fields ?? [], clean(e.body.error));
          else showFormError("Could not save: " + clean(errorMessage(e)));
        } finally {
          saveBtn.disabled = false;
        }
      });

      removeBtn.addEventListener("click", async () => {
        if (form.isNew) {
          el.remove();
          forms.splice(forms.indexOf(form), 1);
          refreshEmpty();
          return;
        }
        const name = clean(form.saved?.name || form.saved?.id);
        const ok = await confirmDialog({
          title: `Remove brand “${name}”?`,
          body: [
            h("p", null, "It is removed from policy.json and agents can no longer ask for it or use it."),
            h("p", { class: "muted" }, "Receipts stay. You can add the brand again later."),
          ],
          confirm: "Remove brand",
          danger: true,
        });
        if (!ok || !alive) return;
        removeBtn.disabled = true;
        try {
          await api.deleteBrand(form.saved!.id);
          if (!alive) return;
          el.remove();
          forms.splice(forms.indexOf(form), 1);
          refreshEmpty();
          replace(top, banner("ok", "Brand removed", `“${name}” is no longer offered.`));
        } catch (e) {
          if (!alive || !(e instanceof ApiError)) return;
          removeBtn.disabled = false;
          showFormError("Could not remove: " + clean(errorMessage(e)));
        }
      });

      if (initial && initial.id === justSaved) {
        status.textContent = "Saved — the gateway uses it now.";
        status.className = "save-status save-ok";
      }
      forms.push(form);
      return form;
    }

    const load = () =>
      api.brands().then(
        (res) => {
          if (alive) render(res);
        },
        (e) => {
          if (!alive || !(e instanceof ApiError)) return;
          replace(body, banner("bad", "Could not load the brands", errorMessage(e)));
        },
      );
    load();

    const offs = [
      on("policy", () => {
        // Someone (maybe this page) changed policy.json. Reload unless it would lose edits.
        if (!forms.some((f) => f.dirty || f.isNew)) {
          load();
          return;
        }
        const btn = h("button", { type: "button", class: "btn btn-sm" }, "Reload");
        btn.addEventListener("click", () => {
          replace(top);
          load();
        });
        replace(top, banner("info", "policy.json changed", "The file changed while you were editing. Reload to see it (your unsaved edits will be lost). ", btn));
      }),
      on("resync", () => {
        if (!forms.some((f) => f.dirty || f.isNew)) load();
      }),
    ];

    return {
      destroy() {
        alive = false;
        offs.forEach((f) => f());
      },
    };
  },
};
