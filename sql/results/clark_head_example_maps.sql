-- Clark et al. Fig. 1 ("Examples of heads exhibiting the patterns discussed in Section 3") and
-- Fig. 5 ("BERT attention heads that correspond to linguistic phenomena"): the whole maps of the
-- heads each figure names, per (model, corpus), on the examples whose maps the pass kept
-- (stg_head_example_maps: the corpus's first examples by example_id, and the first with each Fig. 5
-- relation), with the
-- tokens on both axes. role says what the head is named for, score its value:
--   Fig. 1, from the head means (int_head_attention_means, mean_over = 'examples'): 'broad', the
--     largest mean row entropy (nats); 'next token', the largest to_next; '[SEP]', the largest
--     to_sep; '. and ,', the largest to_punct (masses);
--   Fig. 5: the best head of a relation, either direction (int_dependency_head_accuracy, ranked as
--     clark_dependency_heads ranks them), for dobj, det, poss, auxpass and pobj (SD names), and
--     'coreference', the best head over all mention types (int_coref_head_accuracy); score is the
--     accuracy, direction the direction it was scored in. BERT-base on WSJ / CoNLL-2012: dobj
--     8-10 (86.8), det 8-11 (94.3), poss 7-6 (80.5), auxpass 4-10 (82.5), pobj 9-6 (76.3),
--     coreference 5-4 (65.1).
-- Ties go to the lower layer, then head. gold_links (Fig. 5): the example's gold edges of the
-- relation (int_dependency_edges), or its coreferent mentions, so a map that shows the relation
-- can be told from one that cannot; NULL for Fig. 1.
CREATE OR REPLACE VIEW clark_head_example_maps AS
WITH pattern_scores AS (
    SELECT
        h.model_id,
        h.corpus,
        r.role,
        h.layer,
        h.head,
        CASE r.role
            WHEN 'broad' THEN h.entropy
            WHEN 'next token' THEN h.to_next
            WHEN '[SEP]' THEN h.to_sep
            ELSE h.to_punct
        END AS score
    FROM int_head_attention_means AS h
    CROSS JOIN (VALUES ('broad'), ('next token'), ('[SEP]'), ('. and ,')) AS r (role)
    WHERE h.mean_over = 'examples'
),
named_heads AS (
    SELECT
        model_id,
        corpus,
        'Fig. 1' AS figure,
        role,
        layer,
        head,
        score,
        NULL::VARCHAR AS direction,
        NULL::VARCHAR AS word_mode
    FROM pattern_scores
    QUALIFY row_number() OVER (PARTITION BY model_id, corpus, role ORDER BY score DESC, layer, head) = 1
    UNION ALL
    SELECT model_id, corpus, 'Fig. 5', relation, layer, head, accuracy, direction, word_mode
    FROM int_dependency_head_accuracy
    WHERE relation IN ('dobj', 'det', 'poss', 'auxpass', 'pobj')
    QUALIFY row_number() OVER (
        PARTITION BY model_id, corpus, word_mode, relation ORDER BY accuracy DESC, layer, head, direction
    ) = 1
    UNION ALL
    SELECT model_id, corpus, 'Fig. 5', 'coreference', layer, head, accuracy, NULL, word_mode
    FROM int_coref_head_accuracy
    WHERE mention_type = 'all'
    QUALIFY row_number() OVER (PARTITION BY model_id, corpus, word_mode ORDER BY accuracy DESC, layer, head) = 1
),
gold_links AS (
    SELECT model_id, corpus, example_id, relation AS role, count(*) AS gold_links
    FROM int_dependency_edges
    WHERE relation IN ('dobj', 'det', 'poss', 'auxpass', 'pobj')
    GROUP BY ALL
    UNION ALL
    SELECT model_id, corpus, example_id, 'coreference', count(DISTINCT mention_id)
    FROM int_coref_antecedents
    GROUP BY ALL
)
SELECT
    m.model,
    m.model_id,
    m.corpus,
    n.figure,
    n.role,
    m.layer,
    m.head,
    n.score,
    n.direction,
    n.word_mode,
    m.example_id,
    m.query,
    m.key,
    q.token AS query_token,
    k.token AS key_token,
    m.attention,
    CASE WHEN n.figure = 'Fig. 5' THEN coalesce(g.gold_links, 0) END AS gold_links,
    m.kept_examples,
    (m.layer - 0.5) / m.n_layers AS relative_depth
FROM named_heads AS n
JOIN stg_head_example_maps AS m
    ON m.model_id = n.model_id AND m.corpus = n.corpus AND m.layer = n.layer AND m.head = n.head
JOIN stg_tokens AS q
    ON q.model_id = m.model_id AND q.corpus = m.corpus AND q.example_id = m.example_id AND q.position = m.query
JOIN stg_tokens AS k
    ON k.model_id = m.model_id AND k.corpus = m.corpus AND k.example_id = m.example_id AND k.position = m.key
LEFT JOIN gold_links AS g
    ON g.model_id = m.model_id AND g.corpus = m.corpus AND g.example_id = m.example_id AND g.role = n.role;
