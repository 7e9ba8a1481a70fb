"""No MiniLM result is typed by hand on the paper pages: the numbers a run measures come from the docs
snapshot, in generated blocks (presentation/docs_snapshot.py, presentation/result_cards.py), and a
view's rows in the snapshot render as a table, or as the runs that fill them.

The rule, over docs/papers/*.md outside generated blocks (`<!-- snapshot: ... -->` to `<!-- /snapshot -->`,
`<!-- card: ... -->` to `<!-- /card -->`), fenced code, inline code and headings:

- A paragraph (lines up to a blank line) that names MiniLM is a results paragraph. In a table (lines
  starting with `|`), a row that names MiniLM is one, and every row when the table's caption (the
  paragraph right before it) names MiniLM.
- Every decimal number (digits, a point, digits: 0.708, -0.24, 2.0e-7) in a results paragraph or row
  is a result typed by hand, except
  1. the papers' values: in a paragraph that begins with "Paper", inside double quotes, or in a table
     column whose header names the paper ("paper", "BERT-base");
  2. a section number (after "§");
  3. a size, which is no result: a number followed by a unit of size (piece, pieces, MB, GB, M).

Measured costs and estimator checks are no exception: they belong on the benchmarks page, which a
paper page links to.

Integers (layer and head numbers, counts, years) are never flagged."""

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from dagster_project.compute.models import ModelSpec
from dagster_project.presentation.docs_snapshot import REGENERATE, render_block, write_view_rows
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.claims import load_claims
from dagster_project.storage.model_rows import upsert_model
from dagster_project.storage.partition_writes import replace_partition
from dagster_project.storage.views import apply_views

PAPER_PAGES = PROJECT_ROOT / "docs" / "papers"
DECIMAL = re.compile(r"(?<![\w.§])-?\d+\.\d+(?:e-?\d+)?(?!\w|\.\d)")
SIZE_UNIT = re.compile(r"\s?(?:pieces?|MB|GB|M)\b")
OPENS = re.compile(r"<!-- (?:snapshot|card): [^>]+-->")
CLOSES = re.compile(r"<!-- /(?:snapshot|card) -->")
PAPER_COLUMN = re.compile(r"paper|BERT-base", re.IGNORECASE)
CODE_NAME = re.compile(r"`(\w+)[^`]*`")
RESULTS = {path.stem for path in (PROJECT_ROOT / "sql" / "results").glob("*.sql")} | {
    claim.claim for claim in load_claims()
}


def _names_a_result(text: str) -> bool:
    """Whether `text` names MiniLM, or a results view or claim of the registry in code (`a_view.a_column`)."""
    return "MiniLM" in text or any(name in RESULTS for name in CODE_NAME.findall(text))


def paragraphs(text: str) -> Iterator[list[tuple[int, str]]]:
    """The page's paragraphs and tables outside generated blocks, fenced code and headings, as
    (line number, line) runs; an empty run where a heading, code or a generated block comes between."""
    run: list[tuple[int, str]] = []
    generated = fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        fence = not generated and stripped.startswith("```")
        skipped = generated or fenced or fence or stripped.startswith("#") or bool(OPENS.match(stripped))
        generated = (generated or bool(OPENS.match(stripped))) and not CLOSES.match(stripped)
        fenced = fenced != fence
        if skipped or not stripped:
            if run:
                yield run
            if skipped:
                yield []
            run = []
        else:
            run.append((number, line))
    if run:
        yield run


def _decimals(line: str) -> list[str]:
    """The decimals of `line` that are not quoted, a section number, or a size."""
    line = re.sub(r'`[^`]*`|"[^"]*"|“[^”]*”', "", line)
    return [match[0] for match in DECIMAL.finditer(line) if not SIZE_UNIT.match(line, match.end())]


def _without_paper_columns(line: str, paper_columns: set[int]) -> str:
    """A table row without the cells of the paper's columns."""
    cells = line.strip().strip("|").split("|")
    return "|".join(cell for index, cell in enumerate(cells) if index not in paper_columns)


def typed_results(path: Path, root: Path = PROJECT_ROOT) -> list[str]:
    """`file:line number` (file relative to `root`) for each decimal of the page at `path` that is a MiniLM
    result typed by hand, by the module's rule."""
    found = []
    caption = ""
    for run in paragraphs(path.read_text(encoding="utf-8")):
        if not run:  # a table right after a heading or code has no caption
            caption = ""
            continue
        text = " ".join(line for _, line in run)
        table = run[0][1].lstrip().startswith("|")
        cited = text.lstrip().startswith("Paper")
        header = run[0][1].strip().strip("|").split("|") if table else []
        paper_columns = {index for index, cell in enumerate(header) if PAPER_COLUMN.search(cell)}
        for number, line in run:
            named = _names_a_result(line if table else text) or (table and _names_a_result(caption))
            if named and not cited:
                row = _without_paper_columns(line, paper_columns) if table else line
                found += [f"{path.relative_to(root)}:{number} {value}" for value in _decimals(row)]
        if not table:
            caption = text
    return found


