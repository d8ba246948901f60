-- Issue 18, item 1: spend rollups. Four tables hold the sums of usages per time bucket and dimensions:
--
--   spend_hour, spend_day            every dimension (org, team, user, key, provider, logical and upstream
--                                    model, operation, end state);
--   spend_team_hour, spend_team_day  the same without user and key (the "team grain": far fewer rows, so
--                                    by-model and by-team answers over months read thousands of rows).
--
-- Only request rows are rolled up: adjustment rows (kind 'adjustment', migration 0006) are corrections of a
-- budget, shown in the usage listing and the budget's period history, not traffic.
--
-- Buckets are UTC hours and UTC days (timestamptz at the bucket's start). An absent id is 0 (ids are
-- positive), so the dimensions form a primary key. Costs are exact numeric sums.
--
-- They are maintained by a statement-level AFTER INSERT trigger on usages over its transition table: the
-- settlement insert (INSERT ... ON CONFLICT (request_id) DO NOTHING) passes only the rows it inserted, so a
-- record delivered twice adds nothing, and the rollups commit or roll back with the usages rows (same
-- transaction). Each rollup insert is ordered by its key, and the tables are always written in the same
-- order, so concurrent settlement batches queue on a shared rollup row instead of deadlocking.
-- usages is append-only (nothing updates or deletes its rows); the rollups assume it. A fill factor of 70
-- leaves room on each page so the updates of a hot rollup row stay heap-only (no index write).

CREATE TABLE spend_hour (
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
    image_output_tokens           bigint      NOT NULL,
    PRIMARY KEY (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state)
) WITH (fillfactor = 70);

CREATE TABLE spend_day (
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
    image_output_tokens           bigint      NOT NULL,
    PRIMARY KEY (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state)
) WITH (fillfactor = 70);

CREATE TABLE spend_team_hour (
    bucket                        timestamptz NOT NULL,
    org_id                        bigint      NOT NULL,
    team_id                       bigint      NOT NULL,
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
    image_output_tokens           bigint      NOT NULL,
    PRIMARY KEY (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state)
) WITH (fillfactor = 70);

CREATE TABLE spend_team_day (
    bucket                        timestamptz NOT NULL,
    org_id                        bigint      NOT NULL,
    team_id                       bigint      NOT NULL,
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
    image_output_tokens           bigint      NOT NULL,
    PRIMARY KEY (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state)
) WITH (fillfactor = 70);

CREATE FUNCTION spend_rollup_ingest() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN

    INSERT INTO spend_hour AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
        input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
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

    INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
        input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
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

    INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
        input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
           count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
      FROM new_rows
     WHERE kind = 'request'
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

    INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
        input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
    SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
           count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
      FROM new_rows
     WHERE kind = 'request'
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

    RETURN NULL;
END $$;

CREATE TRIGGER usages_spend_rollup AFTER INSERT ON usages
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_ingest();

-- The rows settled before this migration.

INSERT INTO spend_hour AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
    input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
       count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
  FROM usages
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

INSERT INTO spend_day AS r (bucket, org_id, team_id, user_id, api_key_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
    input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(user_id, 0), coalesce(api_key_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
       count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
  FROM usages
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

INSERT INTO spend_team_hour AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
    input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT date_trunc('hour', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
       count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
  FROM usages
 WHERE kind = 'request'
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

INSERT INTO spend_team_day AS r (bucket, org_id, team_id, provider_id, logical_model, upstream_model, operation, end_state, requests, cost,
    input_tokens, output_tokens, cache_read_tokens, cache_creation_5m_tokens, cache_creation_30m_tokens, cache_creation_1h_tokens, image_output_tokens)
SELECT date_trunc('day', created_at, 'UTC'), coalesce(org_id, 0), coalesce(team_id, 0), coalesce(provider_id, 0), logical_model, upstream_model, operation, end_state,
       count(*), sum(cost), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_creation_5m_tokens), sum(cache_creation_30m_tokens), sum(cache_creation_1h_tokens), sum(image_output_tokens)
  FROM usages
 WHERE kind = 'request'
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
