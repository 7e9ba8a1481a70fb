-- Clark §4.3 baselines (Table 2): per (example, mention with a candidate antecedent, system)
-- the mention the system picks as its antecedent. Systems: nearest, head match,
-- rule-based (dagster_project/compute/clark/coreference_baselines.py). Correctness is judged in SQL
-- against the gold clusters (int_coref_baseline_accuracy).
CREATE TABLE IF NOT EXISTS coref_baseline_predictions (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    mention_id INTEGER NOT NULL,       -- the anaphor (coref_mentions.mention_id)
    system VARCHAR NOT NULL,
    antecedent_id INTEGER NOT NULL     -- the picked candidate's mention_id
);
