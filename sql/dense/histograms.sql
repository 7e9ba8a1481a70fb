-- Packs histogram rows of the flat grain (one per example, scope, layer, head and offset, with
-- weight_sum and pair_count: the rows of stg_position_histograms, and of position_histograms and
-- contribution_histograms before the dense grain) from the relation `flat_rows` into the dense
-- rows of sql/schema/position_histograms.sql (and contribution_histograms.sql): one per (example,
-- scope, layer, head, and every other column but kind), the lists over offsets -m..m, an offset
-- the rows skip getting pair count 0, the pair counts on the first (layer, head) of each (example,
-- scope) only. 1 + sqrt(mean) is computed in DOUBLE and rounded to FLOAT
-- once, as compute/batching.histogram_frame does. storage/dense_grain.py runs it.
SELECT
    COLUMNS(c -> c NOT IN ('reach', 'offsets', 'counts', 'means')),
    CASE
        WHEN (layer, head) <> min((layer, head)) OVER (PARTITION BY model_id, corpus, batch_id, example_id, scope) THEN NULL
        WHEN len(offsets) = 2 * reach + 1 THEN counts
        ELSE list_transform(range(-reach, reach + 1), o -> coalesce(counts[list_position(offsets, o)], 0))
    END::SMALLINT[] AS pair_counts,
    CASE
        WHEN len(offsets) = 2 * reach + 1 THEN means
        ELSE list_transform(range(-reach, reach + 1), o -> coalesce(means[list_position(offsets, o)], 1))
    END::FLOAT[] AS one_plus_sqrt_mean_weights
FROM (
    SELECT
        COLUMNS(c -> c NOT IN ('offset', 'weight_sum', 'pair_count', 'kind')),
        max(abs("offset"))::BIGINT AS reach,
        list("offset" ORDER BY "offset") AS offsets,
        list(pair_count ORDER BY "offset") AS counts,
        list(1 + sqrt(coalesce(weight_sum::DOUBLE / nullif(pair_count, 0), 0)) ORDER BY "offset") AS means
    FROM flat_rows
    GROUP BY ALL
)
