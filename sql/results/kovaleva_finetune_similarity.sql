-- Kovaleva et al. Fig. 5: per head, the cosine similarity of the base and fine-tuned
-- attention maps of the same validation example (cropped n x n, flattened), averaged over
-- the examples (up to 1000). Compare BERT-base: the last two layers change most.
CREATE OR REPLACE VIEW kovaleva_finetune_similarity AS
SELECT
    bm.source AS model,                -- the base model (the partition the rows belong to)
    bm.source AS base_model,
    tm.source AS tuned_model,
    c.model_id,
    c.tuned_model_id,
    c.corpus,
    c.corpus AS task,
    c.layer,
    c.head,
    avg(c.cosine) AS cosine,
    count(*) AS n_examples
FROM finetune_cosines AS c
JOIN models AS bm ON bm.model_id = c.model_id
JOIN models AS tm ON tm.model_id = c.tuned_model_id
GROUP BY ALL;
