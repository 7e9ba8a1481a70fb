-- Clark §4.3: every coreferent mention with each of its gold antecedents. An antecedent is
-- a mention of the same cluster in the same example (window) that ends before the mention
-- starts (the candidate rule of dagster_project/compute/clark/coreference_baselines.py); a mention
-- with at least one is coreferent.
CREATE OR REPLACE VIEW int_coref_antecedents AS
SELECT
    m.model,
    m.model_id,
    m.corpus,
    m.example_id,
    m.mention_id,
    m.mention_type,
    m.head_word,
    a.mention_id AS antecedent_id,
    a.head_word AS antecedent_head_word
FROM stg_coref_mentions AS m
JOIN stg_coref_mentions AS a
    ON a.model_id = m.model_id
    AND a.corpus = m.corpus
    AND a.example_id = m.example_id
    AND a.cluster_id = m.cluster_id
    AND a.word_end <= m.word_start;
