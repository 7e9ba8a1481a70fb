"""Clark's depth-dependent claims (and Kovaleva Fig. 5's) on models of 6, 12 and 24 layers: a head's
depth is read as the BERT-base layer at its relative depth, ceil(12 * (layer - 0.5) / n_layers - 1e-9)
(storage/claims.py), so a 6-layer model's layers stand for BERT-base layers 1, 3, 5, 7, 9, 11, a
12-layer model's for themselves, and a 24-layer model's layers 2k - 1 and 2k for BERT-base layer k
(layer 11 at 10.5 / 24, 12 * that = 5.25, is layer 6; layer 20 at 19.5 / 24, 9.75, is layer 10;
layer 21, 10.25, is 11).

The "layers 6-10" of clark_sep_layers_6_10 are layers 4-5 of a 6-layer model, 6-10 of a 12-layer
one and 11-20 of a 24-layer one; checked once through the real reproduction_scorecard (a warehouse
built by apply_views, clark_special_tokens replaced by a table of hand-made rows, the models
registered with their layer counts) and, for the other depth-dependent claims, through each
claim's judge on tables named like the views (tests/views/test_claims.py's judge_on)."""

import re

import duckdb
import polars as pl
import pytest

from dagster_project.storage.claims import load_claims
from dagster_project.storage.views import apply_views
from tests.views.test_claims import judge_on

CLAIMS = {claim.claim: claim for claim in load_claims()}
WIKI = "wiki_segments"


def depth(layer: int, n_layers: int) -> float:
    """A layer's relative depth, as int_head_attention_means computes it."""
    return (layer - 0.5) / n_layers


def head_rows(n_layers: int, model_id: str = "m", heads: int = 1, **measures) -> list[dict]:
    """One row per head of an `n_layers` model on wiki_segments; each measure a function of the layer."""
    return [
        {"model_id": model_id, "corpus": WIKI, "layer": layer, "head": head, "relative_depth": depth(layer, n_layers)}
        | {name: value(layer) for name, value in measures.items()}
        for layer in range(1, n_layers + 1)
        for head in range(1, heads + 1)
    ]


def judged(claim_id: str, views: dict[str, list[dict]]) -> dict:
    frame = judge_on(CLAIMS[claim_id], views)
    assert frame.height == 1, frame
    return frame.row(0, named=True)


# to_sep = layer / 20 on every layer. The mean over the layers at the depth of BERT-base 6-10:
# 6 layers: layers 4, 5: (4 + 5) / 2 / 20 = 0.225 (2 heads), not above 0.5;
# 12 layers: layers 6..10: 8 / 20 = 0.4 (5 heads), not above 0.5;
# 24 layers: layers 11..20: 15.5 / 20 = 0.775 (10 heads), above 0.5.
SEP_6_10 = [(6, 0.225, 2, "fails"), (12, 0.4, 5, "fails"), (24, 0.775, 10, "holds")]


def test_sep_layers_6_10_by_relative_depth_through_the_scorecard() -> None:
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    for n_layers, _, _, _ in SEP_6_10:
        conn.execute(
            "INSERT INTO models (model_id, source, resolved_path, n_layers, n_heads, takes_token_types, registered_at) "
            "VALUES (?, ?, ?, ?, 12, true, now())",
            [f"m{n_layers}", f"org/m{n_layers}", f"/m{n_layers}", n_layers],
        )
    rows = pl.DataFrame(
        [
            {"model_id": f"m{n_layers}", "corpus": WIKI, "layer": layer, "head": 1, "to_sep": layer / 20}
            for n_layers, _, _, _ in SEP_6_10
            for layer in range(1, n_layers + 1)
        ]
    )
    conn.register("case_rows", rows.to_arrow())
    # A table with the view's columns in its place, the relative depth from the models' registered
    # layer counts as int_head_attention_means computes it; the columns not given are NULL.
    conn.execute("CREATE TABLE case_special_tokens AS SELECT * FROM clark_special_tokens WHERE false")
    conn.execute("DROP VIEW clark_special_tokens")
    conn.execute("ALTER TABLE case_special_tokens RENAME TO clark_special_tokens")
    conn.execute(
        "INSERT INTO clark_special_tokens BY NAME SELECT r.*, (r.layer - 0.5) / m.n_layers AS relative_depth "
        "FROM case_rows AS r JOIN stg_models AS m USING (model_id)"
    )
    card = conn.execute(
        "SELECT model_id, corpus, model_value, verdict, n, reason FROM reproduction_scorecard "
        "WHERE claim = 'clark_sep_layers_6_10' ORDER BY model_id"
    ).pl()
    by_model = {row["model_id"]: row for row in card.iter_rows(named=True)}
    assert set(by_model) == {f"m{n_layers}" for n_layers, _, _, _ in SEP_6_10}
    for n_layers, value, n, verdict in SEP_6_10:
        row = by_model[f"m{n_layers}"]
        assert row["corpus"] == WIKI
        assert row["model_value"] == pytest.approx(value), row["reason"]
        assert (row["n"], row["verdict"]) == (n, verdict), row["reason"]
        assert f"of the {n} heads" in row["reason"]


