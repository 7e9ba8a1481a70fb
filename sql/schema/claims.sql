-- The papers' claims (sql/claims/*.yaml, storage/claims.py): one row per claim, rewritten whole
-- with the views, so the table always holds the registry of the code that made the views.
CREATE TABLE IF NOT EXISTS claims (
    claim VARCHAR NOT NULL,       -- id, e.g. clark_sep_layers_6_10
    claim_order INTEGER NOT NULL, -- its place in the registry (papers in order, claims in file order)
    paper VARCHAR NOT NULL,       -- clark | kovaleva | pascual
    result VARCHAR NOT NULL,      -- the paper's figure or table: Fig. 2, Table 1, §4.4
    chart VARCHAR,                -- the chart asset that draws the result
    section VARCHAR NOT NULL,     -- where in the paper the quoted sentence is
    quote VARCHAR NOT NULL,       -- the paper's sentence
    paper_value DOUBLE,           -- the paper's number for BERT-base, where it gives one
    paper_text VARCHAR NOT NULL,  -- the paper's number(s) as the paper states them
    needs VARCHAR NOT NULL        -- what a model without a judgment needs
);
-- What a claim's value rests on and is resampled over for its interval: heads, layers, tasks, examples.
ALTER TABLE claims ADD COLUMN IF NOT EXISTS unit VARCHAR;
