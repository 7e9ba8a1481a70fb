-- Gold dependency edges (dependent -> head, as surface words) with the relation names of
-- Clark et al. Table 1 (METHODS §2): UD names where the paper has no other. The root and
-- edges inside one surface word (the two halves of "don't") are not edges between words.
CREATE OR REPLACE VIEW int_dependency_edges AS
SELECT
    model,
    model_id,
    corpus,
    example_id,
    word_index AS dependent_word,
    head_word_index AS head_word,
    relation AS ud_relation,
    CASE relation
        WHEN 'obj' THEN 'dobj'
        WHEN 'compound' THEN 'nn'
        WHEN 'nmod:poss' THEN 'poss'
        WHEN 'aux:pass' THEN 'auxpass'
        WHEN 'compound:prt' THEN 'prt'
        -- the preposition (UD dependent) attending to its noun (UD head)
        WHEN 'case' THEN 'pobj'
        ELSE relation
    END AS relation,
    upos
FROM stg_dependencies
WHERE head_word_index IS NOT NULL AND head_word_index <> word_index;
