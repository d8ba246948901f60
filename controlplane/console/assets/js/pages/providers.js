// Providers: created and edited in a dialog whose settings follow the channel type (the cloud channels'
// typed settings, docs/providers.md); each provider's credentials (secrets are write-only: sent once, never
// shown; a cloud auth mode with several parts is entered part by part and sent as one JSON secret) and its
// routing table as a grid of (operation, kind) cells with edit, delete and reset to the channel's defaults.
import { call, listAll, ApiError } from "../api.js";
import { int } from "../wire.js";
import { el, field, fieldError, clearErrors, showApiErrors, notice, when, table, errorText } from "../ui.js";

const IMPLS = ["passthrough", "transform_to", "local", "unsupported"];
const CHANNELS = [["alpha", "alpha"], ["beta", "beta"], ["gamma", "gamma"], ["custom", "custom (alpha-compatible)"], ["router", "router (alpha-compatible)"],
  ["aws_bedrock", "AWS Bedrock"], ["gcp_vertex", "Google Vertex AI"], ["azure_openai", "Azure OpenAI"]];
const CLOUDS = ["aws_bedrock", "gcp_vertex", "azure_openai"];
// The settings fields of each cloud: input id → settings member; list members are comma-separated.
const SETTINGS = {
  aws_bedrock: { "pv-s-region": "region", "pv-s-bedrock-auth": "auth", "pv-s-invoke-prefixes": "invoke_model_prefixes[]" },
  gcp_vertex: { "pv-s-project": "project", "pv-s-location": "location", "pv-s-anthropic-prefixes": "anthropic_model_prefixes[]" },
  azure_openai: { "pv-s-url-form": "url_form", "pv-s-api-version": "api_version", "pv-s-azure-auth": "auth",
    "pv-s-entra-scope": "entra_scope", "pv-s-entra-token-url": "entra_token_url" },
};
let root, ctx, providers = [], current = null, rules = [], editing = null, cellDialog, providerDialog, editingProvider = null;

const text = (attrs = {}) => el("input", { type: "text", autocomplete: "off", spellcheck: "false", ...attrs });
const secretInput = () => el("input", { type: "password", autocomplete: "off", spellcheck: "false" });
const select = (options) => { const s = el("select", {}); for (const [v, l] of options) s.append(el("option", { value: v }, l)); return s; };

