// Gateway settings: the gateway-wide switches that are not model policy. Today: cost disclosure, whether
// callers are shown what their requests cost (docs/cost.md, "Turning it off"; docs/admin-api.md, "Gateway
// settings"). A key's own switch (Tenants & keys, Edit key) wins over this one.
import { call, ApiError } from "../api.js";
import { el, notice, errorText } from "../ui.js";

let root, ctx;

export function mount(section, c) {
  root = section;
  ctx = c;
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "settings-title" }, "Settings")),
    el("p", { id: "st-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("p", { id: "st-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("section", { class: "panel", "aria-labelledby": "st-cost-title" },
      el("h2", { id: "st-cost-title" }, "Cost disclosure"),
      el("div", { class: "field field-check" },
        el("input", { type: "checkbox", id: "st-cost", "aria-describedby": "st-cost-hint st-cost-state" }),
        el("label", { for: "st-cost" }, "Show callers what their requests cost")),
      el("p", { id: "st-cost-hint", class: "muted small" },
        "Exact cost in response headers, in streams when asked, by request id, and the pre-call estimate. " +
        "Off hides all of them; a key set to “shown” or “hidden” (Tenants & keys → Edit key) overrides this. " +
        "A caller's cost cap still applies either way."),
      el("p", { id: "st-cost-state", class: "small", role: "status" })));
  section.querySelector("#st-cost").addEventListener("change", (ev) => save(ev.currentTarget.checked));
}

export async function show(c) {
  ctx = c;
  root.querySelector("#st-readonly").hidden = !ctx.readOnly;
  root.querySelector("#st-cost").disabled = ctx.readOnly;
  await load();
}

function render(s) {
  root.querySelector("#st-cost").checked = s.cost_disclosure;
  root.querySelector("#st-cost-state").textContent = s.cost_disclosure
    ? "On: callers see costs, except keys set to hidden."
    : "Off: callers see no costs, except keys set to shown.";
}

// aria-busy is true while the page loads or saves (tests wait for it to settle).
async function load() {
  root.setAttribute("aria-busy", "true");
  notice(root.querySelector("#st-error"), "");
  try {
    const { data } = await call("GET", "/admin/settings");
    render(data);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#st-error"), errorText(e));
  } finally {
    root.setAttribute("aria-busy", "false");
  }
}

async function save(on) {
  root.setAttribute("aria-busy", "true");
  notice(root.querySelector("#st-error"), "");
  try {
    const { data } = await call("PUT", "/admin/settings", { cost_disclosure: on });
    render(data);
  } catch (e) {
    notice(root.querySelector("#st-error"), errorText(e));
    root.querySelector("#st-cost").checked = !on; // nothing changed
  } finally {
    root.setAttribute("aria-busy", "false");
  }
}
