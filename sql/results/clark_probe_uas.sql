-- Clark et al. Table 3: UAS of the dependency probing classifiers (trained on `train_corpus`:
-- UD EWT dev unless the probes' run config `train_file` named a CoNLL-U file; scored on UD
-- EWT test over the words whose head is another word, punctuation excluded: Table 1's 'All'
-- set), next to the paper's BERT-base numbers on PTB/Stanford Dependencies (a reference, not a
-- target: other models, other treebank).
-- `label` says which word vectors a probe used: the paper's are GloVe; `input_embeddings` are
-- the model's own input embeddings (mean over a word's pieces), not GloVe; `file:<name>` a
-- word-vector file the user gave (run config `word_vectors_file`). `word_probe_bias`: the
-- attention-and-words probes also learned a bias (the paper's learn only W and U).
CREATE OR REPLACE VIEW clark_probe_uas AS
WITH paper (probe, paper_label, paper_uas, label_prefix) AS (
    VALUES
        ('right_branching', 'Right-branching', 26.0, 'Right-branching'),
        ('distance_words', 'Distances + GloVe', 58.0, 'Distances'),
        ('random_init_attn_words', 'Random Init Attn + GloVe', 30.0, 'Random Init Attn'),
        ('attn', 'Attn', 61.0, 'Attn'),
        ('attn_words', 'Attn + GloVe', 77.0, 'Attn')
)
SELECT
    p.model,
    p.model_id,
    p.corpus,
    p.probe,
    CASE p.word_vectors
        WHEN 'none' THEN paper.label_prefix
        WHEN 'input_embeddings' THEN paper.label_prefix || ' + input embeddings'
        ELSE paper.label_prefix || ' + ' || replace(p.word_vectors, 'file:', '')
    END AS label,
    100 * p.uas AS uas,
    paper.paper_label,
    paper.paper_uas::DOUBLE AS paper_uas,
    p.word_vectors,
    p.n_words,
    p.train_corpus,
    p.n_train_sentences,
    p.word_mode,
    p.epochs,
    p.word_probe_bias,
    p.seed,
    p.seconds
FROM stg_probe_scores AS p
LEFT JOIN paper USING (probe);
