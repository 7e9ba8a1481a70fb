-- Every paper claim's verdict for every judged model side by side: one row per (claim, model),
-- read from reproduction_scorecard, which the CLI (`attn-warehouse scorecard --matrix`) and the
-- report pivot into a claims x models table. It stays long because a view's columns cannot follow
-- the registered models: a PIVOT names its columns once, when the view is created.
--
-- One cell per (claim, model), also for a claim judged on several corpora (a Kovaleva claim per
-- GLUE task, a Pascual claim per language). The corpora that judged it (holds, fails,
-- inconclusive) decide: their verdict when they agree, `mixed` when they do not. A claim that no
-- corpus judged is `not comparable` where one corpus says so, else `missing`. `corpora` lists every
-- corpus with its own verdict; model_value, n and reason are the deciding corpus's own when one
-- corpus decides, else model_value and n are null and reason is each deciding corpus's, in turn.
--
-- A random-weights control is a model registered as 'random-init:' || its base model's source (and
-- '@seed=<n>' for a seed other than 0, compute/controls.py): control_of is that base source,
-- base_model_id the base's model_id where it is registered. Rows come in the matrix's column order:
-- models by name, each model's controls right after it (where the base is not registered, where it
-- would be). control_verdict: for a model with a registered seed-0 control, that control's verdict
-- of the claim, as reproduction_scorecard pairs them (holds for both: the claim says little about
-- what training taught).
CREATE OR REPLACE VIEW scorecard_matrix AS
WITH judged AS (
    SELECT
        *,
        verdict IN ('holds', 'fails', 'inconclusive') AS judges
    FROM reproduction_scorecard
),
deciding AS (
    SELECT
        *,
        judges OR NOT bool_or(judges) OVER (PARTITION BY model_id, claim) AS decides
    FROM judged
),
-- materialized: the controls' cells join the same cells, and each read re-plans every judge
cells AS MATERIALIZED (
    SELECT
        paper,
        claim,
        claim_order,
        result,
        chart,
        quote,
        paper_value,
        paper_text,
        model,
        model_id,
        profile,
        CASE
            WHEN starts_with(model, 'random-init:')
                THEN regexp_replace(substr(model, length('random-init:') + 1), '@seed=\d+$', '')
        END AS control_of,
        CASE
            WHEN count(DISTINCT verdict) FILTER (decides) = 1 THEN any_value(verdict) FILTER (decides)
            WHEN bool_and(judges) FILTER (decides) THEN 'mixed'
            WHEN bool_or(verdict = 'not comparable') THEN 'not comparable'
            ELSE 'missing'
        END AS verdict,
        count(corpus) AS n_corpora,
        string_agg(corpus || ' ' || verdict, '; ' ORDER BY corpus) AS corpora,
        CASE WHEN count(*) FILTER (decides) = 1 THEN any_value(model_value) FILTER (decides) END AS model_value,
        CASE WHEN count(*) FILTER (decides) = 1 THEN any_value(n) FILTER (decides) END AS n,
        CASE
            WHEN count(*) FILTER (decides) = 1 THEN any_value(reason) FILTER (decides)
            ELSE string_agg(corpus || ': ' || reason, '; ' ORDER BY corpus) FILTER (decides)
        END AS reason
    FROM deciding
    GROUP BY ALL
)
SELECT
    c.*,
    base.model_id AS base_model_id,
    control.verdict AS control_verdict
FROM cells AS c
LEFT JOIN stg_models AS base ON base.model = c.control_of
LEFT JOIN cells AS control ON control.model = 'random-init:' || c.model AND control.claim = c.claim
ORDER BY coalesce(c.control_of, c.model), c.control_of IS NOT NULL, c.model, c.claim_order;
