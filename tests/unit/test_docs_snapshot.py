"""The docs' MiniLM numbers come from the committed snapshot (presentation/docs_snapshot.py): every
generated block of every page is what the snapshot renders, the snapshot covers every claim of the
registry, a block renders the rows it names and the steps on part of a corpus its claims read; the
matrix block renders every model's verdicts as exported; a chart image keeps its size in few colours,
and the snapshot has the image of every chart with rows and no other."""

import io
import json
from pathlib import Path

import altair as alt
import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.presentation.chart_registry import CHARTS
from dagster_project.presentation.docs_snapshot import (
    CHART_COLOURS,
    SNAPSHOT_DIR,
    pages_with_blocks,
    palette_png,
    read_snapshot,
    reduced_sizes,
    reduced_sizes_of,
    render_block,
    render_page,
    write_chart_images,
    write_matrix_image,
    write_snapshot,
)
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.claims import PAPERS, load_claims
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views
from tests.unit.test_report import _summaries
from tests.views.test_scorecard_matrix import CLAIMS, TWO_TASKS, write_matrix_warehouse

FIX = "python -m dagster_project.presentation.docs_snapshot"
META = {"model": "org/m", "profile": "quick", "made_at": "2026-11-27"}
ROWS = pl.DataFrame(
    {
        "paper": ["clark", "clark", "pascual"],
        "result": ["Fig. 2", "Table 1", "Fig. 1"],
        "claim": ["clark_a", "clark_b", "pascual_c"],
        "corpus": ["wiki_segments", "ud_ewt_test", None],
        "paper_text": ["> 0.5", "94.3 | 51.7", "0.7"],
        "model_value": [0.123456, 78.8, None],
        "verdict": ["fails", "holds", "missing"],
        "reason": ["mean 0.123", "best head 3-9", "needs HTA facts"],
        "n": [24, 900, None],
        "profile": ["quick", "quick", "quick"],
        "needs": ["facts on wiki_segments", "facts on ud_ewt_test", "HTA (attn-warehouse run --corpus xnli_en --hta)"],
    }
)


def test_a_block_renders_the_rows_of_its_paper_and_result() -> None:
    block = render_block("clark Table 1", ROWS, META)
    assert block.splitlines()[0].startswith("org/m, quick reproduction (reduced sizes), 2026-11-27: 1 claims: 1 holds")
    # each judgment's row, then its reason on a row of its own across the table's four columns
    assert (
        "<tr><td>clark_<wbr>b<br><small>on ud_ewt_test</small></td><td><strong>holds</strong></td>"
        "<td>78.8</td><td>94.3 | 51.7</td></tr>\n"
        '<tr><td colspan="4"><em>why</em>: best head 3-9</td></tr>'
    ) in block
    assert "clark_a" not in block
    assert (
        "<tr><td>clark_<wbr>a<br><small>on wiki_segments</small></td><td><strong>fails</strong></td>"
        "<td>0.1235</td><td>&gt; 0.5</td></tr>"
    ) in render_block("clark", ROWS, META)
    assert render_block("kovaleva", ROWS, META) == "No claim of kovaleva in the snapshot.\n"


def _examples(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"example_id": range(n), "text_a": "a b", "n_tokens": 4, "max_len": 128, "seed": 0},
        schema_overrides={"example_id": pl.Int32, "n_tokens": pl.Int16, "max_len": pl.Int16, "seed": pl.Int32},
    )


