// Console entry point: sign-in, role, the snapshot banner and the page router (pages.js lists the pages).
import { call, getToken, setToken, clearToken, ApiError } from "./api.js";
import { initPricing, showPricing } from "./pricing.js";
import { initCatalogs, showCatalogs } from "./catalogs.js";
import { buildNav, startRouting, stopRouting } from "./router.js";

const $ = (id) => document.getElementById(id);

const state = { role: "", name: "" };

/**
 * Finds out who the token is: GET /admin/whoami answers {role, name}. Against an older control plane
 * without it, the token is checked with a read and treated as admin; the first 403 on a change then
 * switches the page to read-only (pricing.js).
 */
async function detectRole(token) {
  try {
    const { data } = await call("GET", "/admin/whoami", undefined, { token });
    if (data && data.role) return { role: String(data.role), name: String(data.name ?? "") };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
  }
  await call("GET", "/admin/price-rules?limit=1", undefined, { token });
  return { role: "admin", name: "" };
}

function showSignIn(message) {
  $("loading").hidden = true;
  stopRouting();
  $("sections").hidden = true;
  $("identity").hidden = true;
  $("sign-out").hidden = true;
  $("signin-view").hidden = false;
  const err = $("signin-error");
  err.textContent = message || "";
  err.hidden = !message;
  $("signin-token").setAttribute("aria-invalid", message ? "true" : "false");
  $("signin-token").focus();
}

async function enter(token) {
  const who = await detectRole(token);
  setToken(token);
  state.role = who.role;
  state.name = who.name;
  document.body.classList.toggle("readonly", state.role !== "admin");
  const ident = $("identity");
  ident.textContent = (who.name ? `${who.name} · ` : "") + (state.role === "admin" ? "admin" : "viewer (read-only)");
  ident.hidden = false;
  $("sign-out").hidden = false;
  $("signin-view").hidden = true;
  $("loading").hidden = true;
  $("sections").hidden = false;
  watchSnapshot();
  const readOnly = state.role !== "admin";
  initCatalogs({ readOnly });
  await startRouting({ readOnly, role: state.role, name: state.name, onUnauthorized: signOutExpired }, {
    pricing: () => showPricing({ readOnly, onUnauthorized: signOutExpired }),
    catalogs: () => showCatalogs(),
  });
  if (!document.activeElement || document.activeElement === document.body) $("main").focus();
}

const SNAPSHOT_CHECK_MS = 15000;
let snapshotTimer = 0;

/**
 * Shows a banner while the control plane's configuration does not compile (GET /admin/snapshot-status):
 * admin changes then do not reach the data planes until the named rows are fixed. Built with DOM text
 * nodes only (row names are operator input). An older control plane without the endpoint shows nothing.
 */
async function checkSnapshot() {
  const banner = $("snapshot-banner");
  let st;
  try {
    ({ data: st } = await call("GET", "/admin/snapshot-status"));
  } catch (e) {
    return; // unreachable, signed out or an older control plane: the page reports those itself
  }
  if (!st || !st.failing || !st.rejected) {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  const r = st.rejected;
  const head = document.createElement("strong");
  head.textContent = `Configuration changes are not reaching the data planes: revision ${r.version} does not ` +
    `${r.stage === "build" ? "build" : "compile"}. Data planes keep serving version ${st.published_version}. Fix:`;
  const list = document.createElement("ul");
  const problems = Array.isArray(r.problems) && r.problems.length ? r.problems : [{ message: r.error }];
  for (const p of problems) {
    const li = document.createElement("li");
    const what = p.resource ? `${p.resource} ${p.id}${p.name ? ` “${p.name}”` : ""}` : "";
    li.textContent = [what, p.field, p.message].filter(Boolean).join(" — ");
    list.append(li);
  }
  banner.replaceChildren(head, list);
  banner.hidden = false;
}

function watchSnapshot() {
  clearInterval(snapshotTimer);
  checkSnapshot();
  snapshotTimer = setInterval(checkSnapshot, SNAPSHOT_CHECK_MS);
}

function signOutExpired() {
  clearToken();
  showSignIn("The token is no longer accepted. Sign in again.");
}

async function start() {
  buildNav();
  initPricing();
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = $("signin-token").value.trim();
    if (!token) { showSignIn("Enter a token."); return; }
    const btn = ev.submitter || $("signin-form").querySelector("button[type=submit]");
    btn.disabled = true;
    try {
      await enter(token);
      $("signin-token").value = "";
    } catch (e) {
      showSignIn(e instanceof ApiError && e.status === 401 ? "That token was not accepted." : e.message);
    } finally {
      btn.disabled = false;
    }
  });
  $("sign-out").addEventListener("click", () => {
    clearToken();
    clearInterval(snapshotTimer);
    $("snapshot-banner").hidden = true;
    location.hash = "";
    showSignIn("");
  });
  const token = getToken();
  if (!token) { showSignIn(""); return; }
  try {
    await enter(token);
  } catch (e) {
    clearToken();
    showSignIn(e instanceof ApiError && e.status === 401 ? "The saved token is no longer accepted. Sign in again." : e.message);
  }
}

start();
