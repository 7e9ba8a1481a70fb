-- Kovaleva Table 1 on each task's own metric (accuracy; Pearson for STS-B), in % (correlations
-- x 100), with the score's standard error over the validation examples, beside the precondition
-- of every claim about fine-tuned models (sql/claims/kovaleva.yaml): whether the pre-trained +
-- fine-tuned model learned the task, i.e. beat the best constant prediction by more than a
-- validation set of its size lets chance explain. RTE 53.1 against a majority class of 52.7 is
-- a fine-tune that learned nothing, and what its attention or its ablations show is noise.
--
-- The best constant prediction of a classifier is the validation split's majority class; its
-- accuracy is the majority label's share of the base model's glue_<task> examples (the whole
-- split up to the corpus's 1000 examples; n_labels of them). A constant regression output has
-- no correlation, so STS-B's baseline is 0. `bound` is the upper end of the baseline's 95%
-- interval on the n_examples the fine-tune was scored on: p0 + 1.96 sqrt(p0 (1 - p0) / n) (the
-- binomial's normal approximation), for a correlation of 0 tanh(1.96 / sqrt(n - 3)) (Fisher's
-- z). `learned`: the fine-tune's score is above `bound` (false where the labels are not in the
-- warehouse or the fine-tune predicts a constant); `note` says so with the numbers.
-- score_se: sqrt(p (1 - p) / n) for an accuracy, (1 - r^2) / sqrt(n - 3) for a correlation
-- (Fisher's z by the delta method), in points. One row per (base model, task, setting); every
-- setting of a task carries its pre-trained + fine-tuned model's baseline, learned and note.
CREATE OR REPLACE VIEW int_task_score_baselines AS
WITH scores AS (
    SELECT model, model_id, corpus, task, setting, metric, 100 * score AS score, n_examples
    FROM stg_task_scores
    WHERE metric = CASE WHEN task = 'stsb' THEN 'pearson' ELSE 'accuracy' END
),
labels AS (
    SELECT model_id, corpus, label, count(*) AS examples
    FROM stg_examples
    WHERE label IS NOT NULL
    GROUP BY ALL
),
majority AS (
    SELECT model_id, corpus, 100 * max(examples) / sum(examples) AS share, sum(examples)::BIGINT AS n_labels
    FROM labels
    GROUP BY ALL
),
tuned AS (
    SELECT
        s.model_id,
        s.corpus,
        s.score,
        s.n_examples,
        m.n_labels,
        CASE WHEN s.metric = 'pearson' THEN 0 ELSE m.share END AS baseline,
        CASE
            WHEN s.metric = 'pearson' THEN 100 * tanh(1.96 / sqrt(s.n_examples - 3))
            ELSE m.share + 1.96 * sqrt(m.share * (100 - m.share) / s.n_examples)
        END AS bound,
        CASE WHEN s.metric = 'pearson' THEN 'a constant prediction' ELSE 'the majority class' END AS baseline_name
    FROM scores AS s
    LEFT JOIN majority AS m USING (model_id, corpus)
    WHERE s.setting = 'pretrained_finetuned'
)
SELECT
    s.model,
    s.model_id,
    s.corpus,
    s.task,
    s.setting,
    s.metric,
    s.score,
    CASE
        WHEN s.metric = 'pearson' THEN 100 * (1 - (s.score / 100) ^ 2) / sqrt(s.n_examples - 3)
        ELSE sqrt(s.score * (100 - s.score) / s.n_examples)
    END AS score_se,
    s.n_examples,
    t.baseline,
    t.bound,
    t.n_labels,
    coalesce(NOT isnan(t.score) AND t.score > t.bound, false) AS learned,
    CASE
        WHEN t.score IS NULL THEN printf('%s: not fine-tuned from this model', s.task)
        WHEN isnan(t.score) THEN printf('%s: the fine-tune predicts a constant (no %s)', s.task, s.metric)
        WHEN t.bound IS NULL THEN printf(
            '%s: no majority class to compare with (no labels of %s in the warehouse: attn-warehouse run %s --corpus %s)',
            s.task, s.corpus, s.model, s.corpus)
        ELSE printf('%s: fine-tuned %s %.1f, %s %.1f (%s %.1f and the 95%% noise of %d examples)',
            s.task, s.metric, t.score, CASE WHEN t.score > t.bound THEN 'above' ELSE 'not above' END, t.bound,
            t.baseline_name, t.baseline, t.n_examples)
    END AS note
FROM scores AS s
LEFT JOIN tuned AS t USING (model_id, corpus);
