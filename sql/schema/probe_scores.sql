-- Clark §5, Table 3: dependency-head probing classifiers trained on train_corpus (UD EWT
-- dev, or file:<name> of the run config's train_file) and scored on `corpus` (UD EWT test) by
-- UAS over the words whose head is another word (Clark §5: a distribution "over other words in
-- the sentence"; Table 1's 'All' set): punctuation (UPOS PUNCT) and root words excluded. ROOT
-- is a candidate head. One row per probe.
-- probe: right_branching | attn | attn_words | distance_words | random_init_attn_words
-- word_vectors: none | input_embeddings (the model's own, mean over a word's pieces; not GloVe)
--   | file:<name> (the run config's word_vectors_file, e.g. GloVe)
CREATE TABLE IF NOT EXISTS probe_scores (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    probe VARCHAR NOT NULL,
    word_vectors VARCHAR NOT NULL,
    uas DOUBLE NOT NULL,               -- fraction of scored words with the gold head
    n_words INTEGER NOT NULL,          -- scored test words
    n_correct INTEGER NOT NULL,
    train_loss DOUBLE,                 -- last epoch's mean cross-entropy per word (null: no training)
    seconds DOUBLE NOT NULL,           -- training + scoring (and the random-init forward passes)
    train_corpus VARCHAR NOT NULL,
    n_train_sentences INTEGER NOT NULL,
    n_test_sentences INTEGER NOT NULL,
    word_mode VARCHAR NOT NULL,
    epochs INTEGER NOT NULL,
    learning_rate DOUBLE NOT NULL,
    seed INTEGER NOT NULL,
    torch_threads INTEGER NOT NULL
);
-- The attention-and-words probes (attn_words, random_init_attn_words) learn only W and U, as
-- Clark §5; true: they also learned a bias per map (run config word_probe_bias). Null: written
-- before the setting was recorded (such rows learned the bias and scored root words).
ALTER TABLE probe_scores ADD COLUMN IF NOT EXISTS word_probe_bias BOOLEAN;
