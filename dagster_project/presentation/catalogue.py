"""The results catalogue: for every paper result (a chart of presentation/chart_registry.py, and
every results view of sql/results), what builds it, from the chart down to the math: the view,
the materialized aggregates and the staged fact tables it reads (followed through the views, as
storage/sql_files.py orders them), the compute functions that produce those facts, the tests
that name the view (its own test first: own_test) and the docs section that describes it.
`attn-warehouse catalogue` prints it; docs/catalogue.md shows it as cards (presentation/result_cards.py).
The Python API finds a result by the name a person gives it ("table 1", "fig. 2") with results_named."""

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dagster_project.compute import attention_facts, metrics, weightings
from dagster_project.compute.clark import coreference_baselines, gradients, head_clustering, probes
from dagster_project.compute.compare import faithfulness, head_matching, hta_agreement
from dagster_project.compute.kovaleva import ablation, finetune_similarity, finetuning
from dagster_project.compute.pascual import hta_facts
from dagster_project.presentation.chart_registry import CHARTS, PAPER_AUTHORS, ChartSpec
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.aggregates import AGGREGATE_TABLES, aggregate_sources
from dagster_project.storage.schema import schema_columns
from dagster_project.storage.sql_files import staged_table, view_definitions, views_reached

# The function that computes each fact table's numbers (the tables the corpora write, and the
# warehouse's own bookkeeping, are inputs, not results of a computation).
TABLE_COMPUTATIONS: Mapping[str, Callable] = {
    "head_summaries": metrics.head_summaries,
    "position_histograms": metrics.nested_position_histograms,
    "relation_hits": metrics.most_attended_words,
    "head_distances": head_clustering.head_js_divergence,
    "received_attention": metrics.received_attention,
    "feature_pair_attention": metrics.word_pair_attention,
    "frame_link_attention": metrics.span_pair_max,
    "pattern_example_maps": attention_facts.pick_pattern_examples,
    "head_example_maps": attention_facts.head_map_frame,
    "head_mds": head_clustering.embed_heads,
    "grad_importance": gradients.grad_importance_table,
    "probe_scores": probes.run_probe_suite,
    "coref_baseline_predictions": coreference_baselines.predict_antecedents,
    "task_scores": finetuning.score_settings,
    "ablation_scores": ablation.score_ablations,
    "finetune_cosines": finetune_similarity.finetune_similarity,
    "hta_correlations": hta_facts.extract_hta_facts,
    "contribution_histograms": hta_facts.extract_hta_facts,
    "hta_example_maps": hta_facts.extract_hta_facts,
    "head_matches": head_matching.match_against_models,
    "value_norms": weightings.value_norms,
    "saliency_correlations": faithfulness.weighting_faithfulness,
    "hta_agreement": hta_agreement.agreement_columns,
}
DOCS_DIR = PROJECT_ROOT / "docs"
TESTS_DIR = PROJECT_ROOT / "tests"
# A result's card in a docs page (presentation/result_cards.py writes the body between the marks).
CARD_BLOCK = re.compile(r"<!-- card: (?P<chart>\w+) -->\n(?P<body>.*?)<!-- /card -->\n", re.DOTALL)


@dataclass(frozen=True)
class CatalogueRow:
    paper: str  # a key of PAPER_AUTHORS
    result: str  # as the paper numbers it, "Fig. 2"; for a view no chart draws, the view itself
    chart: str  # the chart asset's name
    view: str
    aggregates: tuple[str, ...]
    facts: tuple[str, ...]
    compute: tuple[str, ...]
    tests: tuple[str, ...]  # the view's own test first (own_test), then the other tests that name it
    docs: str  # page#anchor of the docs section that names the view
    chart_function: str  # the function that draws the chart, as `compute`'s names are written
    command: str  # the run that fills the view for the chart's first corpus
    own_test: str = ""  # the test of the view itself (own_test); "" when tests/views has none

    def missing(self) -> list[str]:
        """The columns this row has nothing in (aggregates may be empty: some views read the facts directly)."""
        columns = ("chart", "view", "facts", "compute", "tests", "docs", "chart_function", "command")
        return [name for name in columns if not getattr(self, name)]


def _qualified(function: Callable) -> str:
    """The function's dotted name below dagster_project (a partial's underlying function)."""
    if isinstance(function, functools.partial):
        function = function.func
    return f"{function.__module__.removeprefix('dagster_project.')}.{function.__qualname__}"