def test_no_paper_page_types_a_minilm_result_by_hand() -> None:
    pages = sorted(PAPER_PAGES.glob("*.md"))
    assert len(pages) >= 5
    typed = [entry for page in pages for entry in typed_results(page)]
    assert not typed, "MiniLM results typed by hand (generate them from the docs snapshot):\n" + "\n".join(typed)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        # a results paragraph's own value, and the one of the table it captions, with their lines
        ("Intro.\n\nMiniLM's best head reaches 0.455 (3-9).\n", ["page.md:3 0.455"]),
        ("On MiniLM:\n\n| layer | attention |\n|---|---|\n| 1 | 0.114 |\n", ["page.md:5 0.114"]),
        (
            "On MiniLM:\n\n| head | MiniLM | paper (BERT-base) |\n|---|---|---|\n| 3-9 | 0.45 | 0.94 |\n",
            ["page.md:5 0.45"],
        ),
        # a table row that names MiniLM under a caption that does not
        ("On MiniLM:\n\n## Settings\n\n| | |\n|---|---|\n| lr | 0.05 |\n| MiniLM | 0.45 |\n", ["page.md:8 0.45"]),
        # the paper's value: quoted, in a "Paper" paragraph, in a paper column; a section, sizes; not a cost
        ('MiniLM against the paper\'s "0.84-0.96" (§4.2), 2.36 M weights, 0.3 MB, 2.5 s.\n', ["page.md:1 2.5"]),
        # only the number a size unit follows, not its line's others nor one "about"
        (
            "MiniLM keeps 25.4 pieces instead of 37.2, gains about 0.001;\nits mean is 0.25.\n",
            ["page.md:1 37.2", "page.md:1 0.001", "page.md:2 0.25"],
        ),
        ("Paper: BERT-base reaches 0.84, MiniLM is not in it.\n", []),
        # a paragraph that does not name MiniLM; generated blocks, code, headings; not a benchmarks paragraph
        ("BERT-base reaches 0.84.\n", []),
        ("MiniLM:\n<!-- snapshot: compare -->\n0.687\n<!-- /snapshot -->\n\n```sql\n-- MiniLM 0.5\n```\n", []),
        ("## MiniLM 0.5\n\nMiniLM `relative_depth = (layer - 0.5) / n_layers`.\n", []),
        ("MiniLM's worst layer: 0.9928 ([benchmarks](../benchmarks.md)).\n", ["page.md:1 0.9928"]),
    ],
)
def test_the_rule_flags_a_typed_result_and_lets_cited_values_through(
    tmp_path: Path, page: str, expected: list[str]
) -> None:
    (tmp_path / "page.md").write_text(page, encoding="utf-8")
    assert typed_results(tmp_path / "page.md", tmp_path) == expected


def test_a_view_block_shows_the_snapshot_rows_of_a_view_as_a_table(tmp_path: Path) -> None:
    """One example: [CLS] (1 token in each of 2 heads) at norms 1 and 3, mean 2; the content tokens (3 in
    head 1 at mean norm 2, 1 in head 2 at 4), weighed by their tokens: (3 x 2 + 4) / 4 = 2.5."""
    conn = duckdb.connect(":memory:")
    apply_views(conn)
    upsert_model(conn, ModelSpec("org--m", "org/m", "/models/m", "abc", "bert", 2, 2, True))
    norms = pl.DataFrame(
        {
            "example_id": 0,
            "layer": 1,
            "head": [1, 2, 1, 2],
            "token_class": ["cls", "cls", "content", "content"],
            "mean_norm": [1.0, 3.0, 2.0, 4.0],
            "n_tokens": [1, 1, 3, 1],
        },
        schema_overrides={"example_id": pl.Int32, "layer": pl.Int16, "head": pl.Int16, "n_tokens": pl.Int16},
    )
    examples = pl.DataFrame(
        {"example_id": [0], "text_a": "a b", "n_tokens": 4, "max_len": 128, "seed": 0},
        schema_overrides={"example_id": pl.Int32, "n_tokens": pl.Int16, "max_len": pl.Int16, "seed": pl.Int32},
    )
    replace_partition(conn, {"examples": examples, "value_norms": norms}, "org--m", "wiki_segments")
    stale = tmp_path / "compare_weightings_special_tokens.csv"
    stale.write_text("model_id\norg--m\n")
    written = write_view_rows(conn, "org--m", tmp_path)
    assert written == [tmp_path / "compare_weightings_value_norms.csv"]
    assert not stale.exists()
    meta = {
        "model": "org/m",
        "made_at": "2026-11-27",
        "view_rows": {"compare_weightings_value_norms": pl.read_csv(written[0])},
    }
    assert render_block("view compare_weightings_value_norms mean_norm", pl.DataFrame(), meta) == (
        "org/m, `compare_weightings_value_norms.mean_norm` per token_class "
        f"(generated from docs/snapshot/ by `{REGENERATE}`):\n"
        "\n"
        "| corpus | layer | cls | content |\n"
        "|---|---|---|---|\n"
        "| wiki_segments | 1 | 2.000 | 2.500 |\n"
    )
    # a view without rows in the snapshot: the run that fills it (its own where the chart's is not) and the export
    missing = render_block("view compare_weightings_faithfulness spearman", pl.DataFrame(), meta)
    assert missing.startswith("*The docs snapshot (org/m, 2026-11-27) has no rows of `compare_weightings_faithfulness`")
    assert "`attn-warehouse run --corpus glue_sst2 --analysis finetuning` fills it" in missing
    assert f"`{REGENERATE} --model org/m` exports its rows" in missing
    assert "`attn-warehouse run --analysis hta --corpus xnli_en` fills it" in render_block(
        "view compare_weightings_hta_agreement spearman", pl.DataFrame(), meta
    )
