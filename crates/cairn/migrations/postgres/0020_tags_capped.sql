-- A job holds at most 64 tags (MAX_TAGS in ops/limits.rs), however they come: the engine checks a push and a
-- change of tags before writing, and this trigger holds the application's own pushes (cairn_push) to the same rule,
-- with the same error: SQLSTATE 22023 and a message naming the field.
CREATE FUNCTION cairn_check_tag_count() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    held bigint;
BEGIN
    SELECT count(*) INTO held FROM job_tags WHERE job_id = NEW.job_id;
    IF held > 64 THEN
        PERFORM cairn_invalid('tags', format('a job holds at most 64 tags, got %s', held));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER job_tags_capped AFTER INSERT ON job_tags FOR EACH ROW EXECUTE FUNCTION cairn_check_tag_count();
