import { h } from "../dom";

/** tokenFrom accepts a bare token or a whole pasted sign-in link. */
function tokenFrom(raw: string): string {
  const s = raw.trim();
  if (/^https?:\/\//i.test(s) || s.startsWith("/login")) {
    try {
      return new URL(s, location.href).searchParams.get("token") ?? "";
    } catch {
      return "";
    }
  }
  return s;
}

/** signInScreen is all a page shows without an admin session. */
export function signInScreen(): HTMLElement {
  const input = h("input", { id: "admin-token", class: "input mono", type: "password", name: "token", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "token-hint token-err" });
  const err = h("p", { id: "token-err", class: "field-error", hidden: true });
  const form = h(
    "form",
    { class: "signin-form", novalidate: true },
    h("label", { for: "admin-token" }, "Admin token"),
    input,
    h("p", { id: "token-hint", class: "field-hint" }, "Paste the token, or the whole sign-in link."),
    err,
    h("button", { type: "submit", class: "btn btn-primary btn-block" }, "Sign in"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const token = tokenFrom(input.value);
    if (!token) {
      err.textContent = "That is not a token or a sign-in link.";
      err.hidden = false;
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    // A full navigation: the server sets the session cookie and answers with the Consent page.
    location.assign("/login?token=" + encodeURIComponent(token));
  });
  return h(
    "div",
    { class: "signin" },
    h(
      "main",
      { class: "signin-card" },
      h("div", { class: "wordmark wordmark-lg" }, h("span", { class: "wordmark-mark", "aria-hidden": "true" }), "Aether"),
      h("h1", null, "Sign in to this node"),
      h(
        "p",
        null,
        "The admin pages need a session. Open the sign-in link that ",
        h("code", null, "aether node serve"),
        " printed when it started — it looks like ",
        h("code", { class: "break" }, location.origin + "/login?token=…"),
        ".",
      ),
      h("p", null, "Lost it? The token is also in the file ", h("code", null, "admin.token"), " in the node's data directory. Paste it here:"),
      form,
      h("p", { class: "muted small" }, "In the Aether desktop window you are always signed in."),
    ),
  );
}