def fill_command(spec: ChartSpec) -> str:
    """The `attn-warehouse run` that fills the chart's view for its first corpus."""
    return f"attn-warehouse run --analysis {spec.analysis} --corpus {spec.corpora[0]}"


def heading_anchor(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def docs_sections(docs_dir: Path = DOCS_DIR) -> dict[str, str]:
    """Per view named in a paper page of the docs, the first section that names it (page#anchor),
    on the page of the view's own paper (its name's prefix) where that page names it."""
    found: dict[str, dict[str, str]] = {}
    for page in sorted((docs_dir / "papers").glob("*.md")):
        anchor = ""
        # the generated cards name views too; the prose decides where each view is described
        prose = CARD_BLOCK.sub("", page.read_text(encoding="utf-8"))
        for line in prose.splitlines():
            if line.startswith("## "):
                anchor = heading_anchor(line[3:])
            for view in re.findall(r"`((?:clark|kovaleva|pascual|compare)_\w+)`", line):
                found.setdefault(view, {}).setdefault(page.stem, f"papers/{page.name}#{anchor}".removesuffix("#"))
    return {view: pages.get(view.split("_")[0], next(iter(pages.values()))) for view, pages in found.items()}


def tests_naming(names: Iterable[str], tests_dir: Path = TESTS_DIR) -> dict[str, tuple[str, ...]]:
    """Per name, the test files whose code names it."""
    files = {path: path.read_text(encoding="utf-8") for path in sorted(tests_dir.rglob("test_*.py"))}
    return {
        name: tuple(
            str(path.relative_to(tests_dir.parent)) for path, text in files.items() if re.search(rf"\b{name}\b", text)
        )
        for name in names
    }


def own_test(view: str, tests: Iterable[str]) -> str:
    """The view's own test among `tests` (the files that name it): the file of tests/views, where views
    are tested on hand-made rows, whose name shares the most words with the view's, the paper's key
    among them (tests/views/test_dependency.py for clark_dependency_heads, test_kovaleva.py for
    kovaleva_cls_attention); the first in name order on a tie, "" when no such file shares a word."""
    words = set(view.split("_"))
    candidates = sorted(test for test in tests if test.startswith("tests/views/"))
    shared = {test: len(words & set(Path(test).stem.removeprefix("test_").split("_"))) for test in candidates}
    best = max(candidates, key=shared.__getitem__, default="")  # max keeps the first of equals
    return best if best and shared[best] else ""


class PaperResult(NamedTuple):
    paper: str  # a key of PAPER_AUTHORS
    result: str  # as the paper numbers it, "Fig. 2"; for a view no chart draws, the view itself
    chart: str  # the chart asset's name; "" for a view no chart draws
    view: str


def paper_results(charts: Iterable[ChartSpec] = CHARTS) -> list[PaperResult]:
    """Every paper result: one per chart, then one per results view of sql/results that no chart
    draws (its paper from the view's name prefix; views named after no paper are left out)."""
    charts = list(charts)
    # the scorecard and the claims' judgments are results about the papers, not of one
    results = [
        view.name for view in view_definitions() if view.layer == "results" and view.name.split("_")[0] in PAPER_AUTHORS
    ]
    undrawn = sorted(set(results) - {spec.view for spec in charts})
    return [PaperResult(spec.paper, spec.figure, spec.name, spec.view) for spec in charts] + [
        PaperResult(name.split("_")[0], name, "", name) for name in undrawn
    ]


# How people abbreviate the names of results: "figure 2", "Figs. 4", "sec. 5", "appendix C".
_RESULT_WORDS = {"figure": "fig", "figures": "fig", "figs": "fig", "tables": "table", "tab": "table"}
_RESULT_WORDS |= {"section": "§", "sec": "§", "appendix": "app"}


def result_key(name: str) -> str:
    """A result's name reduced to what tells it apart: lower case, the usual abbreviations, no
    spaces and no abbreviation dots ("Fig. 2" and "figure 2" -> "fig2"; "§4.4-4.5" keeps its decimals)."""
    text = re.sub(r"[a-z]+", lambda word: _RESULT_WORDS.get(word[0], word[0]), name.lower())
    return re.sub(r"\s+|(?<!\d)\.|\.(?!\d)", "", text)


# The kinds of numbered result, in the order the catalogue lists them (result_key's abbreviations).
NUMBERED_KINDS = ("fig", "table", "§", "app")


def result_order(result: str) -> tuple[int, tuple[int, ...]]:
    """Where a result stands among its paper's: figures by number, then tables, sections and
    appendices by number ("Figs. 1, 5" and "Fig. 4/5" by their first; "§4.4-4.5" as 4.4; "App. C" by
    its letter), then what the paper does not number (a comparison, a view no chart draws)."""
    found = re.match(r"(fig|table|§|app)(\d+(?:\.\d+)*|[a-z])", result_key(result))
    if not found:
        return len(NUMBERED_KINDS), ()
    number = tuple(int(part) for part in found[2].split(".")) if found[2][0].isdigit() else (ord(found[2]),)
    return NUMBERED_KINDS.index(found[1]), number


def _label_keys(result: PaperResult) -> set[str]:
    """The keys that name `result` in its paper: its label, each figure of a joint label ("Fig. 4/5":
    fig4 and fig5) and the label without its parenthesized unit."""
    label = result_key(result.result)
    keys = {label, result_key(re.sub(r"\(.*?\)", "", result.result))}
    joint = re.fullmatch(r"([^\d/]*)([\w.]+(?:/[\w.]+)+)", label)
    if joint:
        keys |= {joint[1] + part for part in joint[2].split("/")}
    return keys


def _view_keys(result: PaperResult) -> set[str]:
    """The keys that name `result`'s view in the paper of its name's prefix: the name, with and without the prefix."""
    return {result.view, result.view.split("_", 1)[1]}


def paper_key(paper: str) -> str:
    """The PAPER_AUTHORS key of a paper as a person writes it ("Clark et al. 2019" -> "clark")."""
    words = re.findall(r"[a-z]+", paper.lower())
    return words[0] if words else ""


def results_named(paper: str, name: str, results: Iterable[PaperResult] | None = None) -> list[PaperResult]:
    """The results of `paper` that `name` names (result_key: case, spacing, "fig"/"figure" do not
    matter; a view's name works too); raises ValueError listing the paper's results when none does."""
    results = paper_results() if results is None else list(results)
    key = paper_key(paper)
    if key not in PAPER_AUTHORS:
        raise ValueError(f"no paper {paper!r}: the papers are {', '.join(PAPER_AUTHORS)}")
    own = [result for result in results if result.paper == key]
    wanted = result_key(name)
    found = [result for result in own if wanted in _label_keys(result)] or [
        result for result in results if result.view.split("_")[0] == key and wanted in _view_keys(result)
    ]
    if not found:
        names = ", ".join(dict.fromkeys(result.result for result in own))
        raise ValueError(
            f"{PAPER_AUTHORS[key]} has no result {name!r}: its results are {names} (a view's name works too)"
        )
    return found


def catalogue(charts: Iterable[ChartSpec] = CHARTS) -> list[CatalogueRow]:
    """One row per chart, then one per results view that no chart draws; per paper (in the order of
    PAPER_AUTHORS) in the order of result_order, the registry's order where that ties."""
    views = {view.name: view for view in view_definitions()}
    results = [name for name, view in views.items() if view.layer == "results"]
    tables = set(schema_columns())
    sources = aggregate_sources()
    sections, tests = docs_sections(), tests_naming(results)
    own = {view: own_test(view, tests[view]) for view in results}
    own_first = {view: tuple(sorted(tests[view], key=lambda test: test != own[view])) for view in results}
    specs = {spec.name: spec for spec in charts}
    rows = []
    for paper, result, chart, view in paper_results(specs.values()):
        staged = {staged_table(name) for name in views_reached(views[view].sql) if name.startswith("stg_")}
        aggregates = tuple(sorted(staged & set(AGGREGATE_TABLES)))
        facts = (staged & tables) - set(AGGREGATE_TABLES) - {"models", "batches"}
        facts |= {fact for aggregate in aggregates for fact in sources[aggregate]}
        compute = sorted({_qualified(TABLE_COMPUTATIONS[fact]) for fact in facts if fact in TABLE_COMPUTATIONS})
        rows.append(
            CatalogueRow(
                paper, result, chart, view, aggregates, tuple(sorted(facts)), tuple(compute), own_first[view],
                sections.get(view, ""),
                _qualified(specs[chart].draw) if chart else "",
                fill_command(specs[chart]) if chart else "",
                own[view],
            )
        )  # fmt: skip
    papers = list(PAPER_AUTHORS)
    return sorted(rows, key=lambda row: (papers.index(row.paper), result_order(row.result)))
