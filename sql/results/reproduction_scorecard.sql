-- The verdict of every paper claim (sql/claims/*.yaml) for every pre-trained model: the paper's
-- number beside the model's, per corpus the claim was judged on. verdict: holds | fails |
-- not comparable (the claim does not apply to this model, reason says why) | missing (no rows
-- to judge: reason says what the model needs). A fine-tuned checkpoint is judged through its
-- base model (the Kovaleva claims read the base's fine-tuned rows), so it has no rows of its own.
-- profile: the model's last `attn-warehouse reproduce` (quick: reduced sizes; paper: the papers'
-- settings), or `run` for results of plain runs at the corpora's default sizes.
CREATE OR REPLACE VIEW reproduction_scorecard AS
WITH judged_models AS (
    SELECT model_id, model
    FROM stg_models
    WHERE model_id NOT IN (SELECT tuned_model_id FROM int_finetuned_models)
),
judgments AS (
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
        j.corpus,
        c.paper_value,
        c.paper_text,
        j.value AS model_value,
        coalesce(j.verdict, 'missing') AS verdict,
        coalesce(j.reason, 'needs ' || c.needs) AS reason,
        j.n
    FROM stg_claims AS c
    CROSS JOIN judged_models AS m
    LEFT JOIN claim_judgments AS j ON j.claim = c.claim AND j.model_id = m.model_id
)
SELECT
    j.*,
    coalesce(r.profile, 'run') AS profile
FROM judgments AS j
LEFT JOIN stg_reproductions AS r USING (model_id)
ORDER BY j.model_id, j.claim_order, j.corpus;
