-- The (model, corpus) pairs whose attention facts were computed from examples other than the ones
-- the warehouse holds now: a run sampled the corpus anew and its facts step failed (or has not run
-- yet), so every view over the facts reads rows of examples that are gone. One row per pair, with
-- `fix`, the command whose run writes facts of the current examples. `sql`, `scorecard`, the report
-- and the facts assets' check facts_match_examples read it.
--
-- A facts write (head_summaries: every pass writes it) records the examples batch it was computed
-- from (batches.examples_batch_id); one written before that column existed counts as computed
-- from older examples when it was written before them.
CREATE OR REPLACE VIEW int_facts_of_replaced_examples AS
SELECT
    f.model_id,
    m.model,
    f.corpus,
    e.batch_id AS examples_batch_id,
    e.written_at AS examples_written_at,
    f.examples_batch_id AS facts_examples_batch_id,
    f.written_at AS facts_written_at,
    -- the model's source quoted for a POSIX shell where it holds other characters (a path with spaces)
    'attn-warehouse run '
    || CASE
        WHEN regexp_full_match(m.source, '[A-Za-z0-9_./:@%+=-]+') THEN m.source
        ELSE '''' || replace(m.source, '''', '''"''"''') || ''''
    END
    || ' --corpus ' || f.corpus AS fix
FROM stg_batches AS f
JOIN stg_batches AS e ON e.model_id = f.model_id AND e.corpus = f.corpus AND e.table_name = 'examples'
JOIN stg_models AS m ON m.model_id = f.model_id
WHERE
    f.table_name = 'head_summaries'
    AND CASE
        WHEN f.examples_batch_id IS NULL THEN f.written_at < e.written_at
        ELSE f.examples_batch_id <> e.batch_id
    END
ORDER BY f.model_id, f.corpus;
