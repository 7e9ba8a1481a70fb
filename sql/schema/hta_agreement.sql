-- Agreement of the weightings of the maps with HTA (GlobEnc, Modarressi et al. 2022; Pascual et al.
-- 2021; docs/methods.md §3.9): per (example, layer, weighting, aggregation) the mean over the example's
-- query rows ([CLS] and [SEP] included) of the Spearman correlation between the weighting's map at the
-- layer and HTA's input contribution at the layer (every head's context at once, rows summing to 1), each
-- row over every key of the example. aggregation: per_layer, the layer's own map (heads averaged), as
-- GlobEnc's reference code compares it; rolled_out, the maps of layers 1..layer multiplied through, an
-- input attribution like HTA (compute/weightings.py AGGREGATIONS). Written by the HTA facts asset from
-- the forward it runs per example (compute/compare/hta_agreement.py).
-- spearman: null where no row has a correlation; n_rows: the query rows that have one. hta_method: the
-- method of the input contribution, as in hta_correlations.
CREATE TABLE IF NOT EXISTS hta_agreement (
    model_id VARCHAR NOT NULL,
    corpus VARCHAR NOT NULL,
    example_id INTEGER NOT NULL,
    layer SMALLINT NOT NULL,
    weighting VARCHAR NOT NULL,        -- attention | norm | rollout | globenc | alti | value_zeroing
    aggregation VARCHAR NOT NULL,      -- per_layer | rolled_out
    spearman FLOAT,
    n_rows SMALLINT NOT NULL,
    hta_method VARCHAR NOT NULL
);
-- rows written before the aggregation column compared the rolled-out maps
ALTER TABLE hta_agreement ADD COLUMN IF NOT EXISTS aggregation VARCHAR DEFAULT 'rolled_out';
