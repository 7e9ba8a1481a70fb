-- Relative-position (sum, count) histograms of attention (kind = attention) and of the HTA input
-- contribution (kind = contribution) as one relation, the way the histogram views read them.
--
-- Why two tables and not one: the attention pass writes position_histograms and the HTA asset
-- writes contribution_histograms, each by replacing its (model_id, corpus) partition of its own
-- table; in one shared table either write would delete the other's rows of that partition. DuckDB
-- cannot define one table from the other without losing the NOT NULL constraints (CREATE TABLE AS
-- drops them; CREATE TABLE ... (LIKE ...) is not supported), so contribution_histograms.sql keeps
-- its own column list and documents only what differs. This view is the one place that unions
-- them; the HTA run parameter hta_method is left out, as each partition holds one method.
CREATE OR REPLACE VIEW int_position_histograms AS
SELECT model, model_id, corpus, example_id, kind, scope, layer, head, "offset", weight_sum, pair_count, (layer - 0.5) / n_layers AS relative_depth
FROM stg_position_histograms
UNION ALL
SELECT model, model_id, corpus, example_id, kind, scope, layer, head, "offset", weight_sum, pair_count, (layer - 0.5) / n_layers AS relative_depth
FROM stg_contribution_histograms;
