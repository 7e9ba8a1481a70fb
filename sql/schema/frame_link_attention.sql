-- Kovaleva §4.2: per (frame link, layer, head) the largest attention weight between a
-- piece of the lexical unit and a piece of the frame element, in both directions (LU ->
-- FE and FE -> LU). A link is keyed by its example and word spans (as in frame_links).
CREATE TABLE IF NOT EXISTS frame_link_attention (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    target_start INTEGER NOT NULL,
    target_end INTEGER NOT NULL,
    element_start INTEGER NOT NULL,
    element_end INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    head SMALLINT NOT NULL,
    max_attention FLOAT NOT NULL
);
