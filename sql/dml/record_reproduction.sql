-- A model's reproduction profile, finished or (a quick one) started; storage/model_rows.py
-- record_reproduction first deletes the rows it replaces, in the same transaction.
INSERT INTO reproductions BY NAME
SELECT
    $model_id AS model_id,
    $profile AS profile,
    now()::TIMESTAMP AS reproduced_at,
    $finished AS finished;
