-- Kovaleva Table 1: GLUE validation metrics of a base model under three settings, one row
-- per (setting, metric). model_id is the base model; corpus the validation corpus (glue_<task>).
CREATE TABLE IF NOT EXISTS task_scores (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    task VARCHAR NOT NULL,             -- mrpc, stsb, sst2, rte, cola
    setting VARCHAR NOT NULL,          -- pretrained | random_init_finetuned | pretrained_finetuned
    metric VARCHAR NOT NULL,           -- accuracy, f1, matthews, pearson, spearman
    score DOUBLE,                      -- a fraction (0-1 or a correlation); NaN when undefined (constant prediction)
    n_examples INTEGER NOT NULL,       -- validation examples scored
    tuned_model_id VARCHAR,            -- partition of the saved checkpoint (pretrained_finetuned only)
    steps INTEGER,                     -- optimizer steps (NULL when not fine-tuned)
    train_examples INTEGER,
    final_loss DOUBLE,
    recipe VARCHAR NOT NULL,           -- JSON: compute/kovaleva/finetuning.py recipe_record + setting and validation scores
    seconds DOUBLE NOT NULL            -- wall time of building, training, scoring (and saving) this setting
);
