-- Least privilege for producers (docs/postgres.md, "Roles"): cairn_push and cairn_enqueue run with the rights of
-- their owner, the role the servers connect as, so that an application's role needs no right on Cairn's tables to
-- push a job in its own transaction: EXECUTE on these two functions is enough, and only what they check gets in.
--
-- A function that runs with its owner's rights must not let its caller choose what its names mean: the search
-- path is fixed to the schema Cairn's tables are in, with pg_temp last (where a caller could make objects of its
-- own). The functions they call had theirs fixed when they were made.
--
-- EXECUTE is no longer everyone's: PostgreSQL grants it to PUBLIC by default, which would now let any role that can
-- connect push jobs. Grant it to the roles that push (GRANT EXECUTE ON FUNCTION cairn_enqueue(text, json, jsonb),
-- cairn_push(text, json, jsonb) TO …).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION cairn_push(text, json, jsonb) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION cairn_enqueue(text, json, jsonb) SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
END $$;
REVOKE EXECUTE ON FUNCTION cairn_push(text, json, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION cairn_enqueue(text, json, jsonb) FROM PUBLIC;
