-- Relative-position histograms of attention (Clark §3, Pascual), stored dense: one row per
-- (example, scope, layer, head) holding the whole histogram as two lists over the offsets
-- -m..m (offset = key - query, m the largest offset a pair of the scope reaches), so element i
-- (1-based) is offset i - 1 - (len - 1) / 2. stg_position_histograms unnests them back to one
-- row per (example, scope, layer, head, offset) with weight_sum and pair_count, the grain every
-- view reads; offsets no pair reaches (pair_count 0) have no staged row.
-- scope: all (every token) or content (special tokens neither query nor key).
-- pair_counts: the number of (query, key) pairs at each offset (the same for every head).
-- mean_weights_plus_one: 1 + the mean attention weight of those pairs, weight_sum / pair_count
-- (1 where pair_count is 0). Every value lies in [1, 2), where a FLOAT has one exponent and a
-- fixed step of 2^-23, so the mean is kept to +-2^-24 (6e-8) absolute and DuckDB's ALP-RD
-- stores it in ~20 bits; the staged weight_sum is (value - 1) * pair_count. A view's mean over
-- examples is a pair-weighted mean of these means, so it keeps the same 6e-8.
-- The attention pass writes this table, so its kind is attention (a column of the staged rows);
-- the HTA input contribution has the same shape in contribution_histograms, and
-- int_position_histograms unions the two.
CREATE TABLE IF NOT EXISTS position_histograms (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    scope VARCHAR NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    pair_counts SMALLINT[] NOT NULL,
    mean_weights_plus_one FLOAT[] NOT NULL
);
