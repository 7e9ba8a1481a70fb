-- Kovaleva Table 1: GLUE validation scores in % (correlations x 100) per setting, next to the
-- paper's BERT-base numbers (its STS-B column, labelled "Acc", is read as Pearson).
CREATE OR REPLACE VIEW kovaleva_task_scores AS
WITH paper (task, setting, metric, paper_score) AS (
    VALUES
        ('mrpc', 'pretrained', 'f1', 0.0), ('mrpc', 'pretrained', 'accuracy', 31.6),
        ('mrpc', 'random_init_finetuned', 'f1', 81.2), ('mrpc', 'random_init_finetuned', 'accuracy', 68.3),
        ('mrpc', 'pretrained_finetuned', 'f1', 87.9), ('mrpc', 'pretrained_finetuned', 'accuracy', 82.3),
        ('stsb', 'pretrained', 'pearson', 33.1), ('stsb', 'random_init_finetuned', 'pearson', 2.9),
        ('stsb', 'pretrained_finetuned', 'pearson', 82.7),
        ('sst2', 'pretrained', 'accuracy', 49.1), ('sst2', 'random_init_finetuned', 'accuracy', 80.5),
        ('sst2', 'pretrained_finetuned', 'accuracy', 92.0),
        ('rte', 'pretrained', 'accuracy', 52.7), ('rte', 'random_init_finetuned', 'accuracy', 52.7),
        ('rte', 'pretrained_finetuned', 'accuracy', 64.6)
)
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.task,
    s.setting,
    s.metric,
    100 * s.score AS score,
    p.paper_score::DOUBLE AS paper_score,
    s.n_examples,
    s.steps,
    s.train_examples,
    s.final_loss,
    s.seconds,
    s.tuned_model_id,
    s.recipe
FROM stg_task_scores AS s
LEFT JOIN paper AS p USING (task, setting, metric);
