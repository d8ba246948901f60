-- Issue 18, item 1, second take: a settlement statement writes one rollup; the others receive each hour when
-- it has ended.
--
-- With 0011 every settlement statement upserted four rollups. A batch spread over many keys and models adds
-- about one row per record to each full-grain rollup, and the ingest throughput of such batches fell to
-- 63–76 % of its figure without rollups (docs/benchmarks.md, "Spend API"). Now:
--
--   spend_hour         (every dimension, per UTC hour) is the only rollup a settlement statement writes for
--                      the hours not yet folded;
--   spend_day          (every dimension, per UTC day),
--   spend_key_day      (new: org, team, user and key per UTC day: the key and user questions),
--   spend_team_hour, spend_team_day
--                      ("coarse rollups") hold the hours before the fold mark spend_fold.folded_before,
--                      summed from spend_hour. The first settlement statement of a new UTC hour folds the
--                      hours since the mark into them and moves the mark, in its own transaction
--                      (spend_rollup_fold): once an hour, a few thousand grouped rows.
--
-- Invariant: each coarse rollup equals the spend_hour rows before the mark summed to its grain, and
-- spend_hour equals the request rows of usages. A query of a coarse rollup adds the spend_hour rows at or
-- after the mark, in the same snapshot (controlplane/store/spend.go), so every answer is exact at every
-- moment. A row settled for an hour before the mark (a late record, a load of old rows) goes into spend_hour
-- and into the coarse rollups at once, as with 0011.
--
-- Concurrency: a statement that writes spend_hour holds a shared transaction-level advisory lock until it
-- commits and reads the mark under it; a fold holds the same lock exclusively, so it waits for every
-- transaction that wrote rows it is about to fold (and reads them committed: a fold runs only under READ
-- COMMITTED, where each statement sees what committed before it), and a writer that comes after it sees the
-- moved mark. Under stricter isolation a writer never folds and reads the mark FOR SHARE, so a fold committed
-- after its snapshot aborts it with a serialization failure instead of leaving it with a stale mark. The
-- advisory key is (1953459308 = "toll", 18); the migrator's lock is a one-bigint key, a different key space.
-- Exactly-once and atomicity are as in 0011: only the rows the settlement insert actually inserted reach the
-- trigger, and every rollup write (fold included) commits or rolls back with the settling transaction.

LOCK TABLE spend_hour, spend_day, spend_team_hour, spend_team_day IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE spend_key_day (
    bucket                        timestamptz NOT NULL,
    org_id                        bigint      NOT NULL,
    team_id                       bigint      NOT NULL,
    user_id                       bigint      NOT NULL,
    api_key_id                    bigint      NOT NULL,
    requests                      bigint      NOT NULL,
    cost                          numeric     NOT NULL,
    input_tokens                  bigint      NOT NULL,
    output_tokens                 bigint      NOT NULL,
    cache_read_tokens             bigint      NOT NULL,
    cache_creation_5m_tokens      bigint      NOT NULL,
    cache_creation_30m_tokens     bigint      NOT NULL,
    cache_creation_1h_tokens      bigint      NOT NULL,
    image_output_tokens           bigint      NOT NULL,
    PRIMARY KEY (bucket, org_id, team_id, user_id, api_key_id)
);

CREATE TABLE spend_fold (
    one                           boolean     PRIMARY KEY DEFAULT true CHECK (one),
    folded_before                 timestamptz NOT NULL
);

