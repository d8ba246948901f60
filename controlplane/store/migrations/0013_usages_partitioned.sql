-- 0013: usages partitioned by month (issue 17, item 5; docs/operations.md "Usages partitions and retention").
--
-- usages becomes PARTITION BY RANGE (created_at) with one partition per UTC month, named usages_YYYY_MM, and a
-- DEFAULT partition (usages_default) for rows of a month without its own partition (a faulty data plane's
-- far-future or far-past created_at, or a month the control plane has not created yet): ingest never fails
-- for want of a partition. The control plane creates the current and next month's partitions at start and
-- hourly (usages_ensure_partition below, which also moves that month's rows out of the default partition)
-- and, with TOLLGATE_USAGE_RETENTION_MONTHS set, drops the partitions older than the retention.
--
-- Exactly-once: a unique index of a partitioned table must contain the partition key, so request_id is
-- unique together with created_at: UNIQUE (request_id, created_at). A redelivered record carries the created_at
-- it was first sent with (the data plane writes the record once into its outbox and redelivers those bytes),
-- so it conflicts with its stored row. A row without created_at takes the stored row's created_at, under a
-- lock on its request id (store.SettleUsages). The primary key is (id, created_at); the listing's keyset is id.
--
-- The copy below rewrites every row under an ACCESS EXCLUSIVE lock on usages (the migration's transaction):
-- settlement and the usage listing wait for it. Its cost is in docs/operations.md, "Upgrading to 0013".

ALTER TABLE usages RENAME TO usages_unpartitioned;
-- The id sequence survives the old table: the new table draws from it, so ids keep increasing.
ALTER SEQUENCE usages_id_seq OWNED BY NONE;
-- The rollups already hold the old rows; the copy must not add them again.
DROP TRIGGER usages_spend_rollup ON usages_unpartitioned;

CREATE TABLE usages (
    id                        bigint      NOT NULL DEFAULT nextval('usages_id_seq'),
    request_id                text        NOT NULL CHECK (request_id <> ''),
    api_key_id                bigint,
    user_id                   bigint,
    team_id                   bigint,
    org_id                    bigint,
    route_id                  bigint,
    provider_id               bigint,
    credential_id             bigint,
    logical_model             text        NOT NULL DEFAULT '',
    upstream_model            text        NOT NULL DEFAULT '',
    operation                 text        NOT NULL,
    inbound_kind              text        NOT NULL,
    implementation            text        NOT NULL DEFAULT '',
    dest_kind                 text        NOT NULL DEFAULT '',
    input_tokens              bigint      NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens             bigint      NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens         bigint      NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_creation_5m_tokens  bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_5m_tokens >= 0),
    cache_creation_30m_tokens bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_30m_tokens >= 0),
    cache_creation_1h_tokens  bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_1h_tokens >= 0),
    image_output_tokens       bigint      NOT NULL DEFAULT 0 CHECK (image_output_tokens >= 0),
    requested_tier            text        NOT NULL DEFAULT '',
    reported_tier             text        NOT NULL DEFAULT '',
    price_rule_id             bigint,
    snapshot_version          bigint      NOT NULL DEFAULT 0,
    cost                      numeric     NOT NULL,
    source                    text        NOT NULL CHECK (source IN ('upstream', 'local', 'estimated', 'none')),
    end_state                 text        NOT NULL CHECK (end_state IN ('completed', 'upstream_error',
                                  'upstream_interrupted', 'client_dropped', 'rejected')),
    http_status               integer     NOT NULL DEFAULT 0,
    latency_ms                bigint      NOT NULL DEFAULT 0,
    first_byte_ms             bigint      NOT NULL DEFAULT 0,
    created_at                timestamptz NOT NULL,
    settled_at                timestamptz NOT NULL DEFAULT now(),
    billing_flag              text        NOT NULL DEFAULT '' CHECK (billing_flag IN ('', 'usage_out_of_bounds')),
    flag_detail               text        NOT NULL DEFAULT '',
    price_rule_version        integer CHECK (price_rule_version IS NULL OR price_rule_version > 0),
    kind                      text        NOT NULL DEFAULT 'request' CHECK (kind IN ('request', 'adjustment')),
    -- An adjustment's row is written once, in the transaction that records the adjustment (no redelivery),
    -- so the former UNIQUE (adjustment_id) (impossible without created_at) is not needed.
    adjustment_id             bigint REFERENCES quota_adjustments (id),
    admitted_at               timestamptz,
    CONSTRAINT usages_cost_check CHECK (cost >= 0 OR kind = 'adjustment'),
    CONSTRAINT usages_adjustment_check CHECK ((kind = 'adjustment') = (adjustment_id IS NOT NULL))
) PARTITION BY RANGE (created_at);

