-- Word <-> piece alignment: the corpus's own words and the pieces [piece_start, piece_end)
-- overlapping them, from the tokenizer's character offsets (a piece crossing a word
-- boundary is shared by both words).
CREATE TABLE IF NOT EXISTS words (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    segment TINYINT NOT NULL,
    word_index INTEGER NOT NULL,       -- 0-based over both segments of the example
    word VARCHAR NOT NULL,
    char_start INTEGER NOT NULL,       -- offsets into the segment's text
    char_end INTEGER NOT NULL,
    piece_start SMALLINT,              -- null when no piece overlaps the word
    piece_end SMALLINT                 -- exclusive
);
