-- Clark et al. §3.1: attention to the current, previous and next token; the paper finds
-- four heads above 0.5 on the previous token and five on the next in BERT-base.
CREATE OR REPLACE VIEW clark_relative_position AS
SELECT
    model,
    model_id,
    corpus,
    layer,
    head,
    to_self,
    to_prev,
    to_next,
    to_prev > 0.5 AS mostly_previous,
    to_next > 0.5 AS mostly_next,
    n_examples,
    relative_depth
FROM int_head_attention_means;
