-- 0022: a batch dimension of spend (issue 31; docs/batches.md, docs/admin-api.md "Spend").
--
-- The rollups that carry a row's every dimension (spend_delta, spend_hour, spend_day) and the team grain
-- (spend_team_hour, spend_team_day) get batch_id: the provider batch a usage row settles a line of, 0 for a
-- request (ids are positive, as for the other dimensions). spend_key_day does not: it answers org/team/user/key
-- questions, and a query naming the batch reads another rollup. The column is added with a constant default
-- (no rewrite), every existing row is a request (0), and each primary key gains batch_id (an index rebuild of
-- each rollup, under the lock below). spend_rollup_ingest and spend_rollup_fold are 0014's with batch_id
-- carried along; the invariant (each rollup plus spend_delta equals the request rows of usages) is unchanged.

LOCK TABLE usages, spend_delta, spend_hour, spend_day, spend_key_day, spend_team_hour, spend_team_day, spend_fold
    IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE spend_delta ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
ALTER TABLE spend_hour ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
ALTER TABLE spend_hour DROP CONSTRAINT spend_hour_pkey, ADD PRIMARY KEY (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id);
ALTER TABLE spend_day ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
ALTER TABLE spend_day DROP CONSTRAINT spend_day_pkey, ADD PRIMARY KEY (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id);
ALTER TABLE spend_team_hour ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
ALTER TABLE spend_team_hour DROP CONSTRAINT spend_team_hour_pkey, ADD PRIMARY KEY (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id);
ALTER TABLE spend_team_day ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
ALTER TABLE spend_team_day DROP CONSTRAINT spend_team_day_pkey, ADD PRIMARY KEY (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id);

CREATE OR REPLACE FUNCTION spend_rollup_fold() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1953459308, 18);
    WITH d AS (
        DELETE FROM spend_delta RETURNING *
    ), h AS (
        SELECT bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id,
               sum(requests)::bigint AS requests, sum(cost) AS cost, sum(input_tokens)::bigint AS input_tokens,
               sum(output_tokens)::bigint AS output_tokens, sum(cache_read_tokens)::bigint AS cache_read_tokens,
               sum(cache_creation_5m_tokens)::bigint AS cache_creation_5m_tokens,
               sum(cache_creation_30m_tokens)::bigint AS cache_creation_30m_tokens,
               sum(cache_creation_1h_tokens)::bigint AS cache_creation_1h_tokens,
               sum(image_output_tokens)::bigint AS image_output_tokens
          FROM d
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
    ), to_hour AS (
        INSERT INTO spend_hour AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id,
               requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens
          FROM h
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id) DO UPDATE
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
        INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
        ON CONFLICT (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id) DO UPDATE
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
        INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id) DO UPDATE
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
        INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
        SELECT date_trunc('day', bucket, 'UTC'), org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id,
               sum(requests)::bigint, sum(cost), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint, sum(cache_creation_5m_tokens)::bigint, sum(cache_creation_30m_tokens)::bigint, sum(cache_creation_1h_tokens)::bigint, sum(image_output_tokens)::bigint
          FROM h
         GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
        ON CONFLICT (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id) DO UPDATE
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

CREATE OR REPLACE FUNCTION spend_rollup_ingest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT folded_at FROM spend_fold) < date_trunc('hour', now(), 'UTC') THEN
        IF current_setting('transaction_isolation') = 'read committed' THEN
            IF pg_try_advisory_xact_lock(1953459308, 18) THEN
                PERFORM spend_rollup_fold();
            END IF;
        END IF;
    END IF;
    INSERT INTO spend_delta (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, batch_id, requests, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state, coalesce(batch_id, 0),
           count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
      FROM new_rows
     WHERE kind = 'request'
     GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11;
    RETURN NULL;
END $$;
