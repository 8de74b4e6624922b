import { h } from "./dom";

// The pending-requests badge next to "Consent" in the navigation.
const count = h("span", null, "0");
export const pendingBadge = h("span", { class: "nav-badge", hidden: true }, count, h("span", { class: "sr-only" }, " pending"));

export function setPending(n: number): void {
  count.textContent = String(n);
  pendingBadge.hidden = n <= 0;
}
