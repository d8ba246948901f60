// The console's pages, in navigation order: adding a page is one module under pages/ and one line here.
// A module page exports mount(section, ctx) (build its DOM once) and show(ctx) (each visit); "view" pages
// are sections of index.html driven by their own modules (Pricing, Catalogs).
export const PAGES = [
  { hash: "overview", title: "Overview", module: "./pages/overview.js" },
  { hash: "spend", title: "Spend", module: "./pages/spend.js" },
  { hash: "usage", title: "Usage", module: "./pages/usage.js" },
  { hash: "batches", title: "Batches", module: "./pages/batches.js" },
  { hash: "pricing", title: "Pricing", view: "pricing-view" },
  { hash: "catalogs", title: "Catalogs", view: "catalogs-view" },
  { hash: "providers", title: "Providers", module: "./pages/providers.js" },
  { hash: "routes", title: "Routes", module: "./pages/routes.js" },
  { hash: "tenants", title: "Tenants & keys", module: "./pages/tenants.js" },
  { hash: "budgets", title: "Budgets", module: "./pages/budgets.js" },
  { hash: "reconciliation", title: "Reconciliation", module: "./pages/reconciliation.js" },
  { hash: "tokens", title: "Admin tokens", module: "./pages/tokens.js" },
  { hash: "settings", title: "Settings", module: "./pages/settings.js" },
  { hash: "audit", title: "Audit log", module: "./pages/audit.js" },
];

export const DEFAULT_PAGE = "overview";
