-- Pascual et al. Fig. 4 as the paper draws it: per XNLI language, the center of mass per layer
-- (mean over heads, as pascual_center_of_mass) of that language's own model, the model registered
-- with `language` (models.language, models.toml) whose corpus xnli_<language> has rows; where no such
-- model has rows (on a corpus, for a kind), of every model with rows on it. `language_model` says
-- whether the line is drawn by the language's own model.
CREATE OR REPLACE VIEW pascual_language_center_of_mass AS
WITH flagged AS (
    SELECT
        layers.*,
        own.model_id IS NOT NULL AS language_model
    FROM int_layer_centers_of_mass AS layers
    LEFT JOIN stg_models AS own
        ON own.model_id = layers.model_id AND 'xnli_' || own.language = layers.corpus
    WHERE starts_with(layers.corpus, 'xnli_')
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
