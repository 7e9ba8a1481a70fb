-- Kovaleva §4.2 FrameNet links: a target (lexical unit) and one of its core frame elements
-- (<= 3 words), >= 2 words apart, in sentences of <= 12 words. Spans are [start, end) words.
CREATE TABLE IF NOT EXISTS frame_links (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    frame VARCHAR NOT NULL,
    lexical_unit VARCHAR NOT NULL,
    target_start INTEGER NOT NULL,
    target_end INTEGER NOT NULL,
    element VARCHAR NOT NULL,
    element_start INTEGER NOT NULL,
    element_end INTEGER NOT NULL,
    distance INTEGER NOT NULL          -- words between the nearest ends (adjacent = 1)
);