# sep_to_sep = 0.8 + layer / 100, against 0.9: the same layers give 0.845 and 0.88 (no head above
# 0.9: fail) and 0.955 (layers 11-20 at 0.91-1.0, every head above it, so every resample: holds).
SEP_TO_SEP_6_10 = [(6, 0.845, 2, "fails"), (12, 0.88, 5, "fails"), (24, 0.955, 10, "holds")]
LAYERS_6_10 = [("clark_sep_layers_6_10", "to_sep", 0.0, 20, *case) for case in SEP_6_10] + [
    ("clark_sep_to_sep", "sep_to_sep", 0.8, 100, *case) for case in SEP_TO_SEP_6_10
]


@pytest.mark.parametrize(
    "claim_id,measure,offset,divisor,n_layers,value,n,verdict",
    LAYERS_6_10,
    ids=[f"{claim}-{n}layers" for claim, _, _, _, n, _, _, _ in LAYERS_6_10],
)
def test_layers_6_10_by_relative_depth(
    claim_id: str, measure: str, offset: float, divisor: int, n_layers: int, value: float, n: int, verdict: str
) -> None:
    rows = head_rows(n_layers, **{measure: lambda layer: offset + layer / divisor})
    row = judged(claim_id, {"clark_special_tokens": rows})
    assert row["value"] == pytest.approx(value), row["reason"]
    assert (row["n"], row["verdict"]) == (n, verdict), row["reason"]


# The layer whose heads peak (0.9, the others 0.1, twelve heads a layer, so a resample misses the
# peak layer's heads with probability under e^-12), the BERT-base layer it stands for
# (ceil(12 * (peak - 0.5) / n_layers - 1e-9)) and the verdict, at each claim's bounds: the band's top
# layer over the top layer outside it is 0.9 / 0.1 = 9 where the peak is in the band, 0.1 / 0.9 where
# it is not.
# Early (1-4): 6 layers: 2 -> ceil(3) = 3, 3 -> 5; 12 layers: 4 -> 4, 5 -> 5; 24 layers: 8 -> ceil(3.75) = 4,
# 9 -> ceil(4.25) = 5.
EARLY = [
    (6, 2, 3, "holds"),
    (6, 3, 5, "fails"),
    (12, 4, 4, "holds"),
    (12, 5, 5, "fails"),
    (24, 8, 4, "holds"),
    (24, 9, 5, "fails"),
]
# Middle (5-10): 6 layers: 2 -> 3, 3 -> 5, 5 -> 9, 6 -> 11; 12 layers: 4, 5, 10, 11 themselves;
# 24 layers: 8 -> 4, 9 -> 5, 20 -> ceil(9.75) = 10, 21 -> ceil(10.25) = 11.
MIDDLE = [
    (6, 2, 3, "fails"),
    (6, 3, 5, "holds"),
    (6, 5, 9, "holds"),
    (6, 6, 11, "fails"),
    (12, 4, 4, "fails"),
    (12, 5, 5, "holds"),
    (12, 10, 10, "holds"),
    (12, 11, 11, "fails"),
    (24, 8, 4, "fails"),
    (24, 9, 5, "holds"),
    (24, 20, 10, "holds"),
    (24, 21, 11, "fails"),
]
# Deep (11-12, after the middle): 6 layers: 5 -> 9, 6 -> 11; 12 layers: 10, 11; 24 layers:
# 20 -> ceil(9.75) = 10, 21 -> ceil(10.25) = 11.
DEEP = [
    (6, 5, 9, "fails"),
    (6, 6, 11, "holds"),
    (12, 10, 10, "fails"),
    (12, 11, 11, "holds"),
    (24, 20, 10, "fails"),
    (24, 21, 11, "holds"),
]

PEAKS = (
    [("clark_cls_early_layers", "to_cls", *case) for case in EARLY]
    + [("clark_sep_middle_layers", "to_sep", *case) for case in MIDDLE]
    + [("clark_punct_deep_layers", "to_punct", *case) for case in DEEP]
)


@pytest.mark.parametrize(
    "claim_id,measure,n_layers,peak,bert_layer,verdict",
    PEAKS,
    ids=[f"{claim}-{n}layers-peak{peak}" for claim, _, n, peak, _, _ in PEAKS],
)
def test_peak_layer_by_relative_depth(
    claim_id: str, measure: str, n_layers: int, peak: int, bert_layer: int, verdict: str
) -> None:
    rows = head_rows(n_layers, heads=12, **{measure: lambda layer: 0.9 if layer == peak else 0.1})
    row = judged(claim_id, {"clark_special_tokens": rows})
    assert row["value"] == pytest.approx(9.0 if verdict == "holds" else 0.1 / 0.9), row["reason"]
    assert row["verdict"] == verdict, row["reason"]
    assert row["n"] == 12 * n_layers
    assert re.search(rf"BERT-base layer {bert_layer}\b", row["reason"]), row["reason"]


