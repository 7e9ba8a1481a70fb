-- A model's reproduction profile; storage/model_rows.py record_reproduction first deletes the row it
-- replaces, in the same transaction.
INSERT INTO reproductions BY NAME
SELECT
    $model_id AS model_id,
    $profile AS profile,
    now()::TIMESTAMP AS reproduced_at;
