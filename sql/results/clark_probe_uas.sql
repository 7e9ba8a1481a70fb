-- Clark et al. Table 3: UAS of the dependency probing classifiers (trained on UD EWT dev,
-- scored on UD EWT test, punctuation excluded), next to the paper's BERT-base numbers on
-- PTB/Stanford Dependencies (a reference, not a target: other models, other treebank).
CREATE OR REPLACE VIEW clark_probe_uas AS
WITH paper (probe, paper_label, paper_uas) AS (
    VALUES
        ('right_branching', 'Right-branching', 26.0),
        ('distance_words', 'Distances + GloVe', 58.0),
        ('random_init_attn_words', 'Random Init Attn + GloVe', 30.0),
        ('attn', 'Attn', 61.0),
        ('attn_words', 'Attn + GloVe', 77.0)
)
SELECT
    p.model,
    p.model_id,
    p.corpus,
    p.probe,
    100 * p.uas AS uas,
    paper.paper_label,
    paper.paper_uas::DOUBLE AS paper_uas,
    p.word_vectors,
    p.n_words,
    p.train_corpus,
    p.n_train_sentences,
    p.word_mode,
    p.epochs,
    p.seed,
    p.seconds
FROM stg_probe_scores AS p
LEFT JOIN paper USING (probe);