export function mount(section, c) {
  root = section;
  ctx = c;
  cellDialog = el("dialog", { id: "pv-cell", "aria-labelledby": "pv-cell-title" },
    el("form", { id: "pv-cell-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "pv-cell-title" }, "Routing cell")),
      el("div", { class: "dialog-body" },
        el("p", { id: "pv-cell-errors", class: "notice notice-error", role: "alert", hidden: true }),
        el("div", { class: "grid" },
          field("pv-impl", "Implementation", (() => { const s = el("select", {}); for (const i of IMPLS) s.append(el("option", { value: i }, i)); return s; })()),
          field("pv-dest-op", "Destination operation", el("input", { type: "text", autocomplete: "off", spellcheck: "false" }), { hint: "transform_to only; empty: the same operation" }),
          field("pv-dest-kind", "Destination kind", el("input", { type: "text", autocomplete: "off", spellcheck: "false" }), { hint: "transform_to only" })),
        el("div", { class: "field-check" }, el("input", { type: "checkbox", id: "pv-enabled" }), el("label", { for: "pv-enabled" }, "Enabled"))),
      el("div", { class: "dialog-actions" },
        el("button", { type: "button", class: "btn btn-danger-quiet", id: "pv-cell-delete", "data-mutates": true }, "Delete cell"),
        el("span", { class: "spacer" }),
        el("button", { type: "button", class: "btn", id: "pv-cell-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "pv-cell-save", "data-mutates": true }, "Save"))));
  providerDialog = el("dialog", { id: "pv-dialog", "aria-labelledby": "pv-dialog-title" },
    el("form", { id: "pv-form", novalidate: true },
      el("div", { class: "dialog-head" }, el("h2", { id: "pv-dialog-title" }, "Provider")),
      el("div", { class: "dialog-body" },
        el("p", { id: "pv-form-errors", class: "notice notice-error", role: "alert", hidden: true }),
        el("div", { class: "grid grid-wide" },
          field("pv-name", "Name", text({ required: true }), { hint: "Clients may address its models as name/model; no '/'." }),
          field("pv-channel", "Channel type", select(CHANNELS)),
          field("pv-base-url", "Base URL", el("input", { type: "url", autocomplete: "off", spellcheck: "false" }), { hint: "Required: the provider's API root.", wide: true })),
        el("div", { class: "field-check" }, el("input", { type: "checkbox", id: "pv-p-enabled" }), el("label", { for: "pv-p-enabled" }, "Enabled")),
        el("fieldset", { id: "pv-set-aws_bedrock", "data-settings": "aws_bedrock", hidden: true }, el("legend", {}, "AWS Bedrock"),
          el("div", { class: "grid grid-wide" },
            field("pv-s-region", "Region", text({ placeholder: "us-east-1" }), { hint: "Required. The SigV4 scope and the endpoint bedrock-runtime.{region}.amazonaws.com." }),
            field("pv-s-bedrock-auth", "Authentication", select([["sigv4", "Access key (SigV4)"], ["api_key", "Bedrock API key (bearer)"]])),
            field("pv-s-invoke-prefixes", "InvokeModel models (prefixes)", text({ placeholder: "anthropic." }), { hint: "Comma-separated; empty: anthropic. Other models use Converse.", wide: true }))),
        el("fieldset", { id: "pv-set-gcp_vertex", "data-settings": "gcp_vertex", hidden: true }, el("legend", {}, "Google Vertex AI"),
          el("div", { class: "grid grid-wide" },
            field("pv-s-project", "Project id", text({ placeholder: "my-project" }), { hint: "Required." }),
            field("pv-s-location", "Location", text({ placeholder: "us-east5" }), { hint: "Required: a region, or global." }),
            field("pv-s-anthropic-prefixes", "Anthropic models (prefixes)", text({ placeholder: "claude-" }), { hint: "Comma-separated; empty: claude-. Other models are Gemini (publisher google).", wide: true }))),
        el("fieldset", { id: "pv-set-azure_openai", "data-settings": "azure_openai", hidden: true }, el("legend", {}, "Azure OpenAI"),
          el("div", { class: "grid grid-wide" },
            field("pv-s-url-form", "URL form", select([["deployment", "/openai/deployments/{deployment}/… (api-version)"], ["v1", "/openai/v1/…"]])),
            field("pv-s-api-version", "API version", text({ placeholder: "2024-10-21" }), { hint: "Required by the deployment form; none with v1." }),
            field("pv-s-azure-auth", "Authentication", select([["api_key", "api-key header"], ["entra_client_credentials", "Entra ID app (client credentials)"], ["entra_token", "Entra ID access token (static)"]])),
            field("pv-s-entra-scope", "Entra scope", text({ placeholder: "default" }), { hint: "Client credentials only; empty: Azure OpenAI's (cognitiveservices.azure.com/.default)." }),
            field("pv-s-entra-token-url", "Entra token URL", text({ placeholder: "derived from the tenant" }), { hint: "Client credentials only; empty: login.microsoftonline.com/{tenant}/oauth2/v2.0/token.", wide: true }))),
        el("div", { id: "pv-set-json", "data-settings": "json" },
          field("pv-s-json", "Settings (JSON object)", el("textarea", { rows: 3, spellcheck: "false" }), { wide: true }))),
      el("div", { class: "dialog-actions" },
        el("span", { class: "spacer" }),
        el("button", { type: "button", class: "btn", id: "pv-cancel" }, "Cancel"),
        el("button", { type: "submit", class: "btn btn-primary", id: "pv-save" }, "Save provider"))));
  section.append(
    el("div", { class: "page-head" }, el("h1", { id: "providers-title" }, "Providers"),
      el("div", { class: "page-actions" },
        el("button", { type: "button", class: "btn", id: "pv-edit", "data-mutates": true }, "Edit provider"),
        el("button", { type: "button", class: "btn btn-primary", id: "pv-new", "data-mutates": true }, "New provider"))),
    el("p", { id: "pv-readonly", class: "notice", role: "status", hidden: true }, "Read-only: this token has the viewer role."),
    el("div", { class: "filters" }, field("pv-provider", "Provider", el("select", {}))),
    el("p", { id: "pv-error", class: "notice notice-error", role: "alert", hidden: true }),
    el("p", { id: "pv-cloud-note", class: "notice", role: "status", hidden: true },
      "Data planes of this build do not send requests to cloud providers yet: a route member on this provider is skipped and its route's other members serve the request (a route with no other member answers that the operation is unsupported). Its model list and get are served. See docs/providers.md, \"What a data plane of this build does with a cloud provider\"."),
    el("section", { class: "panel", "aria-labelledby": "pv-info-title" }, el("h2", { id: "pv-info-title" }, "Provider"), el("dl", { id: "pv-info", class: "detail" })),
    el("section", { class: "panel", "aria-labelledby": "pv-creds-title" },
      el("h2", { id: "pv-creds-title" }, "Credentials"),
      el("p", { class: "muted small" }, "Secrets are stored sealed and never shown again, here or in the API. To replace one, add the new credential, then delete the old."),
      el("div", { id: "pv-creds" }),
      el("form", { id: "pv-cred-form", class: "inline-form", "aria-label": "Add a credential", novalidate: true },
        el("div", { "data-cred": "key", class: "cred-parts" }, field("pv-secret", "New secret (API key)", secretInput())),
        el("div", { "data-cred": "sigv4", class: "cred-parts", hidden: true },
          field("pv-c-akid", "Access key id", text()), field("pv-c-sak", "Secret access key", secretInput()),
          field("pv-c-st", "Session token (optional)", secretInput())),
        el("div", { "data-cred": "service_account", class: "cred-parts", hidden: true },
          field("pv-c-sa", "Service-account JSON key", el("textarea", { rows: 4, spellcheck: "false", autocomplete: "off" }), { hint: "The key file Google Cloud downloads for the service account.", wide: true })),
        el("div", { "data-cred": "entra_client_credentials", class: "cred-parts", hidden: true },
          field("pv-c-tenant", "Tenant id", text()), field("pv-c-client", "Client id", text()), field("pv-c-csecret", "Client secret", secretInput())),
        field("pv-weight", "Weight", el("input", { type: "text", inputmode: "numeric", value: "1", autocomplete: "off" })),
        el("div", { class: "form-actions" }, el("button", { type: "submit", class: "btn btn-primary" }, "Add credential")))),
    el("section", { class: "panel", "aria-labelledby": "pv-grid-title" },
      el("div", { class: "page-head" }, el("h2", { id: "pv-grid-title" }, "Routing table"),
        el("button", { type: "button", class: "btn", id: "pv-reset", "data-mutates": true }, "Reset to channel defaults")),
      el("p", { class: "muted small" }, "One cell per (operation, request kind): how this provider serves it. A missing cell means unsupported."),
      el("div", { id: "pv-grid" })),
    cellDialog, providerDialog);
  section.querySelector("#pv-provider").addEventListener("change", () => choose(section.querySelector("#pv-provider").value));
  section.querySelector("#pv-new").addEventListener("click", (ev) => openProvider(null, ev.currentTarget));
  section.querySelector("#pv-edit").addEventListener("click", (ev) => openProvider(current, ev.currentTarget));
  section.querySelector("#pv-channel").addEventListener("change", showSettings);
  section.querySelector("#pv-s-azure-auth").addEventListener("change", showSettings);
  section.querySelector("#pv-s-url-form").addEventListener("change", showSettings);
  section.querySelector("#pv-form").addEventListener("submit", (ev) => { ev.preventDefault(); saveProvider(); });
  section.querySelector("#pv-cancel").addEventListener("click", () => providerDialog.close());
  providerDialog.addEventListener("close", () => editingProvider?.from?.focus());
  section.querySelector("#pv-cred-form").addEventListener("submit", (ev) => { ev.preventDefault(); addCredential(); });
  section.querySelector("#pv-reset").addEventListener("click", reset);
  section.querySelector("#pv-cell-form").addEventListener("submit", (ev) => { ev.preventDefault(); saveCell(); });
  section.querySelector("#pv-cell-cancel").addEventListener("click", () => cellDialog.close());
  section.querySelector("#pv-cell-delete").addEventListener("click", deleteCell);
  cellDialog.addEventListener("close", () => editing?.from?.focus());
}

export async function show(c) {
  ctx = c;
  root.querySelector("#pv-readonly").hidden = !ctx.readOnly;
  root.querySelector("#pv-cred-form").hidden = ctx.readOnly;
  for (const b of root.querySelectorAll("[data-mutates]")) b.hidden = ctx.readOnly;
  try {
    providers = await listAll("/admin/providers?limit=500");
    const sel = root.querySelector("#pv-provider");
    const keep = current ? current.id : (providers[0]?.id ?? "");
    sel.replaceChildren(...providers.map((p) => el("option", { value: p.id, selected: p.id === keep }, `${p.name} (${p.channel_type}, id ${p.id})`)));
    if (providers.length) await choose(keep);
    else notice(root.querySelector("#pv-error"), "No providers yet: create one with New provider.");
    root.querySelector("#pv-edit").hidden = ctx.readOnly || !providers.length;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) notice(root.querySelector("#pv-error"), errorText(e));
  }
}

async function choose(id) {
  notice(root.querySelector("#pv-error"), "");
  const [{ data: p }, { data: r }] = await Promise.all([call("GET", `/admin/providers/${id}`), call("GET", `/admin/providers/${id}/routing-rules`)]);
  current = p;
  rules = r.items || [];
  root.querySelector("#pv-cloud-note").hidden = !CLOUDS.includes(p.channel_type);
  const settings = p.settings && Object.keys(p.settings).length ? JSON.stringify(p.settings) : "—";
  root.querySelector("#pv-info").replaceChildren(...[["Name", p.name], ["Channel type", p.channel_type], ["Base URL", p.base_url],
    ["Enabled", p.enabled ? "yes" : "no"], ["Settings", settings]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  showCredentialForm();
  renderCredentials();
  renderGrid();
}

function renderCredentials() {
  const creds = current.credentials || [];
  root.querySelector("#pv-creds").replaceChildren(creds.length ? table("Credentials", ["Id", { label: "Weight", num: true }, "Enabled", "Added (UTC)", "Secret", { label: "" }],
    creds.map((c) => el("tr", {},
      el("td", { "data-label": "Id" }, c.id), el("td", { class: "num", "data-label": "Weight" }, c.weight),
      el("td", { "data-label": "Enabled" }, c.enabled ? "yes" : "no"), el("td", { "data-label": "Added" }, when(c.created_at, { utc: true })),
      el("td", { "data-label": "Secret", class: "muted" }, "•••• (write-only)"),
      el("td", { class: "actions" }, ctx.readOnly ? "" : el("button", { type: "button", class: "btn btn-small btn-danger-quiet",
        "aria-label": `Delete credential ${c.id}`, onclick: () => deleteCredential(c) }, "Delete")))),
    { cls: "data cards-narrow" }) : el("p", { class: "muted" }, "No credentials: requests to this provider fail until one is added."));
}

// credMode is the credential shape the current provider's auth mode takes.
function credMode() {
  const ch = current?.channel_type, st = current?.settings || {};
  if (ch === "aws_bedrock" && (st.auth ?? "sigv4") === "sigv4") return "sigv4";
  if (ch === "gcp_vertex") return "service_account";
  if (ch === "azure_openai" && st.auth === "entra_client_credentials") return "entra_client_credentials";
  return "key";
}

const KEY_LABELS = { aws_bedrock: "New Bedrock API key", azure_openai: "New api-key" };

function showCredentialForm() {
  const mode = credMode();
  for (const d of root.querySelectorAll("#pv-cred-form [data-cred]")) d.hidden = d.dataset.cred !== mode;
  let label = KEY_LABELS[current?.channel_type] || "New secret (API key)";
  if (current?.channel_type === "azure_openai" && current.settings?.auth === "entra_token") label = "New Entra ID access token";
  root.querySelector('label[for="pv-secret"]').textContent = label;
}

async function addCredential() {
  const form = root.querySelector("#pv-cred-form");
  clearErrors(form);
  const v = (id) => root.querySelector(`#${id}`).value;
  const weight = v("pv-weight").trim();
  const mode = credMode();
  let bad = null;
  const fail = (id, msg) => { fieldError(id, msg); bad = bad || id; };
  let secret, secretField;
  if (mode === "sigv4") {
    secretField = "pv-c-akid";
    if (!v("pv-c-akid").trim()) fail("pv-c-akid", "The access key id (AKIA… or ASIA…).");
    if (!v("pv-c-sak")) fail("pv-c-sak", "The secret access key.");
    secret = JSON.stringify({ access_key_id: v("pv-c-akid").trim(), secret_access_key: v("pv-c-sak"), ...(v("pv-c-st") ? { session_token: v("pv-c-st") } : {}) });
  } else if (mode === "service_account") {
    secretField = "pv-c-sa";
    if (!v("pv-c-sa").trim()) fail("pv-c-sa", "Paste the service account's JSON key.");
    secret = v("pv-c-sa").trim();
  } else if (mode === "entra_client_credentials") {
    secretField = "pv-c-tenant";
    if (!v("pv-c-tenant").trim()) fail("pv-c-tenant", "The directory (tenant) id.");
    if (!v("pv-c-client").trim()) fail("pv-c-client", "The application (client) id.");
    if (!v("pv-c-csecret")) fail("pv-c-csecret", "The client secret.");
    secret = JSON.stringify({ tenant_id: v("pv-c-tenant").trim(), client_id: v("pv-c-client").trim(), client_secret: v("pv-c-csecret") });
  } else {
    secretField = "pv-secret";
    secret = v("pv-secret");
    if (!secret) fail("pv-secret", "Paste the provider's API key.");
  }
  if (!/^[1-9]\d{0,8}$/.test(weight)) fail("pv-weight", "A whole number of at least 1.");
  if (bad) { root.querySelector(`#${bad}`).focus(); return; }
  try {
    await call("POST", `/admin/providers/${current.id}/credentials`, { secret, weight: int(weight) });
    for (const id of ["pv-secret", "pv-c-akid", "pv-c-sak", "pv-c-st", "pv-c-sa", "pv-c-tenant", "pv-c-client", "pv-c-csecret"]) root.querySelector(`#${id}`).value = "";
    await choose(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), showApiErrors(e, { secret: secretField, weight: "pv-weight" }).join(" "));
  }
}

// showSettings shows the settings fields of the chosen channel type (a JSON object for the others).
function showSettings() {
  const ch = root.querySelector("#pv-channel").value;
  for (const f of providerDialog.querySelectorAll("[data-settings]")) f.hidden = f.dataset.settings !== (CLOUDS.includes(ch) ? ch : "json");
  const cc = root.querySelector("#pv-s-azure-auth").value === "entra_client_credentials";
  root.querySelector("#pv-s-api-version").closest(".field").hidden = root.querySelector("#pv-s-url-form").value === "v1";
  for (const id of ["pv-s-entra-scope", "pv-s-entra-token-url"]) root.querySelector(`#${id}`).closest(".field").hidden = !cc;
  root.querySelector("#pv-base-url-hint").textContent = {
    aws_bedrock: "Empty: the region's Bedrock runtime endpoint.",
    gcp_vertex: "Empty: the location's Vertex AI endpoint.",
    azure_openai: "Required: the resource endpoint, {resource}.openai.azure.com (https).",
  }[ch] || "Required: the provider's API root (an absolute http(s) URL).";
}

function openProvider(p, from) {
  editingProvider = { provider: p, from };
  clearErrors(providerDialog);
  notice(root.querySelector("#pv-form-errors"), "");
  root.querySelector("#pv-dialog-title").textContent = p ? `Provider ${p.name}` : "New provider";
  root.querySelector("#pv-name").value = p?.name ?? "";
  root.querySelector("#pv-channel").value = p?.channel_type ?? "alpha";
  root.querySelector("#pv-base-url").value = p?.base_url ?? "";
  root.querySelector("#pv-p-enabled").checked = p ? !!p.enabled : true;
  const st = p?.settings || {};
  for (const fields of Object.values(SETTINGS)) {
    for (const [id, member] of Object.entries(fields)) {
      const input = root.querySelector(`#${id}`);
      const list = member.endsWith("[]");
      const val = CLOUDS.includes(p?.channel_type) && SETTINGS[p.channel_type][id] ? st[list ? member.slice(0, -2) : member] : undefined;
      input.value = list ? (val || []).join(", ") : (val ?? (input.tagName === "SELECT" ? input.options[0].value : ""));
    }
  }
  root.querySelector("#pv-s-json").value = p && !CLOUDS.includes(p.channel_type) && Object.keys(st).length ? JSON.stringify(st) : "";
  showSettings();
  providerDialog.showModal();
  root.querySelector("#pv-name").focus();
}

async function saveProvider() {
  clearErrors(providerDialog);
  notice(root.querySelector("#pv-form-errors"), "");
  const v = (id) => root.querySelector(`#${id}`).value.trim();
  const ch = v("pv-channel");
  const fieldIDs = { name: "pv-name", channel_type: "pv-channel", base_url: "pv-base-url" };
  let settings = {};
  if (CLOUDS.includes(ch)) {
    for (const [id, member] of Object.entries(SETTINGS[ch])) {
      const val = v(id);
      if (root.querySelector(`#${id}`).closest(".field").hidden || !val) continue;
      if (member.endsWith("[]")) settings[member.slice(0, -2)] = val.split(",").map((x) => x.trim()).filter(Boolean);
      else settings[member] = val;
    }
    for (const [id, member] of Object.entries(SETTINGS[ch])) fieldIDs[`settings.${member.replace("[]", "")}`] = id;
  } else if (v("pv-s-json")) {
    fieldIDs.settings = "pv-s-json";
    try { settings = JSON.parse(v("pv-s-json")); } catch { fieldError("pv-s-json", "Not JSON: write an object like {\"key\": \"value\"}."); root.querySelector("#pv-s-json").focus(); return; }
  }
  if (!v("pv-name")) { fieldError("pv-name", "A name, without '/'."); root.querySelector("#pv-name").focus(); return; }
  const body = { name: v("pv-name"), channel_type: ch, base_url: v("pv-base-url"), enabled: root.querySelector("#pv-p-enabled").checked, settings };
  try {
    const { data } = editingProvider.provider ? await call("PUT", `/admin/providers/${editingProvider.provider.id}`, body) : await call("POST", "/admin/providers", body);
    providerDialog.close();
    current = data;
    await show(ctx);
  } catch (e) {
    const rest = showApiErrors(e, fieldIDs).filter((m) => m);
    notice(root.querySelector("#pv-form-errors"), rest.join(" "));
  }
}

async function deleteCredential(c) {
  try {
    await call("DELETE", `/admin/credentials/${c.id}`);
    await choose(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), errorText(e));
  }
}

function renderGrid() {
  const ops = [...new Set(rules.map((r) => r.operation))].sort();
  const kinds = [...new Set(rules.map((r) => r.kind))].sort();
  const at = new Map(rules.map((r) => [`${r.operation}|${r.kind}`, r]));
  if (!rules.length) {
    root.querySelector("#pv-grid").replaceChildren(el("p", { class: "muted" }, "No cells. Reset restores the channel's defaults."));
    return;
  }
  const head = el("tr", {}, el("th", { scope: "col" }, "Operation \\ kind"), ...kinds.map((k) => el("th", { scope: "col" }, k)));
  const body = ops.map((op) => el("tr", {}, el("th", { scope: "row" }, op), ...kinds.map((k) => {
    const r = at.get(`${op}|${k}`);
    if (!r) return el("td", { class: "cell-empty", "data-label": k }, "—");
    const label = r.implementation === "transform_to" ? `→ ${r.dest_operation && r.dest_operation !== op ? r.dest_operation + " " : ""}${r.dest_kind ?? "?"}` : r.implementation;
    return el("td", { "data-label": k }, el("button", { type: "button", class: `cell cell-${r.implementation}${r.enabled ? "" : " cell-off"}`,
      "data-cell": `${op}|${k}`, "aria-label": `${op} with ${k}: ${r.implementation}${r.enabled ? "" : " (disabled)"}. Edit`,
      onclick: (ev) => openCell(r, ev.currentTarget) }, label, r.enabled ? "" : " (off)"));
  })));
  root.querySelector("#pv-grid").replaceChildren(el("div", { class: "table-wrap grid-wrap", tabindex: "0", role: "region", "aria-label": "Routing cells (scrolls sideways)" },
    el("table", { class: "data grid-table" }, el("caption", { class: "visually-hidden" }, "Routing cells"), el("thead", {}, head), el("tbody", {}, body))));
}

function openCell(r, from) {
  editing = { rule: r, from };
  clearErrors(cellDialog);
  notice(root.querySelector("#pv-cell-errors"), "");
  root.querySelector("#pv-cell-title").textContent = `${r.operation} · ${r.kind}`;
  root.querySelector("#pv-impl").value = r.implementation;
  root.querySelector("#pv-dest-op").value = r.dest_operation ?? "";
  root.querySelector("#pv-dest-kind").value = r.dest_kind ?? "";
  root.querySelector("#pv-enabled").checked = !!r.enabled;
  for (const id of ["pv-impl", "pv-dest-op", "pv-dest-kind", "pv-enabled"]) root.querySelector(`#${id}`).disabled = ctx.readOnly;
  cellDialog.showModal();
  root.querySelector("#pv-impl").focus();
}

async function saveCell() {
  const r = editing.rule;
  clearErrors(cellDialog);
  const impl = root.querySelector("#pv-impl").value;
  const destOp = root.querySelector("#pv-dest-op").value.trim();
  const destKind = root.querySelector("#pv-dest-kind").value.trim();
  if (impl === "transform_to" && !destKind) { fieldError("pv-dest-kind", "transform_to needs the kind to send upstream."); root.querySelector("#pv-dest-kind").focus(); return; }
  const rule = { id: int(r.id), provider_id: int(r.provider_id), operation: r.operation, kind: r.kind, implementation: impl,
    dest_operation: impl === "transform_to" && destOp ? destOp : null, dest_kind: impl === "transform_to" ? destKind : null,
    sort_order: int(r.sort_order), enabled: root.querySelector("#pv-enabled").checked };
  try {
    await call("PUT", `/admin/providers/${current.id}/routing-rules`, { rules: [rule] });
    cellDialog.close();
    await choose(current.id);
  } catch (e) {
    const rest = showApiErrors(e, { implementation: "pv-impl", dest_operation: "pv-dest-op", dest_kind: "pv-dest-kind" });
    notice(root.querySelector("#pv-cell-errors"), rest.join(" "));
  }
}

async function deleteCell() {
  const r = editing.rule;
  try {
    await call("DELETE", `/admin/providers/${current.id}/routing-rules/${encodeURIComponent(r.operation)}/${encodeURIComponent(r.kind)}`);
    cellDialog.close();
    await choose(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-cell-errors"), errorText(e));
  }
}

async function reset() {
  try {
    await call("POST", `/admin/providers/${current.id}/routing-rules/reset`);
    await choose(current.id);
  } catch (e) {
    notice(root.querySelector("#pv-error"), errorText(e));
  }
}
