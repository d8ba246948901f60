-- Scheduled price changes (issue 19, item 3, last part; docs/pricing.md "Scheduled price changes"): a
-- version of a price rule that takes effect at a future instant. Snapshots carry it ahead of time, so every
-- data plane switches at that instant; at the instant the control plane writes it to price_rules with
-- tollgate.effective_at set, so the history's time ranges meet exactly at effective_at.
--
-- At most one scheduled version per rule. Its history version is reserved when it is scheduled (the
-- rule's last version + 1), and the rule cannot change otherwise while it is pending (the guard below), so
-- the version the data planes record on usage rows is the version the history gets. Applying or cancelling
-- deletes the row; deleting the rule deletes it too.
CREATE TABLE price_rule_schedule (
    id            bigserial PRIMARY KEY,
    price_rule_id bigint      NOT NULL UNIQUE REFERENCES price_rules (id) ON DELETE CASCADE,
    version       integer     NOT NULL CHECK (version > 0),
    effective_at  timestamptz NOT NULL,
    -- The rule's whole content from effective_at on, in price_rule_version_json's shape.
    rule          jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    created_by    text        NOT NULL
);
CREATE INDEX price_rule_schedule_effective_at ON price_rule_schedule (effective_at);

-- A scheduled version is configuration: snapshots carry it.
CREATE TRIGGER price_rule_schedule_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON price_rule_schedule
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();

-- A rule with a pending scheduled version does not change in any other way (a write of the same content
-- passes: an import of an export). The control plane's apply sets tollgate.effective_at.
CREATE FUNCTION price_rules_schedule_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('tollgate.effective_at', true), '') = ''
       AND price_rule_version_json(NEW) IS DISTINCT FROM price_rule_version_json(OLD)
       AND EXISTS (SELECT 1 FROM price_rule_schedule s WHERE s.price_rule_id = OLD.id) THEN
        RAISE EXCEPTION 'price rule % has a scheduled change pending', OLD.id
            USING ERRCODE = '55000', CONSTRAINT = 'price_rule_schedule_pending',
                  DETAIL = format('price rule %s has a scheduled change pending; cancel it first', OLD.id);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER price_rules_schedule_guard BEFORE UPDATE ON price_rules
    FOR EACH ROW EXECUTE FUNCTION price_rules_schedule_guard();

-- The history trigger of 0004, with the versions' boundary at tollgate.effective_at when it is set (a
-- scheduled version applied, possibly late after a control-plane outage), else at now().
CREATE OR REPLACE FUNCTION price_rule_versions_record() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor text := coalesce(nullif(current_setting('tollgate.actor', true), ''), 'db:' || current_user);
    at timestamptz := coalesce(nullif(current_setting('tollgate.effective_at', true), '')::timestamptz, now());
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO price_rule_versions (price_rule_id, version, rule, valid_from, changed_by)
        SELECT n.id, coalesce((SELECT max(v.version) FROM price_rule_versions v WHERE v.price_rule_id = n.id), 0) + 1,
               price_rule_version_json(n), at, actor
          FROM new_rows n;
    ELSIF TG_OP = 'UPDATE' THEN
        WITH changed AS (
            SELECT n.id FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id
             WHERE o.id IS NULL OR price_rule_version_json(n) IS DISTINCT FROM price_rule_version_json(o)
        ), closed AS (
            UPDATE price_rule_versions v SET valid_to = at
              FROM changed c WHERE v.price_rule_id = c.id AND v.valid_to IS NULL
        )
        INSERT INTO price_rule_versions (price_rule_id, version, rule, valid_from, changed_by)
        SELECT n.id, coalesce((SELECT max(v.version) FROM price_rule_versions v WHERE v.price_rule_id = n.id), 0) + 1,
               price_rule_version_json(n), at, actor
          FROM new_rows n JOIN changed c ON c.id = n.id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE price_rule_versions v SET valid_to = at
          FROM old_rows o WHERE v.price_rule_id = o.id AND v.valid_to IS NULL;
    END IF;
    RETURN NULL;
END
$$;
