-- Price catalog imports (issue 19): stored plans, and the provenance of every imported price rule.

-- A plan made by POST /admin/price-catalogs/plan: what applying it would add and change. It is
-- applied at most once, in one transaction, and only if the rules it changes are still as planned.
CREATE TABLE price_catalog_plans (
    id         text PRIMARY KEY,
    format     text        NOT NULL CHECK (format IN ('genai-prices', 'models.dev')),
    digest     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL,
    plan       jsonb       NOT NULL,
    applied_at timestamptz,
    applied_by text
);

-- Where an imported rule came from. fingerprint is the digest of the rule's prices, match and
-- tiers as imported: a rule whose current content no longer has it was edited by an operator.
CREATE TABLE price_rule_provenance (
    price_rule_id bigint PRIMARY KEY REFERENCES price_rules (id) ON DELETE CASCADE,
    catalog       text        NOT NULL,
    file_digest   text        NOT NULL,
    entry_id      text        NOT NULL,
    imported_at   timestamptz NOT NULL,
    imported_by   text        NOT NULL,
    plan_id       text        NOT NULL,
    fingerprint   text        NOT NULL
);
