-- Issue 32, item 4: bulk key writes are linear.
--
-- api_keys_hash_disjoint (0007) keeps a hash from being both one key's current and another key's previous
-- hash. Its lookup was one OR over both hash columns; PL/pgSQL plans it once and keeps the plan, and
-- while the table's statistics said it was small (never analyzed, or analyzed while nearly empty) that
-- plan was a sequential scan, so one statement inserting n keys read O(n²) rows: 20,000 keys took
-- seconds and every further 20,000 longer.
--
-- Same guarantee, same error, but each lookup is now one equality on one unique index
-- (api_keys_previous_hash_key, api_keys_key_hash_key), and the function plans with sequential scans
-- disabled, so whatever the statistics say the lookups go through those indexes: O(log n) per row. The
-- second lookup runs only for a row that has a previous hash.
CREATE OR REPLACE FUNCTION api_keys_hash_disjoint() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM api_keys k WHERE k.previous_key_hash = NEW.key_hash AND k.id <> NEW.id)
       OR (NEW.previous_key_hash IS NOT NULL
           AND EXISTS (SELECT 1 FROM api_keys k WHERE k.key_hash = NEW.previous_key_hash AND k.id <> NEW.id)) THEN
        RAISE EXCEPTION 'api key hash already in use' USING ERRCODE = 'unique_violation',
            CONSTRAINT = 'api_keys_key_hash_key';
    END IF;
    RETURN NEW;
END;
$$;
