// My agents: the owner's own agents, whose identity issuer this node is (docs/assistants.md).
// Each is named here, started by the owner's assistant as `aether mcp --agent NAME`.

import { api, errorMessage, type MyAgent, type MyAgents } from "../api";
import { h, replace, banner, untrusted, timeCell, clean, copyText } from "../dom";
import type { PageDef } from "../router";
import { pageHeader, loading } from "./common";

export const agentsPage: PageDef = {
  title: "My agents",
  mount(root) {
    let alive = true;
    const msg = h("div", { class: "notice-slot", "aria-live": "polite" });
    const issuer = h("div", null);
    const body = h("div", null, loading("Loading your agents…"));
    const name = h("input", { type: "text", class: "input", id: "agent-name", name: "name", placeholder: "claude-desktop", autocomplete: "off", spellcheck: "false", maxlength: "64", pattern: "[a-z0-9][a-z0-9._\\-]{0,63}" });
    const add = h("button", { type: "submit", class: "btn btn-primary" }, "Add agent");
    const form = h(
      "form",
      { class: "agent-add", "aria-label": "Name a new agent" },
      h("label", { for: "agent-name" }, "Name"),
      name,
      add,
      h("p", { class: "sub" }, "One per assistant: lowercase letters, digits, dots, dashes. Other nodes' owners see this name."),
    );
    replace(root, pageHeader("My agents", "Your own assistants, calling other people's Aether nodes with this node as their identity."), msg, issuer, form, body);

    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      add.disabled = true;
      try {
        await api.addAgent(name.value.trim());
        name.value = "";
        replace(msg);
        await load();
      } catch (e) {
        replace(msg, banner("bad", "The agent was not added", errorMessage(e)));
      } finally {
        add.disabled = false;
      }
    });

    async function toggle(a: MyAgent, btn: HTMLButtonElement): Promise<void> {
      btn.disabled = true;
      try {
        await api.setAgent(a.name, !a.on);
        await load();
      } catch (e) {
        replace(msg, banner("bad", "Not changed", errorMessage(e)));
        btn.disabled = false;
      }
    }

    function config(a: MyAgent): HTMLElement {
      const text = JSON.stringify({ mcpServers: { aether: { command: "aether", args: ["mcp", "--agent", a.name] } } }, null, 2);
      const copy = h("button", { type: "button", class: "btn btn-sm" }, "Copy");
      copy.addEventListener("click", () => copyText(text, copy));
      return h("details", { class: "agent-config" }, h("summary", null, "Assistant configuration"), h("pre", null, h("code", null, text)), copy);
    }

    function render(v: MyAgents): void {
      replace(
        issuer,
        v.ready
          ? h("p", { class: "muted" }, "Other nodes check your agents at ", h("code", null, untrusted(v.issuer, 200)), ".")
          : banner("warn", "Your agents cannot call other nodes yet", clean(v.missing)),
      );
      if (v.agents.length === 0) {
        replace(body, h("section", { class: "empty" }, h("h2", null, "No agent yet"), h("p", null, "Name one for each assistant you use, e.g. claude-desktop, then add ", h("code", null, "aether mcp --agent <name>"), " to its MCP servers (docs/assistants.md).")));
        return;
      }
      const rows = v.agents.map((a) => {
        const btn = h("button", { type: "button", class: a.on ? "btn btn-sm btn-danger-outline" : "btn btn-sm" }, a.on ? "Turn off" : "Turn on");
        btn.addEventListener("click", () => toggle(a, btn));
        return h(
          "tr",
          { class: "agent-row", "data-agent": clean(a.name) },
          h("td", null, h("code", { class: "fact-strong" }, untrusted(a.name, 64)), config(a)),
          h("td", null, a.on ? "On" : "Off: gets no new identity token"),
          h("td", null, timeCell(a.created, "—", true)),
          h("td", { class: "cell-actions" }, btn),
        );
      });
      replace(
        body,
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table table-agents" },
            h("thead", null, h("tr", null, ...["Agent", "State", "Named"].map((t) => h("th", { scope: "col" }, t)), h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Actions")))),
            h("tbody", null, ...rows),
          ),
        ),
      );
    }

    async function load(): Promise<void> {
      try {
        const v = await api.myAgents();
        if (alive) render(v);
      } catch (e) {
        if (alive) replace(body, banner("bad", "Could not load your agents", errorMessage(e)));
      }
    }
    void load();
    return {
      destroy() {
        alive = false;
      },
    };
  },
};
