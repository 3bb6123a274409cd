-- A job pushed in SQL (cairn_push) counts in the statistics under its name's family, as a push through the engine
-- does by default (NameFamilies in name_families.rs): the name up to its first `?`, so that names made per entity
-- (`Worker?accountID=42`) cannot add a row each. The function writes its row as the node `sql-<backend pid>`; the
-- servers write theirs already grouped, by the rule each was started with.
CREATE FUNCTION cairn_stats_name_family() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.name := split_part(NEW.name, '?', 1);
    RETURN NEW;
END $$;

CREATE TRIGGER stats_minute_sql_name_family BEFORE INSERT ON stats_minute FOR EACH ROW
    WHEN (NEW.node LIKE 'sql-%') EXECUTE FUNCTION cairn_stats_name_family();
