-- Kovaleva et al. §5: "2 out of 144 heads that seem to be 'responsible' for these relations (see
-- Section 4.2) do not appear to be important in any of the GLUE tasks". Per fine-tuned task and
-- head, its FrameNet statistics on the pre-trained model (int_framenet_heads: mean max
-- attention, above_p99, above_p99_beyond_ci) beside the score change when the head attends
-- uniformly (int_ablation_scores, in points); delta_rank orders the task's heads from the most
-- harmful to disable (1) to the least, so a flagged head's rank says how much it matters.
CREATE OR REPLACE VIEW kovaleva_framenet_head_ablation AS
SELECT
    a.model,
    a.model_id,
    a.corpus,
    a.task,
    a.tuned_model_id,
    a.layer,
    a.head,
    f.mean_max_attention,
    f.above_p99,
    f.above_p99_beyond_ci,
    a.metric,
    a.score,
    a.baseline_score,
    a.delta_vs_baseline,
    rank() OVER (PARTITION BY a.model_id, a.task, a.metric ORDER BY a.delta_vs_baseline) AS delta_rank,
    count(*) OVER (PARTITION BY a.model_id, a.task, a.metric) AS n_heads,
    a.relative_depth
FROM int_ablation_scores AS a
JOIN int_framenet_heads AS f ON f.model_id = a.model_id AND f.layer = a.layer AND f.head = a.head
WHERE a.kind = 'head';
