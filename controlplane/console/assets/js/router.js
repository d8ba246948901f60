// Hash routing between pages (#overview, #spend, …): builds the navigation from PAGES, shows one page at
// a time, loads a module page on its first visit and calls its show() on every visit.
import { PAGES, DEFAULT_PAGE } from "./pages.js";
import { el } from "./ui.js";

const mounted = new Map(); // hash → module
let ctx = null;
let viewHooks = {};

/** Builds the navigation links once. */
export function buildNav() {
  const nav = document.getElementById("sections");
  nav.replaceChildren(...PAGES.map((p) => el("a", { href: `#${p.hash}` }, p.title)));
}

/** Starts routing for a signed-in token; hooks maps a view page's hash to its show function. */
export function startRouting(context, hooks) {
  ctx = context;
  viewHooks = hooks;
  if (!startRouting.listening) {
    startRouting.listening = true;
    window.addEventListener("hashchange", () => { if (ctx) route(); });
  }
  return route();
}

/** Stops routing (sign-out): hides every page. */
export function stopRouting() {
  ctx = null;
  for (const p of PAGES) {
    const s = document.getElementById(p.view || `${p.hash}-view`);
    if (s) s.hidden = true;
  }
}

function current() {
  const h = location.hash.replace(/^#/, "").split("?")[0];
  return PAGES.find((p) => p.hash === h) || PAGES.find((p) => p.hash === DEFAULT_PAGE);
}

async function route() {
  const page = current();
  for (const p of PAGES) {
    const s = document.getElementById(p.view || `${p.hash}-view`);
    if (s) s.hidden = p !== page;
  }
  for (const a of document.querySelectorAll("#sections a")) {
    if (a.getAttribute("href") === `#${page.hash}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `${page.title} · Tollgate console`;
  if (page.view) {
    await viewHooks[page.hash]?.();
    return;
  }
  let mod = mounted.get(page.hash);
  if (!mod) {
    mod = await import(page.module);
    const section = el("section", { id: `${page.hash}-view`, "aria-labelledby": `${page.hash}-title` });
    document.getElementById("main").append(section);
    mod.mount(section, ctx);
    mounted.set(page.hash, mod);
  }
  await mod.show(ctx);
}
