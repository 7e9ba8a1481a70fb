-- Clark et al. Fig. 6 colours heads by the behaviours of §3, found here by rules on the head's
-- corpus means (int_head_attention_means' default rows, mean_over = 'examples': the mean of
-- per-example means, docs/methods.md §3.1), the first that holds:
--   previous / next: more than half of the attention on the previous / next token (§3.1);
--   [CLS]/[SEP]: more than half on [CLS] and [SEP] together (§3.2);
--   broad: mean row entropy at least 3/4 of a uniform row's over the same tokens (§3.3: "very
--   broad attention", at most ~10% of the mass on any single word);
--   other: none of these.
CREATE OR REPLACE VIEW int_head_behaviours AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    CASE
        WHEN to_prev > 0.5 THEN 'previous'
        WHEN to_next > 0.5 THEN 'next'
        WHEN to_cls + to_sep > 0.5 THEN '[CLS]/[SEP]'
        WHEN entropy >= 0.75 * uniform_entropy THEN 'broad'
        ELSE 'other'
    END AS behaviour,
    to_prev,
    to_next,
    to_cls + to_sep AS to_special,
    entropy / uniform_entropy AS relative_entropy,
    relative_depth,
    mean_over
FROM int_head_attention_means
WHERE mean_over = 'examples';
