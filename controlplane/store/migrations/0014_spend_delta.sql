-- Issue 18, item 1, third take: a settlement statement appends its rollup rows; a fold once an hour moves
-- them into the rollups.
--
-- With 0012 a settlement statement upserted spend_hour (INSERT ... ON CONFLICT DO UPDATE: a unique-index probe
-- per row, and for a row already there a new row version and a dead one), and a record of an hour already
-- folded upserted all five rollups. Varied batches of 100 settled at 79–80 % of the throughput without
-- rollups, late ones at 56–58 % (docs/benchmarks.md, "Spend API"). Now:
--
--   spend_delta        (every dimension, per UTC hour, no key; one plain index on bucket) receives, per settlement
--                      statement, the statement's request rows summed per hour and dimensions: a plain
--                      INSERT, whatever the hour (late records too);
--   spend_hour, spend_day, spend_key_day, spend_team_hour, spend_team_day ("the rollups")
--                      hold everything folded: spend_rollup_fold() deletes every spend_delta row it can see
--                      and adds their sums to the five rollups, in one statement (the rows it adds are
--                      exactly the rows it deleted). The first settlement statement of each UTC hour runs it
--                      (as 0012's fold), in its own transaction. Per hour a fold upserts each distinct
--                      dimension tuple of the hour once per rollup, where 0012 upserted spend_hour once per
--                      statement naming it, and a query reads at most about an hour of delta rows (through
--                      the bucket index), as it read the unfolded hour of spend_hour.
--
-- Invariant: each rollup plus spend_delta, summed to the rollup's grain, equals the request rows of usages.
-- A query reads a rollup together with the spend_delta rows of its range in one statement (one snapshot:
-- controlplane/store/spend.go), so every answer is exact at every moment, before, during and after a fold.
-- No mark is needed: a fold moves rows from one side to the other in one transaction, and a writer never
-- depends on what has been folded.
--
-- Concurrency: writers only insert into spend_delta, so they never wait for one another or for a fold. Folds
-- hold the transaction-level advisory lock (1953459308 = "toll", 18) exclusively, so one runs at a time; the
-- trigger only tries it (pg_try_advisory_xact_lock) and skips the fold when another transaction holds it, so
-- a settlement never waits for a fold either. A row a fold cannot see yet (its transaction not committed)
-- stays in spend_delta for the next fold. The trigger folds only under READ COMMITTED (the statements of a
-- fold each see what committed before them); spend_rollup_fold() called by hand under a stricter isolation
-- may fail with a serialization error after a concurrent fold, never give a wrong sum.
-- Exactly-once and atomicity are as in 0011: only the rows the settlement insert actually inserted reach the
-- trigger, and the delta rows and any fold commit or roll back with the settling transaction.

LOCK TABLE usages, spend_hour, spend_day, spend_key_day, spend_team_hour, spend_team_day, spend_fold
    IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE spend_delta (
    bucket                        timestamptz NOT NULL,
    org_id                        bigint      NOT NULL,
    team_id                       bigint      NOT NULL,
    user_id                       bigint      NOT NULL,
    api_key_id                    bigint      NOT NULL,
    provider_id                   bigint      NOT NULL,
    logical_model                 text        NOT NULL,
    upstream_model                text        NOT NULL,
    operation                     text        NOT NULL,
    end_state                     text        NOT NULL,
    requests                      bigint      NOT NULL,
    cost                          numeric     NOT NULL,
    input_tokens                  bigint      NOT NULL,
    output_tokens                 bigint      NOT NULL,
    cache_read_tokens             bigint      NOT NULL,
    cache_creation_5m_tokens      bigint      NOT NULL,
    cache_creation_30m_tokens     bigint      NOT NULL,
    cache_creation_1h_tokens      bigint      NOT NULL,
    image_output_tokens           bigint      NOT NULL
);
-- The queries' range, so a query reads the delta rows of its range however large the table's file has grown
-- (a backlog appended and folded leaves dead space until vacuum reuses it): a plain btree insert per delta
-- row, no uniqueness to check.
CREATE INDEX spend_delta_bucket_idx ON spend_delta (bucket);

-- 0012 left the hours from its mark on in spend_hour only: add them to the four coarse rollups, so every
-- rollup holds everything settled and spend_delta starts empty.
INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state,
       sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
  FROM spend_hour
 WHERE bucket >= (SELECT folded_before FROM spend_fold)
 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
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
 WHERE bucket >= (SELECT folded_before FROM spend_fold)
 GROUP BY 1, 2, 3, 4, 5
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
 WHERE bucket >= (SELECT folded_before FROM spend_fold)
 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
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
 WHERE bucket >= (SELECT folded_before FROM spend_fold)
 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
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

-- The mark becomes the time of the last fold.
DROP FUNCTION spend_rollup_fold(timestamptz);
DROP TABLE spend_fold;
CREATE TABLE spend_fold (
    one                           boolean     PRIMARY KEY DEFAULT true CHECK (one),
    folded_at                     timestamptz NOT NULL
);
INSERT INTO spend_fold (folded_at) VALUES (now());

-- spend_rollup_fold moves every spend_delta row it sees into the five rollups and answers how many it moved.
-- One statement deletes them and adds their sums, so it adds exactly what it deleted. Folds are serialised by
-- the advisory lock, so the upserts need no order.
CREATE FUNCTION spend_rollup_fold() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1953459308, 18);
    WITH d AS (
        DELETE FROM spend_delta RETURNING *
    ), h AS (
        SELECT bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state,
               sum(requests)::bigint AS requests, sum(cost) AS cost, sum(input_tokens)::bigint AS input_tokens,
               sum(output_tokens)::bigint AS output_tokens, sum(cache_read_tokens)::bigint AS cache_read_tokens,
               sum(cache_creation_5m_tokens)::bigint AS cache_creation_5m_tokens,
               sum(cache_creation_30m_tokens)::bigint AS cache_creation_30m_tokens,
               sum(cache_creation_1h_tokens)::bigint AS cache_creation_1h_tokens,
               sum(image_output_tokens)::bigint AS image_output_tokens
          FROM d
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
    ), to_hour AS (
        INSERT INTO spend_hour AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state,
               requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens
          FROM h
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens
    ), to_day AS (
        INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens
    ), to_key_day AS (
        INSERT INTO spend_key_day AS r (bucket, org_id, team_id, user_id, api_key_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens
    ), to_team_hour AS (
        INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens
    ), to_team_day AS (
        INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state) DO UPDATE
           SET requests = r.requests + excluded.requests,
               cost = r.cost + excluded.cost,
               input_tokens = r.input_tokens + excluded.input_tokens,
               output_tokens = r.output_tokens + excluded.output_tokens,
               cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
               cache_creation_5m_tokens = r.cache_creation_5m_tokens + excluded.cache_creation_5m_tokens,
               cache_creation_30m_tokens = r.cache_creation_30m_tokens + excluded.cache_creation_30m_tokens,
               cache_creation_1h_tokens = r.cache_creation_1h_tokens + excluded.cache_creation_1h_tokens,
               image_output_tokens = r.image_output_tokens + excluded.image_output_tokens
    )
    SELECT count(*) INTO moved FROM d;
    UPDATE spend_fold SET folded_at = now();
    RETURN moved;
END $$;

-- The trigger: fold when due (at most one fold at a time, never waiting for one), then append the statement's
-- request rows summed per hour and dimensions.
CREATE OR REPLACE FUNCTION spend_rollup_ingest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT folded_at FROM spend_fold) < date_trunc('hour', now(), 'UTC') THEN
        IF current_setting('transaction_isolation') = 'read committed' THEN
            IF pg_try_advisory_xact_lock(1953459308, 18) THEN
                PERFORM spend_rollup_fold();
            END IF;
        END IF;
    END IF;
    INSERT INTO spend_delta (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
           count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
      FROM new_rows
     WHERE kind = 'request'
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10;
    RETURN NULL;
END $$;