def test_the_snapshot_says_which_steps_ran_on_part_of_their_corpus() -> None:
    """HTA on 2 of xnli_en's 5 examples and on all 3 of xnli_de's; SST-2 fine-tuned on 4 of its 6 training
    examples (the settings without training have no steps), RTE on all of its 3."""
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    upsert_model(conn, ModelSpec("org--m", "org/m", "/models/m", "abc", "bert", 2, 2, True))
    hta = pl.DataFrame({"layer": 1, "head": 1, "kind": "input", "pearson": 0.5, "hta_method": "exact"})
    for corpus, held, used in (("xnli_en", 5, 2), ("xnli_de", 3, 3)):
        rows = hta.join(pl.DataFrame({"example_id": range(used)}, schema={"example_id": pl.Int32}), how="cross")
        replace_partition(conn, {"examples": _examples(held), "hta_correlations": rows}, "org--m", corpus)
    for task, held, used in (("sst2", 6, 4), ("rte", 3, 3)):
        replace_partition(conn, {"examples": _examples(held)}, "org--m", f"glue_{task}_train")
        scores = pl.DataFrame(
            {
                "task": task,
                "setting": ["pretrained", "pretrained_finetuned"],
                "metric": "accuracy",
                "score": 0.5,
                "n_examples": 10,
                "steps": [None, 7],
                "train_examples": [None, used],
                "recipe": "{}",
                "seconds": 1.0,
            },
            schema_overrides={"n_examples": pl.Int32, "steps": pl.Int32, "train_examples": pl.Int32},
        )
        replace_partition(conn, {"task_scores": scores}, "org--m", f"glue_{task}")
    assert reduced_sizes(conn, "org--m") == [
        "HTA on 2 of 5 xnli_en examples",
        "SST-2 fine-tuned for 7 steps on 4 of 6 training examples",
    ]


# The steps the committed snapshot ran on part of their corpus, and hand-made rows of claims that read them or not.
REDUCED = [
    "HTA on 60 of 483 xnli_de examples",
    "HTA on 60 of 1,800 xnli_en examples",
    "SST-2 fine-tuned for 1,500 steps on 16,000 of 67,349 training examples",
]
TUNED_NEEDS = "fine-tuning scores (attn-warehouse run --corpus glue_<task> --analysis finetuning)"
STEP_ROWS = pl.DataFrame(
    {
        "paper": ["clark", "pascual", "pascual", "kovaleva", "kovaleva", "kovaleva", "kovaleva"],
        "result": ["Fig. 2", "Fig. 1", "Fig. 4", "Table 1", "Fig. 7", "Fig. 8", "Fig. 3"],
        "corpus": ["wiki_segments", "xnli_en", "xnli_en", "glue", "glue_sst2", "glue_stsb", "framenet"],
        "verdict": "holds",
        "needs": [
            "attention facts on wiki_segments (attn-warehouse run --corpus wiki_segments)",
            "Hidden Token Attribution on xnli_en (attn-warehouse run --corpus xnli_en --hta)",
            "attention facts on xnli_en (attn-warehouse run --corpus xnli_en)",
            TUNED_NEEDS,
            TUNED_NEEDS,
            TUNED_NEEDS,
            "FrameNet facts (attn-warehouse run --corpus framenet)",
        ],
    }
)


@pytest.mark.parametrize(
    ("results", "named"),
    [
        # Clark reads no step run on part of its corpus; an xnli_en attention claim reads no HTA
        ({"Fig. 2"}, []),
        ({"Fig. 4"}, []),
        # a Pascual HTA claim on xnli_en: its own HTA, not xnli_de's nor the fine-tuning
        ({"Fig. 1", "Fig. 4"}, ["HTA on 60 of 1,800 xnli_en examples"]),
        # a claim over every GLUE task, or on SST-2, reads SST-2's fine-tuning; one on STS-B or FrameNet does not
        ({"Table 1", "Fig. 8"}, ["SST-2 fine-tuned for 1,500 steps on 16,000 of 67,349 training examples"]),
        ({"Fig. 7"}, ["SST-2 fine-tuned for 1,500 steps on 16,000 of 67,349 training examples"]),
        ({"Fig. 8"}, []),
        ({"Fig. 3"}, []),
    ],
)
def test_a_block_names_only_the_partial_steps_its_claims_read(results: set[str], named: list[str]) -> None:
    rows = STEP_ROWS.filter(pl.col("result").is_in(results))
    assert reduced_sizes_of(rows, REDUCED) == named


def test_a_clark_block_has_no_note_and_a_pascual_block_names_its_hta() -> None:
    meta = META | {"reduced_sizes": REDUCED}
    assert "On part of the data" not in render_block("clark", ROWS, meta)
    pascual = ROWS.with_columns(corpus=pl.Series(["wiki_segments", "ud_ewt_test", "xnli_en"]))
    assert render_block("pascual", pascual, meta).splitlines()[2] == (
        "On part of the data: HTA on 60 of 1,800 xnli_en examples."
    )
    with pytest.raises(ValueError, match="names no step on part of a corpus"):
        render_block("pascual", pascual, META | {"reduced_sizes": ["HTA on some examples"]})


