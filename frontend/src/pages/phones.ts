// The Phones page of the window: the paired phones (name, when paired, last use, pushes) with
// Remove, and "Add a phone": a QR code of a one-time pairing link, good for five minutes and
// only on the owner's tailnet (docs/threats.md O1).
import { errorMessage } from "../api";
import { phones, type Device } from "../phoneapi";
import { h, replace, banner, fmtTime, relTime, countdown, parseTime, confirmDialog, copyText } from "../dom";
import type { PageDef } from "../router";
import { pageHeader, loading } from "./common";

export const phonesPage: PageDef = {
  title: "Phones",
  mount(root) {
    let alive = true;
    let tick = 0;
    const pairing = h("div", { class: "phone-pairing" });
    const list = h("div", null, loading("Loading phones…"));
    const add = h("button", { class: "btn btn-primary", type: "button" }, "Add a phone");
    add.addEventListener("click", () => void showPairing());
    replace(
      root,
      pageHeader("Phones", "Decide requests from your phone, on your tailnet: it gets a notification for each request. Only your own devices on your tailnet can pair.", add),
      pairing,
      list,
    );

    async function showPairing(): Promise<void> {
      window.clearInterval(tick);
      try {
        const p = await phones.pair();
        if (!alive) return;
        const left = h("span", { class: "mono" });
        const copy = h("button", { class: "btn btn-sm", type: "button" }, "Copy link");
        copy.addEventListener("click", () => copyText(p.link, copy));
        replace(
          pairing,
          h(
            "section",
            { class: "card phone-pair-card" },
            h("h2", null, "Scan with your phone"),
            h("img", { src: p.qr, alt: "QR code of the pairing link", class: "phone-qr", width: "232", height: "232" }),
            h("p", null, "Open it on a phone signed in to your tailnet with the Tailscale app, as the same user as this computer. It works once, for ", left, "."),
            h("p", { class: "mono phone-link" }, p.link, " ", copy),
            h("p", { class: "muted" }, "On an iPhone, add the page to the Home Screen (Share → Add to Home Screen) and open it from there: iOS sends notifications only to web apps on the Home Screen."),
          ),
        );
        const exp = parseTime(p.expiresAt)?.getTime() ?? Date.now();
        const show = () => {
          const ms = exp - Date.now();
          left.textContent = ms > 0 ? countdown(ms) : "no more: add the phone again";
          if (ms <= 0) window.clearInterval(tick);
        };
        show();
        tick = window.setInterval(show, 1000);
      } catch (e) {
        replace(pairing, banner("warn", "A phone cannot be added now", errorMessage(e)));
      }
    }

    function row(d: Device): HTMLElement {
      const remove = h("button", { class: "btn btn-sm btn-danger-outline", type: "button" }, "Remove");
      remove.addEventListener("click", async () => {
        const ok = await confirmDialog({ title: "Remove " + d.name + "?", body: [h("p", null, "It can no longer see or decide requests, and gets no more notifications. Pair it again to use it.")], confirm: "Remove", danger: true });
        if (!ok) return;
        try {
          await phones.remove(d.id);
        } catch (e) {
          replace(pairing, banner("bad", "Not removed", errorMessage(e)));
        }
        void load();
      });
      return h(
        "tr",
        null,
        h("td", null, d.name),
        h("td", null, fmtTime(d.paired)),
        h("td", null, relTime(d.lastUsed)),
        h("td", null, d.push ? "On" : "Off"),
        h("td", null, remove),
      );
    }

    async function load(): Promise<void> {
      try {
        const l = await phones.list();
        if (!alive) return;
        const where = l.url
          ? h("p", { class: "muted" }, "Your phones open ", h("span", { class: "mono" }, l.url), " over the tailnet.")
          : banner("info", "Not on your tailnet yet", "Turn on Tailscale Funnel on the Status page to add a phone.");
        replace(
          list,
          where,
          l.devices.length === 0
            ? h("p", { class: "empty" }, "No phone is paired.")
            : h(
                "div",
                { class: "table-wrap" },
                h(
                "table",
                { class: "table" },
                h("thead", null, h("tr", null, h("th", null, "Device"), h("th", null, "Paired"), h("th", null, "Last used"), h("th", null, "Notifications"), h("th", null, ""))),
                h("tbody", null, ...l.devices.map(row)),
              ),
              ),
        );
      } catch (e) {
        replace(list, banner("bad", "The phones did not load", errorMessage(e)));
      }
    }
    void load();
    return {
      destroy() {
        alive = false;
        window.clearInterval(tick);
      },
    };
  },
};