CREATE TABLE usages_default PARTITION OF usages DEFAULT;

-- usages_ensure_partition creates the partition of the UTC month holding at (usages_YYYY_MM) unless it exists,
-- moving the month's rows out of the default partition into it; it answers whether it created one. Month
-- arithmetic is done in UTC whatever the session's TimeZone. Locks: SHARE UPDATE EXCLUSIVE on usages (reads
-- and inserts go on) and ACCESS EXCLUSIVE on usages_default for the rest of the transaction (inserts routed to
-- the default partition and reads scanning it wait, briefly: it holds only stray rows). Callers serialise
-- (the control plane holds an advisory lock) and set a lock_timeout.
CREATE FUNCTION usages_ensure_partition(month_of timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo   timestamptz := date_trunc('month', month_of, 'UTC');
    hi   timestamptz := ((date_trunc('month', month_of, 'UTC') AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    part text        := 'usages_' || to_char(date_trunc('month', month_of, 'UTC') AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'usages'::regclass AND c.relname = part) THEN
        RETURN false;
    END IF;
    LOCK TABLE ONLY usages IN SHARE UPDATE EXCLUSIVE MODE;
    LOCK TABLE usages_default IN ACCESS EXCLUSIVE MODE;
    EXECUTE format('CREATE TABLE %I (LIKE usages INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    -- The bound as a constraint lets ATTACH skip scanning the new table.
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L)',
                   part, part || '_bound', lo, hi);
    EXECUTE format('WITH moved AS (DELETE FROM usages_default WHERE created_at >= %L AND created_at < %L RETURNING *)
                    INSERT INTO %I SELECT * FROM moved', lo, hi, part);
    EXECUTE format('ALTER TABLE usages ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', part, part || '_bound');
    RETURN true;
END $$;

-- A partition for every month holding rows (within ten years before and two months after now; rows outside
-- go to the default partition), the current and the next month.
SELECT usages_ensure_partition(m)
  FROM (SELECT DISTINCT date_trunc('month', created_at, 'UTC') AS m
          FROM usages_unpartitioned
         WHERE created_at >= now() - interval '10 years' AND created_at < now() + interval '2 months'
        UNION SELECT date_trunc('month', now(), 'UTC')
        UNION SELECT date_trunc('month', ((now() AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC', 'UTC')) months
 ORDER BY m;

INSERT INTO usages SELECT * FROM usages_unpartitioned;
DROP TABLE usages_unpartitioned;
ALTER SEQUENCE usages_id_seq OWNED BY usages.id;

-- Indexes after the copy (one build per partition, not one insert per row). Every one is per partition.
ALTER TABLE usages ADD CONSTRAINT usages_pkey PRIMARY KEY (id, created_at);
-- Exactly-once: ON CONFLICT (request_id, created_at) DO NOTHING. Also the listing by request id.
ALTER TABLE usages ADD CONSTRAINT usages_request_id_key UNIQUE (request_id, created_at);
-- Time ranges: re-pricing, unpriced models.
CREATE INDEX usages_created_idx ON usages (created_at, id);
CREATE INDEX usages_flagged_idx ON usages (created_at) WHERE billing_flag <> '';
-- The listing's filters, in its order (id descending): one index each, so a filtered page reads about a
-- page of index entries per partition whatever the table's size. They also serve the budget period backfill
-- (quotas.ensurePeriod), which selects by scope column.
CREATE INDEX usages_org_idx ON usages (org_id, id);
CREATE INDEX usages_team_idx ON usages (team_id, id);
CREATE INDEX usages_user_idx ON usages (user_id, id);
CREATE INDEX usages_key_idx ON usages (api_key_id, id);
CREATE INDEX usages_model_idx ON usages (logical_model, id);
CREATE INDEX usages_adjustment_idx ON usages (id) WHERE kind = 'adjustment';

CREATE TRIGGER usages_spend_rollup AFTER INSERT ON usages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_ingest();
