-- Gold dependency edges (dependent -> head, as surface words) under the relation names of
-- Clark et al. Table 1, one row per (relation, edge); relation 'All' holds every
-- non-punctuation UD edge, one per dependent word (the UAS edges). From UD (docs/methods.md §2):
--   dobj = obj, nn = compound, poss = nmod:poss, auxpass = aux:pass, prt = compound:prt;
--   aux also takes the infinitival `to` (UD mark, PTB tag TO; SD calls it aux);
--   `case (UD)` is UD's case as it is: the preposition (or 's) is the dependent of its noun;
--   pobj is the SD reading of the same edge: the noun (NOUN/PROPN/PRON/NUM) is the dependent of
--   its preposition (ADP). prep (SD) is the preposition's edge to the noun's UD head.
--   poss: where the possessor has a possessive 's (UD case, PTB tag POS) as a word of its own,
--   the 's stands for the possessor (Clark §4.2: "the accuracy in Table 1 counts 's as correct";
--   the released code scores the 's word), in 'All' the possessor itself.
-- The root and edges inside one surface word are not edges between words, and the two halves
-- of a multiword token ("don't" = do + n't) count once per relation and once in 'All'.
CREATE OR REPLACE VIEW int_dependency_edges AS
WITH syntactic AS (
    SELECT
        model,
        model_id,
        corpus,
        example_id,
        ud_id,
        word_index,
        head_word_index,
        relation,
        upos,
        xpos,
        replace(lower(form), '’', '''') AS form
    FROM stg_dependencies
),
surface_edges AS (
    SELECT
        *,
        -- the first half of a multiword token whose head lies outside it stands for the word in 'All'
        row_number() OVER (PARTITION BY model_id, corpus, example_id, word_index ORDER BY ud_id) = 1 AS first_half
    FROM syntactic
    WHERE head_word_index IS NOT NULL AND head_word_index <> word_index
),
word_upos AS (
    SELECT model_id, corpus, example_id, word_index, arg_min(upos, ud_id) AS upos
    FROM syntactic
    GROUP BY ALL
),
possessive_marker AS (
    SELECT model_id, corpus, example_id, head_word_index AS possessor_word, min(word_index) AS marker_word
    FROM surface_edges
    WHERE relation = 'case' AND (xpos = 'POS' OR (xpos IS NULL AND form IN ('''s', '''')))
    GROUP BY ALL
),
ud_labelled AS (
    SELECT
        e.model,
        e.model_id,
        e.corpus,
        e.example_id,
        e.ud_id,
        CASE
            WHEN e.relation = 'nmod:poss' THEN coalesce(p.marker_word, e.word_index)
            ELSE e.word_index
        END AS dependent_word,
        e.head_word_index AS head_word,
        e.relation AS ud_relation,
        CASE
            WHEN e.relation = 'mark' AND (e.xpos = 'TO' OR (e.upos = 'PART' AND e.form = 'to')) THEN 'aux'
            WHEN e.relation = 'obj' THEN 'dobj'
            WHEN e.relation = 'compound' THEN 'nn'
            WHEN e.relation = 'nmod:poss' THEN 'poss'
            WHEN e.relation = 'aux:pass' THEN 'auxpass'
            WHEN e.relation = 'compound:prt' THEN 'prt'
            WHEN e.relation = 'case' THEN 'case (UD)'
            ELSE e.relation
        END AS relation
    FROM surface_edges AS e
    LEFT JOIN possessive_marker AS p
        ON p.model_id = e.model_id
        AND p.corpus = e.corpus
        AND p.example_id = e.example_id
        AND p.possessor_word = e.word_index
        AND p.marker_word <> e.head_word_index
),
prepositions AS (
    SELECT c.*, n.head_word_index AS noun_head_word, n.relation AS noun_relation
    FROM surface_edges AS c
    JOIN word_upos AS u
        ON u.model_id = c.model_id
        AND u.corpus = c.corpus
        AND u.example_id = c.example_id
        AND u.word_index = c.head_word_index
    LEFT JOIN surface_edges AS n
        ON n.model_id = c.model_id
        AND n.corpus = c.corpus
        AND n.example_id = c.example_id
        AND n.word_index = c.head_word_index
        AND n.first_half
    WHERE c.relation = 'case' AND c.upos = 'ADP' AND u.upos IN ('NOUN', 'PROPN', 'PRON', 'NUM')
),
labelled AS (
    SELECT model, model_id, corpus, example_id, ud_id, dependent_word, head_word, ud_relation, relation
    FROM ud_labelled
    UNION ALL
    SELECT model, model_id, corpus, example_id, ud_id, head_word_index, word_index, 'case', 'pobj'
    FROM prepositions
    UNION ALL
    SELECT model, model_id, corpus, example_id, ud_id, word_index, noun_head_word, 'case', 'prep'
    FROM prepositions
    WHERE noun_head_word IS NOT NULL AND noun_head_word <> word_index
    UNION ALL
    SELECT model, model_id, corpus, example_id, ud_id, word_index, head_word_index, relation, 'All'
    FROM surface_edges
    WHERE first_half AND upos <> 'PUNCT'
)
SELECT model, model_id, corpus, example_id, relation, dependent_word, head_word, ud_relation
FROM labelled
QUALIFY row_number() OVER (
    PARTITION BY model_id, corpus, example_id, relation, dependent_word, head_word ORDER BY ud_id
) = 1;
