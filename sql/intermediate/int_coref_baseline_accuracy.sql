-- Clark §4.3 baselines: accuracy of each system's picked antecedent (coref_baseline_predictions)
-- over the coreferent mentions, per mention type and 'all'. Right when the pick is one of
-- the mention's gold antecedents.
CREATE OR REPLACE VIEW int_coref_baseline_accuracy AS
WITH coreferent AS (
    SELECT DISTINCT model, model_id, corpus, example_id, mention_id, mention_type FROM int_coref_antecedents
),
judged AS (
    SELECT
        c.model,
        c.model_id,
        c.corpus,
        p.system,
        c.mention_type,
        a.antecedent_id IS NOT NULL AS correct
    FROM coreferent AS c
    JOIN stg_coref_baseline_predictions AS p USING (model_id, corpus, example_id, mention_id)
    LEFT JOIN int_coref_antecedents AS a
        ON a.model_id = c.model_id
        AND a.corpus = c.corpus
        AND a.example_id = c.example_id
        AND a.mention_id = c.mention_id
        AND a.antecedent_id = p.antecedent_id
)
SELECT
    model,
    model_id,
    corpus,
    system,
    coalesce(mention_type, 'all') AS mention_type,
    avg(correct::INTEGER) AS accuracy,
    count(*) AS n
FROM judged
GROUP BY GROUPING SETS ((model, model_id, corpus, system, mention_type), (model, model_id, corpus, system));
