-- Pascual et al. Fig. 4 as the paper draws it: per XNLI language, the center of mass per layer
-- (mean over heads, as pascual_center_of_mass) of that language's own model, the model registered
-- with `language` (models.language, models.toml) whose corpus xnli_<language> has rows; where no such
-- model has rows (on a corpus, for a kind), of every model with rows on it. `language_model` says
-- whether the line is drawn by the language's own model.
CREATE OR REPLACE VIEW pascual_language_center_of_mass AS
WITH layers AS (
    SELECT
        model,
        model_id,
        corpus,
        scope,
        layer,
        kind,
        avg(center_of_mass) AS center_of_mass,
        min(center_of_mass) AS min_head_center_of_mass,
        max(center_of_mass) AS max_head_center_of_mass,
        relative_depth
    FROM int_head_centers_of_mass
    WHERE starts_with(corpus, 'xnli_')
    GROUP BY ALL
),

flagged AS (
    SELECT
        layers.*,
        own.model_id IS NOT NULL AS language_model
    FROM layers
    LEFT JOIN stg_models AS own
        ON own.model_id = layers.model_id AND 'xnli_' || own.language = layers.corpus
)

SELECT
    substr(corpus, length('xnli_') + 1) AS language,
    corpus,
    model,
    model_id,
    language_model,
    scope,
    layer,
    kind,
    center_of_mass,
    min_head_center_of_mass,
    max_head_center_of_mass,
    relative_depth
FROM flagged
QUALIFY language_model OR NOT bool_or(language_model) OVER (PARTITION BY corpus, kind);
