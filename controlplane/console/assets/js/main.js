// Console entry point: sign-in, role, and the Pricing page.
import { call, getToken, setToken, clearToken, ApiError } from "./api.js";
import { initPricing, showPricing } from "./pricing.js";
import { initCatalogs } from "./catalogs.js";

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
  $("pricing-view").hidden = true;
  $("catalogs-view").hidden = true;
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
  await showPricing({ readOnly: state.role !== "admin", onUnauthorized: signOutExpired });
  initCatalogs({ readOnly: state.role !== "admin" });
  if (!document.activeElement || document.activeElement === document.body) $("main").focus();
}

function signOutExpired() {
  clearToken();
  showSignIn("The token is no longer accepted. Sign in again.");
}

async function start() {
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
