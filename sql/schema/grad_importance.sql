-- Gradient importance of attention (Clark §3.2, Fig. 3): per (example, layer, head, target
-- type) the sum of |d loss / d attention weight| over the weights from the example's query
-- rows to its keys of that type, and how many weights that is (the view divides the sums).
-- target_type: sep | punct ('.' or ',') | other (every other token, [CLS] included; under
-- masked_lm a piece replaced by [MASK] or a random id counts as other).
-- loss_name: masked_lm (BERT masking of mask_probability of the content tokens, 80% [MASK],
-- 10% random, 10% kept, drawn with seed) | sequence_classification | sequence_regression
-- (the corpus's labels). Each example's loss is its own mean over its predicted tokens.
CREATE TABLE IF NOT EXISTS grad_importance (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    target_type VARCHAR NOT NULL,
    grad_sum DOUBLE NOT NULL,
    weight_count INTEGER NOT NULL,
    loss_name VARCHAR NOT NULL,
    mask_probability FLOAT,            -- masked_lm only
    seed INTEGER NOT NULL
);
