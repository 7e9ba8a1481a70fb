-- Which model was fine-tuned from which, on which task corpus: finetuned_<task> records the
-- checkpoint it saved and registered in `task_scores` (partition: the base model). The
-- Kovaleva views use it to put a task's fine-tuned model beside its pre-trained base.
CREATE OR REPLACE VIEW int_finetuned_models AS
SELECT DISTINCT
    model_id AS base_model_id,
    model AS base_model,
    corpus,
    tuned_model_id
FROM stg_task_scores
WHERE setting = 'pretrained_finetuned' AND tuned_model_id IS NOT NULL;
