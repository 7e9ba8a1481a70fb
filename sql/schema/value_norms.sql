-- Value-vector norms (Kobayashi et al. 2020, docs/methods.md §3.9): per (example, layer, head, token
-- class) the mean over the example's tokens of that class of ||f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h)
-- W_O^h, the value vector through the head's slice of the output projection (its bias left out): how
-- much a token can contribute to the head's output, before the attention weight scales it. Written by
-- the facts asset when its run config `weightings` includes norm. Layers and heads are 1-based.
-- token_class: cls ([CLS]), sep ([SEP]), punct ('.' and ','), content (every other real token); a
-- class without tokens in the example has no row. (Rows written before [CLS] and [SEP] were apart
-- have token_class 'special' for both.)
CREATE TABLE IF NOT EXISTS value_norms (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    token_class VARCHAR NOT NULL,
    mean_norm FLOAT NOT NULL,
    n_tokens SMALLINT NOT NULL       -- the example's tokens of the class
);
