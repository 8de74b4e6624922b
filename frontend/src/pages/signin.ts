import { h } from "../dom";

/** linkFrom is the sign-in link (a one-time code, on this server) when one was pasted. */
function linkFrom(raw: string): string {
  const s = raw.trim();
  if (!/^https?:\/\//i.test(s) && !s.startsWith("/login")) return "";
  try {
    const u = new URL(s, location.href);
    const code = u.searchParams.get("code");
    return u.pathname === "/login" && code ? "/login?code=" + encodeURIComponent(code) : "";
  } catch {
    return "";
  }
}

/** signInScreen is all a page shows without an admin session. */
export function signInScreen(): HTMLElement {
  const input = h("input", { id: "admin-token", class: "input mono", type: "password", name: "token", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "token-hint token-err" });
  const err = h("p", { id: "token-err", class: "field-error", hidden: true });
  // The token goes in the body of a POST, never in a URL: history and logs keep URLs.
  const form = h(
    "form",
    { class: "signin-form", method: "post", action: "/login", novalidate: true },
    h("label", { for: "admin-token" }, "Admin token"),
    input,
    h("input", { type: "hidden", name: "return_to", value: location.pathname + location.search }),
    h("p", { id: "token-hint", class: "field-hint" }, "Paste the token, or the whole sign-in link."),
    err,
    h("button", { type: "submit", class: "btn btn-primary btn-block" }, "Sign in"),
  );
  form.addEventListener("submit", (ev) => {
    const raw = input.value.trim();
    const link = linkFrom(raw);
    if (link) {
      ev.preventDefault();
      location.assign(link); // a pasted sign-in link: follow it
      return;
    }
    if (!raw || /^https?:\/\//i.test(raw)) {
      ev.preventDefault();
      err.textContent = "That is not a token or a sign-in link.";
      err.hidden = false;
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    input.value = raw;
    // The form posts itself: the server sets the session cookie and answers with the Consent page.
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
        "The admin pages need a session. Open a sign-in link: ",
        h("code", null, "aether admin link"),
        " prints one (and ",
        h("code", null, "aether node serve"),
        " when it starts). It looks like ",
        h("code", { class: "break" }, location.origin + "/login?code=…"),
        " and works once, within five minutes.",
      ),
      h("p", null, "Lost it? The token is also in the file ", h("code", null, "admin.token"), " in the node's data directory. Paste it here:"),
      form,
      h("p", { class: "muted small" }, "In the Aether desktop window you are always signed in."),
    ),
  );
}
