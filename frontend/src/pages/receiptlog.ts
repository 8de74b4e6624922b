import type { ReceiptLog } from "../api";
import { h, badge, clean, untrusted, timeCell } from "../dom";
import { receiptAgentCell } from "./common";

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`;

/** The receipts log card: its newest checkpoint, whether it holds, and who witnesses it. */
export function receiptLogCard(log: ReceiptLog | null): HTMLElement {
  const card = h("section", { class: "card receipt-log", "aria-label": "Receipts log" });
  if (!log) {
    card.append(
      h("div", { class: "card-head" }, h("h2", null, "Receipts log"), badge("Empty", "neutral")),
      h("p", { class: "muted" }, "The first receipt starts the log: a Merkle tree of every receipt, whose signed checkpoints agents keep and compare."),
    );
    return card;
  }
  const kv = (k: string, v: Node | string) => h("div", { class: "kv" }, h("dt", null, k), h("dd", null, v));
  const root = clean(log.root);
  card.append(
    h(
      "div",
      { class: "card-head" },
      h("h2", null, "Receipts log"),
      log.verify.ok ? badge("Checkpoint verifies", "ok") : badge("Checkpoint does not verify", "bad"),
    ),
    h(
      "dl",
      { class: "kvs" },
      kv("Receipts", String(log.size)),
      kv("Origin", h("code", null, untrusted(log.origin, 80))),
      kv("Root", h("code", { class: "mono", title: root }, root.slice(0, 12) + "…")),
      kv("Signed", timeCell(log.time)),
      kv("Witnesses", log.witnesses === 0 ? "No agent has cosigned a checkpoint yet" : plural(log.witnesses, "agent") + " cosigned a checkpoint"),
    ),
    log.verify.ok ? "" : h("p", { class: "log-problem" }, clean(log.verify.error)),
  );
  if (log.agents.length > 0) {
    card.append(
      h(
        "ul",
        { class: "log-agents", "aria-label": "Witnesses per agent" },
        log.agents.map((a) =>
          h(
            "li",
            null,
            receiptAgentCell(a.agent),
            h("span", { class: a.witnessedBy > 0 ? "" : "muted" }, `history to #${a.lastSeq} witnessed by ${plural(a.witnessedBy, "agent")}`),
          ),
        ),
      ),
    );
  }
  return card;
}
