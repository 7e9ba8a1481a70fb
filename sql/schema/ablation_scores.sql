-- Kovaleva §4.6: the fine-tuned model's validation metric with one head, or one whole layer,
-- attending uniformly (1/n over the real tokens). model_id is the base model.
CREATE TABLE IF NOT EXISTS ablation_scores (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    task VARCHAR NOT NULL,
    tuned_model_id VARCHAR NOT NULL,   -- the fine-tuned checkpoint that was ablated
    kind VARCHAR NOT NULL,             -- baseline | head | layer
    layer SMALLINT,                    -- 1-based; NULL for the baseline
    head SMALLINT,                     -- 1-based; NULL for the baseline and whole layers
    metric VARCHAR NOT NULL,
    score DOUBLE,
    baseline_score DOUBLE,             -- the same metric with no head disabled
    n_examples INTEGER NOT NULL
);