def test_a_page_keeps_its_prose_and_rewrites_its_blocks() -> None:
    page = "# Title\n\nprose\n<!-- snapshot: pascual -->\nold numbers\n<!-- /snapshot -->\nmore prose\n"
    rendered = render_page(page, ROWS, META)
    assert rendered.startswith("# Title\n\nprose\n<!-- snapshot: pascual -->\norg/m, quick")
    assert "old numbers" not in rendered and rendered.endswith("<!-- /snapshot -->\nmore prose\n")
    assert (
        "<tr><td>pascual_<wbr>c</td><td><strong>missing</strong></td><td></td><td>0.7</td></tr>\n"
        '<tr><td colspan="4"><em>why</em>: needs HTA facts</td></tr>'
    ) in rendered
    assert render_page(rendered, ROWS, META) == rendered


def test_every_docs_block_is_what_the_committed_snapshot_renders() -> None:
    rows, meta = read_snapshot()
    pages = pages_with_blocks()
    assert {path.name for path in pages} >= {"index.md", *(f"{paper}.md" for paper in PAPERS)}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert render_page(text, rows, meta) == text, f"{page.relative_to(PROJECT_ROOT)} is stale: {FIX}"


def test_the_pages_show_every_claim_of_the_registry_and_say_which_the_snapshot_did_not_judge() -> None:
    rows, meta = read_snapshot()
    assert rows["claim"].unique(maintain_order=True).to_list() == [claim.claim for claim in load_claims()]
    judged = set(pl.read_csv(SNAPSHOT_DIR / "scorecard.csv")["claim"])
    newer = rows.filter(~pl.col("claim").is_in(judged))
    assert newer.height == meta.get("claims_after_snapshot", 0)
    assert set(newer["verdict"]) <= {"missing"}
    assert all(reason.startswith("not in the snapshot: the claim came after it was made") for reason in newer["reason"])
    if newer.height:
        block = render_block("clark", rows, meta)
        assert f"the {newer.height} claims added since are missing until it is regenerated" in block


def test_a_claim_added_after_the_snapshot_is_missing_and_a_removed_one_is_gone(tmp_path: Path) -> None:
    rows = ROWS.with_columns(claim=pl.Series(["clark_sep_layers_6_10", "clark_gone", "pascual_fig1_pearson_above_07"]))
    rows = rows.drop("needs")  # the snapshot's CSV has no needs: they come from the registry
    rows.write_csv(tmp_path / "scorecard.csv")
    (tmp_path / "snapshot.json").write_text(json.dumps(META | {"sql_code_version": "abc"}))
    read, meta = read_snapshot(tmp_path)
    assert "clark_gone" not in read["claim"].to_list()
    assert read["claim"].unique(maintain_order=True).to_list() == [claim.claim for claim in load_claims()]
    assert meta["claims_after_snapshot"] == len(load_claims()) - 2
    added = read.row(by_predicate=pl.col("claim") == "clark_cls_early_layers", named=True)
    assert (added["verdict"], added["model_value"]) == ("missing", None)
    assert added["reason"] == "not in the snapshot: the claim came after it was made (SQL abc)"
    judged = read.row(by_predicate=pl.col("claim") == "pascual_fig1_pearson_above_07", named=True)
    assert judged["needs"] == "Hidden Token Attribution on xnli_en (attn-warehouse run --corpus xnli_en --hta)"


