// Received: the receipts the owner's agents got from other nodes (docs/assistants.md), each
// checked by this node on arrival and kept with what it was checked with.

import { api, errorMessage, type ReceivedReceipt } from "../api";
import { h, replace, banner, untrusted, timeCell, badge, clean } from "../dom";
import { receiptStatusBadge } from "./common";

export function receivedSection(): HTMLElement {
  const body = h("div", null);
  const section = h(
    "section",
    { class: "received", "aria-labelledby": "received-title" },
    h(
      "header",
      { class: "section-header" },
      h("h2", { id: "received-title" }, "Received"),
      h("p", { class: "sub" }, "What your agents got from other nodes, each receipt checked by this node."),
      h("a", { class: "btn btn-sm", href: "/api/receipts/received/export", download: "received-receipts.jsonl" }, "Export JSON Lines"),
    ),
    body,
  );
  const row = (r: ReceivedReceipt) =>
    h(
      "tr",
      { class: "received-row", "data-rid": clean(r.rid) },
      h("td", null, untrusted(r.node, 120)),
      h("td", null, untrusted(r.brand, 80)),
      h("td", null, h("code", null, untrusted(r.agent, 64))),
      h("td", null, receiptStatusBadge(r.status)),
      h("td", null, r.verified ? badge("Verified", "ok") : badge("Not verified", "bad"), r.problem ? h("div", { class: "sub" }, untrusted(r.problem, 300)) : null),
      h("td", null, r.logConsistent ? badge("Consistent", "ok") : badge("Not shown consistent", "warn")),
      h("td", { class: "sub" }, untrusted(r.ran, 200)),
      h("td", null, timeCell(r.receivedAt, "—", true)),
    );
  api
    .received()
    .then((l) => {
      if (l.receipts.length === 0) {
        replace(body, h("p", { class: "muted" }, "None yet: receipts your agents get through ", h("a", { href: "/agents" }, "My agents"), " appear here."));
        return;
      }
      replace(
        body,
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table table-received" },
            h("thead", null, h("tr", null, ...["Node", "Brand", "Agent", "Status", "Verified", "Log", "What ran", "Received"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", null, ...l.receipts.map(row)),
          ),
        ),
      );
    })
    .catch((e) => replace(body, banner("bad", "Could not load the received receipts", errorMessage(e))));
  return section;
}
