-- Clark Figs. 1 and 5 (docs/methods.md §3.8): the whole attention map of every head for the
-- corpus's first 2 examples in example_id order (HEAD_MAP_EXAMPLES of compute/fact_kinds.py) and
-- the first example with each Fig. 5 relation (dobj, det, poss, auxpass, pobj; a coreferent
-- mention), kept_examples of them in all, from the same pass as the other facts, so the
-- maps of the heads the results views name (clark_head_example_maps) can be drawn. Padding is
-- left out: an example of n tokens has n rows per head.
-- Stored dense: one row per (example, layer, head, query); attention[k + 1] (1-based list) is the
-- weight of the query on key position k (0-based, as tokens.position), so the list has n
-- entries and sums to 1. stg_head_example_maps unnests it to one row per (query, key).
CREATE TABLE IF NOT EXISTS head_example_maps (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL, -- 1-based
    head SMALLINT NOT NULL, -- 1-based
    query SMALLINT NOT NULL, -- 0-based token position of the attending token
    attention FLOAT[] NOT NULL, -- the query's weights over the key positions 0..n-1
    kept_examples SMALLINT NOT NULL -- how many examples' maps the pass kept
);
