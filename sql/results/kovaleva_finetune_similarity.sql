-- Kovaleva et al. Fig. 5: per head, the cosine similarity of the base and fine-tuned
-- attention maps of the same validation example (cropped n x n, flattened), averaged over
-- the examples (up to 1000). Compare BERT-base: the last two layers change most.
-- Materialized per partition in agg_finetune_similarity (sql/aggregates/ says how); ci_low /
-- ci_high: the mean's 95% seeded bootstrap interval over the examples.
CREATE OR REPLACE VIEW kovaleva_finetune_similarity AS
SELECT
    model,                             -- the base model (the partition the rows belong to)
    model AS base_model,
    tuned_model,
    model_id,
    tuned_model_id,
    corpus,
    corpus AS task,
    layer,
    head,
    cosine,
    n_examples,
    (layer - 0.5) / n_layers AS relative_depth,
    cosine_ci_low AS ci_low,
    cosine_ci_high AS ci_high
FROM stg_agg_finetune_similarity;
