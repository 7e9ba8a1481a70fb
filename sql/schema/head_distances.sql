-- Clark §6: Jensen-Shannon divergence between the attention distributions of every pair of
-- heads, summed over every query token of the corpus (natural log). One row per unordered pair,
-- head a before head b in (layer, head) order. Heads are 1-based.
CREATE TABLE IF NOT EXISTS head_distances (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    layer_a SMALLINT NOT NULL,
    head_a SMALLINT NOT NULL,
    layer_b SMALLINT NOT NULL,
    head_b SMALLINT NOT NULL,
    js_sum DOUBLE NOT NULL,            -- sum over tokens of JS(head a's row, head b's row)
    tokens BIGINT NOT NULL             -- query rows summed over
);
