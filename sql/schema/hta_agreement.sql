-- Agreement of the weightings of the maps with HTA (GlobEnc, Modarressi et al. 2022; Pascual et al.
-- 2021; docs/methods.md §3.9): per (example, layer, weighting) the mean over the example's query rows
-- ([CLS] and [SEP] included) of the Spearman correlation between the weighting's input attribution up to
-- the layer (its maps rolled out through layers 1..layer as the method does) and HTA's input contribution
-- at the layer (every head's context at once, rows summing to 1), each row over every key of the example.
-- Written by the HTA facts asset from the forward it runs per example (compute/compare/hta_agreement.py).
-- spearman: null where no row has a correlation; n_rows: the query rows that have one. hta_method: the
-- method of the input contribution, as in hta_correlations.
CREATE TABLE IF NOT EXISTS hta_agreement (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    weighting VARCHAR NOT NULL,        -- attention | norm | rollout | globenc | alti | value_zeroing
    spearman FLOAT,
    n_rows SMALLINT NOT NULL,
    hta_method VARCHAR NOT NULL
);