-- spend_rollup_fold adds the spend_hour rows of [folded_before, upto) (upto truncated to its UTC hour) to
-- the coarse rollups and moves the mark to upto; nothing when the mark is there already. Any hour is
-- exact (a later row for an hour before the mark goes to the coarse rollups directly); the trigger folds up
-- to the current hour.
CREATE FUNCTION spend_rollup_fold(upto timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    w timestamptz;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'spend_rollup_fold needs READ COMMITTED isolation';
    END IF;
    upto := date_trunc('hour', upto, 'UTC');
    PERFORM pg_advisory_xact_lock(1953459308, 18);
    SELECT folded_before INTO w FROM spend_fold;
    IF w >= upto THEN
        RETURN;
    END IF;

    INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state,
           sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
      FROM spend_hour
     WHERE bucket >= w AND bucket < upto
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
       SET requests = r.requests + excluded.requests,
           cost = r.cost + excluded.cost,
           input_tokens = r.input_tokens + excluded.input_tokens,
           output_tokens = r.output_tokens + excluded.output_tokens,
           cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
           cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
           cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
           cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
           image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

    INSERT INTO spend_key_day AS r (bucket, org_id, team_id, user_id, api_key_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id,
           sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
      FROM spend_hour
     WHERE bucket >= w AND bucket < upto
     GROUP BY 1, 2, 3, 4, 5
     ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id) DO UPDATE
       SET requests = r.requests + excluded.requests,
           cost = r.cost + excluded.cost,
           input_tokens = r.input_tokens + excluded.input_tokens,
           output_tokens = r.output_tokens + excluded.output_tokens,
           cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
           cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
           cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
           cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
           image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

    INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state,
           sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
      FROM spend_hour
     WHERE bucket >= w AND bucket < upto
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
       SET requests = r.requests + excluded.requests,
           cost = r.cost + excluded.cost,
           input_tokens = r.input_tokens + excluded.input_tokens,
           output_tokens = r.output_tokens + excluded.output_tokens,
           cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
           cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
           cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
           cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
           image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

    INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state,
           sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
      FROM spend_hour
     WHERE bucket >= w AND bucket < upto
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
    ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
       SET requests = r.requests + excluded.requests,
           cost = r.cost + excluded.cost,
           input_tokens = r.input_tokens + excluded.input_tokens,
           output_tokens = r.output_tokens + excluded.output_tokens,
           cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
           cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
           cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
           cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
           image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

    UPDATE spend_fold SET folded_before = upto;
END $$;

CREATE OR REPLACE FUNCTION spend_rollup_ingest() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    earliest timestamptz;
    w timestamptz;
    open_hour timestamptz := date_trunc('hour', now(), 'UTC');
BEGIN
    SELECT min(created_at) INTO earliest FROM new_rows WHERE kind = 'request';
    IF earliest IS NULL THEN
        RETURN NULL; -- adjustments only, or nothing inserted
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM pg_advisory_xact_lock_shared(1953459308, 18);
        SELECT folded_before INTO w FROM spend_fold FOR SHARE;
    ELSE
        SELECT folded_before INTO w FROM spend_fold;
        IF w < open_hour THEN
            PERFORM spend_rollup_fold(open_hour); -- holds the lock exclusively until commit
        ELSE
            PERFORM pg_advisory_xact_lock_shared(1953459308, 18);
        END IF;
        SELECT folded_before INTO w FROM spend_fold; -- under the lock: final until commit
    END IF;

    INSERT INTO spend_hour AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
           count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
      FROM new_rows
     WHERE kind = 'request'
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
     ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
       SET requests = r.requests + excluded.requests,
           cost = r.cost + excluded.cost,
           input_tokens = r.input_tokens + excluded.input_tokens,
           output_tokens = r.output_tokens + excluded.output_tokens,
           cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
           cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
           cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
           cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
           image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

    IF earliest < w THEN
        -- Rows of hours already folded.
        INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
               count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
          FROM new_rows
         WHERE kind = 'request' AND created_at < w
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
         ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

        INSERT INTO spend_key_day AS r (bucket, org_id, team_id, user_id, api_key_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0),
               count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
          FROM new_rows
         WHERE kind = 'request' AND created_at < w
         GROUP BY 1, 2, 3, 4, 5
         ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

        INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
               count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
          FROM new_rows
         WHERE kind = 'request' AND created_at < w
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
         ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

        INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
               count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
          FROM new_rows
         WHERE kind = 'request' AND created_at < w
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
         ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;
    END IF;
    RETURN NULL;
END $$;

-- 0011 kept all four rollups complete, so the mark starts after their last hour (or at the current hour),
-- and spend_key_day is spend_day summed to its grain.

INSERT INTO spend_fold (folded_before)
SELECT greatest(date_trunc('hour', now(), 'UTC'), coalesce(max(bucket) + interval '1 hour', '-infinity'))
  FROM spend_hour;

INSERT INTO spend_key_day AS r (bucket, org_id, team_id, user_id, api_key_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT bucket, org_id, team_id, user_id, api_key_id,
       sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
  FROM spend_day
 WHERE true
 GROUP BY 1, 2, 3, 4, 5
 ORDER BY 1, 2, 3, 4, 5
ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id) DO UPDATE
   SET requests = r.requests + excluded.requests,
       cost = r.cost + excluded.cost,
       input_tokens = r.input_tokens + excluded.input_tokens,
       output_tokens = r.output_tokens + excluded.output_tokens,
       cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
       cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
       cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
       cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
       image_output_tokens = r.image_output_tokens + excluded.image_output_tokens;

