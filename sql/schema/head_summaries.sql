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
