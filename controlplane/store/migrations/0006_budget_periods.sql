-- Budgets (docs/budgets.md): a quota has a period (none, daily, weekly, monthly in an IANA time zone),
-- may belong to an API key (a fourth scope), and may carry per-minute rate limits for its scope. Spend of
-- a periodic quota is kept per period in quota_periods (closed periods stay queryable). Adjustments name
-- the period they correct and appear in the usage listing as rows of kind 'adjustment'.
ALTER TABLE quotas DROP CONSTRAINT quotas_scope_check;
ALTER TABLE quotas ADD CONSTRAINT quotas_scope_check CHECK (scope IN ('org', 'team', 'user', 'key'));
ALTER TABLE quotas
    ADD COLUMN period    text    NOT NULL DEFAULT 'none' CHECK (period IN ('none', 'daily', 'weekly', 'monthly')),
    ADD COLUMN time_zone text    NOT NULL DEFAULT 'UTC' CHECK (time_zone <> ''),
    ADD COLUMN rpm_limit integer NOT NULL DEFAULT 0 CHECK (rpm_limit >= 0),
    ADD COLUMN tpm_limit bigint  NOT NULL DEFAULT 0 CHECK (tpm_limit >= 0);

-- The data planes need every configured field of a quota; cost_used alone (settlement) still does not
-- bump the revision.
DROP TRIGGER quotas_bump_limit ON quotas;
CREATE TRIGGER quotas_bump_limit AFTER UPDATE OF cost_limit, period, time_zone, rpm_limit, tpm_limit ON quotas
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();

-- One row per (quota, period) of a periodic quota: the period's limit (as set during it), spend, number
-- of settled requests and net adjustments. Written by settlement under the quota row's lock.
CREATE TABLE quota_periods (
    scope        text        NOT NULL CHECK (scope IN ('org', 'team', 'user', 'key')),
    scope_id     bigint      NOT NULL CHECK (scope_id > 0),
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL CHECK (period_end > period_start),
    period       text        NOT NULL CHECK (period IN ('daily', 'weekly', 'monthly')),
    time_zone    text        NOT NULL,
    cost_limit   numeric CHECK (cost_limit >= 0),
    cost_used    numeric     NOT NULL DEFAULT 0 CHECK (cost_used >= 0),
    requests     bigint      NOT NULL DEFAULT 0 CHECK (requests >= 0),
    adjustments  numeric     NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, scope_id, period_start)
);

ALTER TABLE quota_adjustments DROP CONSTRAINT quota_adjustments_scope_check;
ALTER TABLE quota_adjustments ADD CONSTRAINT quota_adjustments_scope_check CHECK (scope IN ('org', 'team', 'user', 'key'));
-- The period an adjustment corrected (NULL: a quota without period).
ALTER TABLE quota_adjustments ADD COLUMN period_start timestamptz;

-- Usage rows: kind 'adjustment' rows mirror quota_adjustments in the usage listing (cost = the signed
-- amount, only the adjusted scope's id column set). admitted_at is when admission reserved the request
-- (the hold's clock), which decides its budget period; NULL when nothing was reserved.
ALTER TABLE usages
    ADD COLUMN kind          text   NOT NULL DEFAULT 'request' CHECK (kind IN ('request', 'adjustment')),
    ADD COLUMN adjustment_id bigint UNIQUE REFERENCES quota_adjustments (id),
    ADD COLUMN admitted_at   timestamptz;
ALTER TABLE usages DROP CONSTRAINT usages_cost_check;
ALTER TABLE usages ADD CONSTRAINT usages_cost_check CHECK (cost >= 0 OR kind = 'adjustment');
ALTER TABLE usages ADD CONSTRAINT usages_adjustment_check CHECK ((kind = 'adjustment') = (adjustment_id IS NOT NULL));
CREATE INDEX usages_team_idx ON usages (team_id, created_at);
