"""The results catalogue (presentation/catalogue.py): every paper result has every column and every
results view is in it (its Markdown, the cards: tests/unit/test_result_cards.py)."""

from dagster_project.compute.fact_kinds import FACT_KINDS
from dagster_project.presentation.catalogue import (
    TABLE_COMPUTATIONS,
    catalogue,
    heading_anchor,
    own_test,
    result_order,
)
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.sql_files import view_definitions

ROWS = catalogue()


def test_every_result_has_every_column() -> None:
    assert {f"{row.paper} {row.result} ({row.view})": row.missing() for row in ROWS if row.missing()} == {}


def test_every_results_view_of_a_paper_is_a_row() -> None:
    results = {view.name for view in view_definitions() if view.layer == "results"}
    # judged claims, in docs/papers/scorecard.md
    about_the_papers = {"reproduction_scorecard", "scorecard_matrix", "claim_judgments"}
    assert {row.view for row in ROWS} == results - about_the_papers


def test_every_fact_kind_has_its_computation() -> None:
    assert set(FACT_KINDS) <= set(TABLE_COMPUTATIONS)


def test_a_row_follows_the_view_down_to_the_math() -> None:
    """Clark Table 1 reads relation hits and gold dependencies through its two aggregates."""
    row = next(row for row in ROWS if row.chart == "clark_table1_dependency_heads")
    assert row.aggregates == ("agg_dependency_head_accuracy", "agg_dependency_offset_baselines")
    assert row.facts == ("dependencies", "relation_hits")
    assert row.compute == ("compute.metrics.most_attended_words",)
    assert row.own_test == row.tests[0] == "tests/views/test_dependency.py"
    assert row.docs.startswith("papers/clark.md#")
    assert row.chart_function == "presentation.charts.clark.clark_dependency_chart"
    assert row.command == "attn-warehouse run --analysis attention --corpus ud_ewt_test"


def test_a_chart_drawn_by_a_partial_names_the_function_underneath() -> None:
    row = next(row for row in ROWS if row.chart == "compare_entropy")
    assert row.chart_function == "presentation.charts.compare.depth_curves_chart"


def test_every_docs_link_names_a_heading_of_its_page() -> None:
    for row in ROWS:
        page, _, anchor = row.docs.partition("#")
        headings = [
            line[3:] for line in (PROJECT_ROOT / "docs" / page).read_text().splitlines() if line.startswith("## ")
        ]
        assert anchor in {heading_anchor(heading) for heading in headings}, row.docs


def test_a_paper_lists_its_figures_by_number_then_its_tables_then_its_sections() -> None:
    labels = [
        "Table 1",
        "§5",
        "Fig. 6",
        "App. C",
        "Figs. 1, 5",
        "Fig. 4/5",
        "§4.4-4.5",
        "Fig. 10",
        "value-vector norms",
    ]
    assert sorted(labels, key=result_order) == [
        "Figs. 1, 5",
        "Fig. 4/5",
        "Fig. 6",
        "Fig. 10",
        "Table 1",
        "§4.4-4.5",
        "§5",
        "App. C",
        "value-vector norms",
    ]
    clark = [row.result for row in ROWS if row.paper == "clark"]
    assert clark == [
        "Fig. 1",
        "Fig. 2",
        "Fig. 3",
        "Fig. 4",
        "Fig. 5",
        "Fig. 6",
        "Fig. 6",
        "Table 1",
        "Table 2",
        "Table 3",
    ]
    assert [row.paper for row in ROWS] == sorted(
        (row.paper for row in ROWS), key=["clark", "kovaleva", "pascual", "compare"].index
    )


def test_a_views_own_test_is_the_view_test_whose_name_shares_most_of_its_words() -> None:
    # made-up views: a test file that names a real view is listed on that view's card
    tests = ["tests/assets/test_api.py", "tests/views/test_kovaleva_links.py", "tests/views/test_kovaleva.py"]
    assert own_test("kovaleva_made_up", tests) == "tests/views/test_kovaleva.py"  # one word each: first by name
    assert own_test("kovaleva_made_up_links", tests) == "tests/views/test_kovaleva_links.py"  # two words
    # a view test sharing no word, or a test outside tests/views, is not the view's own
    assert own_test("clark_made_up", ["tests/assets/test_api.py", "tests/views/test_claims_depth.py"]) == ""
