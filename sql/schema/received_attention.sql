-- Kovaleva §4.4 / §4.5: per (example, token, layer, head) the attention the token receives:
-- its column sum over the n query rows divided by n (sums to 1 over an example's tokens),
-- and the weight the [CLS] row gives it. position is the 0-based piece index of `tokens`.
CREATE TABLE IF NOT EXISTS received_attention (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    position SMALLINT NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    received FLOAT NOT NULL,
    from_cls FLOAT                     -- NaN when the example has no [CLS]
);