# Very broad heads (entropy / uniform 3.6 / 4.0 = 0.9, at least 3/4) in the peak layer only, the
# others at 2.0 / 4.0 = 0.5, twelve heads a layer: the share of broad heads at the depth of
# BERT-base layers 1-4 minus the others' is 1 / (the lower layers) where the peak is among them,
# -1 / (the other layers) where it is not. Lower layers: 6 layers: 1-2; 12 layers: 1-4; 24 layers: 1-8.
LOWER_LAYERS = {6: 2, 12: 4, 24: 8}


@pytest.mark.parametrize("n_layers,peak,bert_layer,verdict", EARLY, ids=[f"{n}layers-peak{p}" for n, p, _, _ in EARLY])
def test_broad_heads_early_by_relative_depth(n_layers: int, peak: int, bert_layer: int, verdict: str) -> None:
    rows = head_rows(
        n_layers,
        heads=12,
        entropy=lambda layer: 3.6 if layer == peak else 2.0,
        uniform_entropy=lambda layer: 4.0,
    )
    row = judged("clark_broad_heads_early", {"clark_entropy": rows})
    lower = LOWER_LAYERS[n_layers]
    value = 1 / lower if verdict == "holds" else -1 / (n_layers - lower)
    assert (row["value"], row["verdict"]) == (pytest.approx(value), verdict), row["reason"]
    assert f"{12 * lower} heads at the depth of layers 1-4" in row["reason"]


# Gradients from the depth of BERT-base layer 5 on: [SEP] 0.1 there and 10.0 before, other tokens
# 1.0 everywhere, so only the right layers give 0.1 / 1.0 = 0.1. The layers from layer 5's depth:
# 6 layers: 3-6 (3 -> ceil(5) = 5; 2 -> 3), 4 of them; 12 layers: 5-12, 8; 24 layers: 9-24
# (9 -> ceil(4.25) = 5; 8 -> ceil(3.75) = 4), 16.
@pytest.mark.parametrize("n_layers,first,layers", [(6, 3, 4), (12, 5, 8), (24, 9, 16)])
def test_sep_gradients_from_layer_5_by_relative_depth(n_layers: int, first: int, layers: int) -> None:
    rows = [
        row | {"target_type": target, "grad_magnitude": grad(row["layer"])}
        for target, grad in [("sep", lambda layer: 0.1 if layer >= first else 10.0), ("other", lambda layer: 1.0)]
        for row in head_rows(n_layers)
    ]
    batches = [{"table_name": "grad_importance", "model_id": "m", "corpus": "wiki_segments", "n_rows": len(rows)}]
    row = judged("clark_sep_gradients_small", {"clark_grad_importance": rows, "stg_batches": batches})
    assert row["value"] == pytest.approx(0.1), row["reason"]
    assert (row["n"], row["verdict"]) == (layers, "holds"), row["reason"]


# Kovaleva Fig. 5: per task, the layer whose heads' mean cosine (base vs fine-tuned) is lowest, as
# the BERT-base layer it stands for; the last two (11-12) hold. Cosine 0.5 in the peak layer, 0.9
# elsewhere, two heads a layer, on two tasks whose fine-tunes learned them. 6 layers: 6 -> 11,
# 5 -> 9; 12 layers: 11, 10 themselves; 24 layers: 21 -> ceil(10.25) = 11, 20 -> ceil(9.75) = 10.
LAST_TWO = [(6, 6, 11), (6, 5, 9), (12, 11, 11), (12, 10, 10), (24, 21, 11), (24, 20, 10)]


@pytest.mark.parametrize("n_layers,peak,bert_layer", LAST_TWO, ids=[f"{n}layers-peak{p}" for n, p, _ in LAST_TWO])
def test_kovaleva_last_layers_by_relative_depth(n_layers: int, peak: int, bert_layer: int) -> None:
    tasks = ("mrpc", "rte")
    rows = [
        row | {"corpus": f"glue_{task}", "cosine": 0.5 if row["layer"] == peak else 0.9}
        for task in tasks
        for row in head_rows(n_layers, heads=2)
    ]
    baselines = [
        {"model_id": "m", "corpus": f"glue_{task}", "task": task, "setting": "pretrained_finetuned", "learned": True}
        | {"note": f"{task}: learned"}
        for task in tasks
    ]
    frame = judge_on(
        CLAIMS["kovaleva_fig5_last_layers_change_most"],
        {"kovaleva_finetune_similarity": rows, "int_task_score_baselines": baselines},
    )
    row = frame.row(0, named=True)
    assert row["value"] == bert_layer, row["reason"]
    assert row["n"] == 2 * 2 * n_layers
    assert f"mrpc {bert_layer} (cosine 0.5000), rte {bert_layer} (cosine 0.5000)" in row["reason"]
