-- api_keys_hash_disjoint (0007, 0015) keeps a hash from being both one key's current and another key's
-- previous hash. Its lookups cannot see a concurrent transaction's uncommitted row, and it ran before the
-- transaction took the config_revision row lock (the stamp trigger, api_keys_stamp, fires after it: BEFORE
-- triggers fire in name order), so two transactions could write crossing hashes and both commit.
--
-- Now the check first takes its transaction's revision (config_tx_revision, 0017), which holds the
-- config_revision row until commit: a second configuration writer waits there until the first commits,
-- and its lookups, each a new snapshot (the function is volatile), then see the first's rows. Config
-- writers were already serialised from their first row to commit; this moves the key check inside that.
CREATE OR REPLACE FUNCTION api_keys_hash_disjoint() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
    PERFORM config_tx_revision();
    IF EXISTS (SELECT 1 FROM api_keys k WHERE k.previous_key_hash = NEW.key_hash AND k.id <> NEW.id)
       OR (NEW.previous_key_hash IS NOT NULL
           AND EXISTS (SELECT 1 FROM api_keys k WHERE k.key_hash = NEW.previous_key_hash AND k.id <> NEW.id)) THEN
        RAISE EXCEPTION 'api key hash already in use' USING ERRCODE = 'unique_violation',
            CONSTRAINT = 'api_keys_key_hash_key';
    END IF;
    RETURN NEW;
END;
$$;
