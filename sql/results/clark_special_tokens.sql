-- Clark et al. Fig. 2: mean attention of each head to [CLS], [SEP], '.'/',' (top) and
-- from [SEP] to [SEP] (bottom). Compare to_sep in layers 6-10 of BERT-base (> 0.5).
CREATE OR REPLACE VIEW clark_special_tokens AS
SELECT model, model_id, corpus, layer, head, to_cls, to_sep, to_punct, sep_to_sep, n_examples, relative_depth
FROM int_head_attention_means;
