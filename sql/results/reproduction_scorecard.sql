-- The verdict of every paper claim (sql/claims/*.yaml) for every pre-trained model: the paper's
-- number beside the model's, with its 95% interval (value_low, value_high: a seeded bootstrap over
-- the claim's unit, heads, layers, tasks or examples; NULL where the value rests on one unit), per
-- corpus the claim was judged on. verdict: holds | fails | inconclusive (the interval straddles the
-- paper's threshold or ordering) | not comparable (the claim does not apply to this model, reason
-- says why) | missing (no rows to judge: reason says what the model needs). A fine-tuned checkpoint
-- is judged through its base model (the Kovaleva claims read the base's fine-tuned rows), so it has
-- no rows of its own.
-- A random-weights control (a model registered from `random-init:<source>`) is judged like any
-- model; its base model's rows carry the control's verdict (control_model_id, control_verdict), and
-- holds_for_control is true where the claim holds for both: such a finding says little about what
-- training taught the model.
-- profile: the model's last `attn-warehouse reproduce` (quick: reduced sizes; paper: the papers'
-- settings), or `run` for results of plain runs at the corpora's default sizes.
CREATE OR REPLACE VIEW reproduction_scorecard AS
WITH judged_models AS (
    SELECT model_id, model, source
    FROM stg_models
    WHERE model_id NOT IN (SELECT tuned_model_id FROM int_finetuned_models)
),
-- materialized: the control's rows join the same judgments, and each read of them re-plans every judge
judgments AS MATERIALIZED (
    SELECT
        c.paper,
        c.claim,
        c.claim_order,
        c.result,
        c.chart,
        c.section,
        c.quote,
        m.model,
        m.model_id,
        m.source,
        j.corpus,
        c.paper_value,
        c.paper_text,
        c.unit,
        j.value AS model_value,
        j.value_low,
        j.value_high,
        coalesce(j.verdict, 'missing') AS verdict,
        coalesce(j.reason, 'needs ' || c.needs) AS reason,
        j.n
    FROM stg_claims AS c
    CROSS JOIN judged_models AS m
    LEFT JOIN claim_judgments AS j ON j.claim = c.claim AND j.model_id = m.model_id
)
SELECT
    j.* EXCLUDE (source),
    coalesce(r.profile, 'run') AS profile,
    k.model_id AS control_model_id,
    k.verdict AS control_verdict,
    coalesce(j.verdict = 'holds' AND k.verdict = 'holds', false) AS holds_for_control
FROM judgments AS j
LEFT JOIN stg_reproductions AS r USING (model_id)
LEFT JOIN judgments AS k
    ON k.source = 'random-init:' || j.source AND k.claim = j.claim
    AND (k.corpus IS NOT DISTINCT FROM j.corpus OR (k.corpus IS NULL AND j.corpus IS NOT NULL))
ORDER BY j.model_id, j.claim_order, j.corpus;
