-- Per (example, layer, head) attention summaries (docs/methods.md §3). Layers and heads are 1-based.
-- Masses are means over the n query rows; to_prev/to_next too (a missing neighbour counts as 0).
CREATE TABLE IF NOT EXISTS head_summaries (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    n_tokens SMALLINT NOT NULL,
    to_cls FLOAT,
    to_sep FLOAT,
    to_punct FLOAT,
    to_self FLOAT,
    to_prev FLOAT,
    to_next FLOAT,
    sep_to_sep FLOAT,                  -- mean over [SEP] query rows of their mass to [SEP]
    entropy FLOAT,                     -- mean row entropy, nats
    cls_entropy FLOAT,                 -- entropy of the [CLS] row, nats
    row_sum_error FLOAT                -- max |sum of a row - 1|, a sanity figure
);
-- Kovaleva §4.1 pattern class of the map (vertical | diagonal | vertical+diagonal | block |
-- heterogeneous) by the rules of compute/metrics.py pattern_classes; the thresholds are the fact
-- asset's `pattern_thresholds` metadata.
ALTER TABLE head_summaries ADD COLUMN IF NOT EXISTS pattern VARCHAR;
-- What the maps are (docs/methods.md §3.9): attention (the weights themselves), norm (Kobayashi et al.
-- 2020: alpha_ij ||f_h(x_j)||, rows renormalized) or rollout (Abnar and Zuidema 2020: one map per
-- layer, stored with head = 0). The facts asset's run config `weightings` says which are written;
-- rows written before this column are attention's. stg_head_summaries shows the attention rows (every
-- view written before the other weightings reads it); stg_weighted_head_summaries shows them all.
ALTER TABLE head_summaries ADD COLUMN IF NOT EXISTS weighting VARCHAR DEFAULT 'attention';
