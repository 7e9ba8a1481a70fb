-- Relative-position histograms of attention (Clark §3, Pascual), stored dense: one row per
-- (example, scope, layer, head) holding the whole histogram as two lists over the offsets
-- -m..m (offset = key - query, m the largest offset a pair of the scope reaches), so element i
-- (1-based) is offset i - 1 - (len - 1) / 2. stg_position_histograms unnests them back to one
-- row per (example, scope, layer, head, offset) with weight_sum and pair_count, the grain every
-- view reads; offsets no pair reaches (pair_count 0) have no staged row.
-- scope: all (every token) or content (special tokens neither query nor key).
-- pair_counts: the number of (query, key) pairs at each offset. It is the same for every head of
-- an (example, scope), so only the row of its first head (layer 1, head 1, the lowest written)
-- holds it; the others have NULL, and stg_position_histograms takes it from that row.
-- one_plus_sqrt_mean_weights: 1 + the square root of the mean attention weight of those pairs,
-- m = weight_sum / pair_count (1 where pair_count is 0), rounded once to FLOAT. Every value lies
-- in [1, 2], where a FLOAT has one exponent and a fixed step of 2^-23, so DuckDB's ALP-RD stores
-- it in ~21 bits instead of a free FLOAT's ~34; the square root keeps small means relatively
-- precise: m is kept to |error| <= 2^-23 * sqrt(m) (1.2e-7 at m = 1, 1.2e-9 at m = 1e-4). The
-- staged weight_sum is (value - 1)^2 * pair_count. Measured on the MiniLM default warehouse
-- (bench/dense_grain_agreement.py): every results view within 2e-7 of the FLOAT weight sums.
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
    pair_counts SMALLINT[],
    one_plus_sqrt_mean_weights FLOAT[] NOT NULL
);
-- What the maps are (docs/methods.md §3.9): attention, norm or rollout (one map per layer, head = 0);
-- rows written before this column are attention's. pair_counts are the same for every weighting.
-- stg_position_histograms shows the attention rows, stg_weighted_position_histograms them all.
ALTER TABLE position_histograms ADD COLUMN IF NOT EXISTS weighting VARCHAR DEFAULT 'attention';
