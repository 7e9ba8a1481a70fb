-- Fills agg_finetune_similarity for one (model_id, corpus): per (fine-tuned model, head,
-- validation example) the cosine of the base and fine-tuned attention maps.
SELECT tuned_model_id, tuned_model, layer, head, example_id, cosine AS cosine_num, 1 AS cosine_den
FROM stg_finetune_cosines
WHERE model_id = $model_id AND corpus = $corpus;
