-- Clark et al. §6 / Fig. 6: Jensen-Shannon divergence between every two heads' attention rows, in
-- both orders (head_distances holds each unordered pair once, head a before head b).
-- js_sum is Clark's distance (summed over the corpus's query tokens, nats); js = js_sum / tokens is
-- the mean per token, the same up to scale and comparable across corpora.
CREATE OR REPLACE VIEW clark_head_distances AS
WITH both_orders AS (
    SELECT model, model_id, corpus, layer_a, head_a, layer_b, head_b, js_sum, tokens FROM stg_head_distances
    UNION
    SELECT model, model_id, corpus, layer_b, head_b, layer_a, head_a, js_sum, tokens FROM stg_head_distances
)
SELECT
    d.model,
    d.model_id,
    d.corpus,
    d.layer_a,
    d.head_a,
    d.layer_b,
    d.head_b,
    d.js_sum / d.tokens AS js,
    d.js_sum,
    d.tokens
FROM both_orders AS d;
