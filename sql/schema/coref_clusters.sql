-- Coreference clusters as seen inside one example (window): size and first word.
CREATE TABLE IF NOT EXISTS coref_clusters (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    cluster_id VARCHAR NOT NULL,
    n_mentions INTEGER NOT NULL,
    first_word INTEGER NOT NULL
);