def test_a_chart_image_keeps_its_size_in_few_colours() -> None:
    """A 20 x 20 heatmap on a continuous scale: hundreds of colours drawn, at most CHART_COLOURS kept."""
    image = pytest.importorskip("PIL.Image")
    cells = pl.DataFrame({"x": [i % 20 for i in range(400)], "y": [i // 20 for i in range(400)], "v": range(400)})
    chart = alt.Chart(cells).mark_rect().encode(x="x:O", y="y:O", color="v:Q")
    full = io.BytesIO()
    chart.save(full, format="png")
    drawn = image.open(full).convert("RGB")
    small = image.open(io.BytesIO(palette_png(chart)))
    assert len(drawn.getcolors(1 << 24)) > 4 * CHART_COLOURS
    assert small.mode == "P"
    assert small.size == drawn.size
    assert len(small.getcolors()) <= CHART_COLOURS


def test_the_snapshot_draws_the_charts_with_rows_and_drops_the_others(tmp_path: Path) -> None:
    """One model with head summaries on demo: Clark Fig. 4 (entropy) is drawn; Table 3 (probes)
    has no rows, and its image of an earlier snapshot goes."""
    pytest.importorskip("PIL")
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    upsert_model(conn, ModelSpec("org--tiny", "org/tiny", "/models/tiny", "abc", "bert", 2, 2, True))
    replace_partition(conn, {"head_summaries": _summaries(2)}, "org--tiny", "demo")
    (tmp_path / "clark_table3_probes.png").write_bytes(b"an earlier snapshot's image")
    charts = [
        spec for spec in CHARTS if spec.name in {"clark_fig4_entropy", "clark_table3_probes", "clark_fig1_head_maps"}
    ]
    written = {path.name for path in write_chart_images(conn, "org/tiny", tmp_path, charts)}
    assert "clark_fig4_entropy.png" in written
    assert {"clark_table3_probes.png", "clark_fig1_head_maps.png"}.isdisjoint(written)
    assert {path.name for path in tmp_path.iterdir()} == written


def test_the_matrix_block_shows_every_model_as_exported_with_its_counts(tmp_path: Path) -> None:
    """The hand-made matrix warehouse (org/alpha, its two random-init controls, org/beta) exported with
    org/alpha's scorecard: the block is `scorecard --matrix --format markdown` of the exported rows."""
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    write_matrix_warehouse(conn)
    write_snapshot(conn, "org/alpha", tmp_path)
    rows, meta = read_snapshot(tmp_path)
    block = render_block("matrix", rows, meta)
    lead = f"{CLAIMS} claims x 4 models, {meta['made_at']} (generated from docs/snapshot/ by `{FIX}`):"
    assert block.startswith(lead)
    assert "- **1r alpha (random init)**: random-init control of 1 (org/alpha), run profile\n" in block
    # compact for the docs' content column: keys for headings, marks for verdicts, no paper column
    assert "Verdicts: holds, fails, incon = inconclusive, n/c = not comparable, mixed, - = missing." in block
    assert "| claim | 1 | 1r | 1r3 | 2 |" in block
    assert "| clark_<wbr>sep_<wbr>to_<wbr>sep | incon | fails | - | holds |" in block
    assert f"| {TWO_TASKS.replace('_', '_<wbr>')} | mixed | holds | - | holds |" in block
    assert "| inconclusive | 1 | 0 | 0 | 0 |" in block
    assert "| holds for its random control too | 1 |  |  |  |" in block
    image = pytest.importorskip("PIL.Image")
    drawn = image.open(write_matrix_image(meta["matrix_rows"], tmp_path))
    assert drawn.mode == "P" and drawn.size[1] > 14 * CLAIMS  # a row of 14 pixels per claim


def test_a_snapshot_without_a_matrix_says_how_to_export_one() -> None:
    assert render_block("matrix", ROWS, META | {"made_at": "2026-11-27"}) == (
        "*The docs snapshot (org/m, 2026-11-27) has no matrix: "
        f"`{FIX} --model org/m` exports `scorecard_matrix` with the model's scorecard.*\n"
    )


def test_a_claim_judged_on_two_corpora_counts_as_two_judgments() -> None:
    twice = pl.concat([ROWS.head(1), ROWS.head(1).with_columns(corpus=pl.lit("ud_ewt_test"), verdict=pl.lit("holds"))])
    first = render_block("clark", twice, META).splitlines()[0]
    assert first.startswith("org/m, quick reproduction (reduced sizes), 2026-11-27: 1 claims in 2 judgments: 1 holds")
