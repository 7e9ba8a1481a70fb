-- Kovaleva §4.3, Fig. 5: per (validation example, layer, head) the cosine similarity of
-- the base model's and a fine-tuned model's attention maps, each flattened over the
-- cropped n x n block. Partition: the base model (model_id) and the glue_<task> corpus.
CREATE TABLE IF NOT EXISTS finetune_cosines (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    tuned_model_id VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    cosine FLOAT NOT NULL
);
