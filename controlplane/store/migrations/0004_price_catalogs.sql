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

-- Price history (issue 19, item 3, first part): every version of every price rule with the time range
-- it was in force and who changed it. Written by statement-level triggers, so every writer (admin API,
-- import, catalog apply, SQL by hand) is covered and bulk writes stay bulk. The writer names itself with
-- set_config('tollgate.actor', …, true); otherwise the database role is recorded. Rows of deleted rules
-- stay (their last version is closed). A rule's content that did not change (an import re-writing the
-- same values) makes no new version.
CREATE TABLE price_rule_versions (
    price_rule_id bigint      NOT NULL,
    version       integer     NOT NULL,
    rule          jsonb       NOT NULL,
    valid_from    timestamptz NOT NULL,
    valid_to      timestamptz,
    changed_by    text        NOT NULL,
    PRIMARY KEY (price_rule_id, version)
);

CREATE FUNCTION price_rule_version_json(r price_rules) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('id', r.id, 'provider_id', r.provider_id, 'match_type', r.match_type,
        'model_match', r.model_match, 'input_price', r.input_price::text, 'output_price', r.output_price::text,
        'cache_read_price', r.cache_read_price::text, 'cache_creation_5m_price', r.cache_creation_5m_price::text,
        'cache_creation_30m_price', r.cache_creation_30m_price::text,
        'cache_creation_1h_price', r.cache_creation_1h_price::text,
        'image_output_price', r.image_output_price::text, 'enabled', r.enabled,
        'pricing_tiers_json', r.pricing_tiers_json)
$$;

CREATE FUNCTION price_rule_versions_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor text := coalesce(nullif(current_setting('tollgate.actor', true), ''), 'db:' || current_user);
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO price_rule_versions (price_rule_id, version, rule, valid_from, changed_by)
        SELECT n.id, coalesce((SELECT max(v.version) FROM price_rule_versions v WHERE v.price_rule_id = n.id), 0) + 1,
               price_rule_version_json(n), now(), actor
          FROM new_rows n;
    ELSIF TG_OP = 'UPDATE' THEN
        WITH changed AS (
            SELECT n.id FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id
             WHERE o.id IS NULL OR price_rule_version_json(n) IS DISTINCT FROM price_rule_version_json(o)
        ), closed AS (
            UPDATE price_rule_versions v SET valid_to = now()
              FROM changed c WHERE v.price_rule_id = c.id AND v.valid_to IS NULL
        )
        INSERT INTO price_rule_versions (price_rule_id, version, rule, valid_from, changed_by)
        SELECT n.id, coalesce((SELECT max(v.version) FROM price_rule_versions v WHERE v.price_rule_id = n.id), 0) + 1,
               price_rule_version_json(n), now(), actor
          FROM new_rows n JOIN changed c ON c.id = n.id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE price_rule_versions v SET valid_to = now()
          FROM old_rows o WHERE v.price_rule_id = o.id AND v.valid_to IS NULL;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER price_rule_versions_insert AFTER INSERT ON price_rules REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION price_rule_versions_record();
CREATE TRIGGER price_rule_versions_update AFTER UPDATE ON price_rules REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION price_rule_versions_record();
CREATE TRIGGER price_rule_versions_delete AFTER DELETE ON price_rules REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION price_rule_versions_record();

INSERT INTO price_rule_versions (price_rule_id, version, rule, valid_from, changed_by)
SELECT r.id, 1, price_rule_version_json(r), r.updated_at, 'migration 0004' FROM price_rules r;
