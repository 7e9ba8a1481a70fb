"""The docs' MiniLM numbers come from the committed snapshot (presentation/docs_snapshot.py): every
generated block of every page is what the snapshot renders, the snapshot covers every claim of the
registry, and a block renders the rows it names."""

import polars as pl

from dagster_project.presentation.docs_snapshot import (
    pages_with_blocks,
    read_snapshot,
    render_block,
    render_page,
)
from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage.claims import PAPERS, load_claims

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
    }
)


def test_a_block_renders_the_rows_of_its_paper_and_result() -> None:
    block = render_block("clark Table 1", ROWS, META)
    assert block.splitlines()[0].startswith("org/m, quick reproduction (reduced sizes), 2026-11-27: 1 claims: 1 holds")
    assert "| clark_b | ud_ewt_test | 94.3 \\| 51.7 | 78.8 | holds | best head 3-9 |" in block
    assert "clark_a" not in block
    assert "| clark_a | wiki_segments | > 0.5 | 0.1235 | fails | mean 0.123 |" in render_block("clark", ROWS, META)
    assert render_block("kovaleva", ROWS, META) == "No claim of kovaleva in the snapshot.\n"


def test_a_page_keeps_its_prose_and_rewrites_its_blocks() -> None:
    page = "# Title\n\nprose\n<!-- snapshot: pascual -->\nold numbers\n<!-- /snapshot -->\nmore prose\n"
    rendered = render_page(page, ROWS, META)
    assert rendered.startswith("# Title\n\nprose\n<!-- snapshot: pascual -->\norg/m, quick")
    assert "old numbers" not in rendered and rendered.endswith("<!-- /snapshot -->\nmore prose\n")
    assert "| pascual_c |  | 0.7 |  | missing | needs HTA facts |" in rendered
    assert render_page(rendered, ROWS, META) == rendered


def test_every_docs_block_is_what_the_committed_snapshot_renders() -> None:
    rows, meta = read_snapshot()
    pages = pages_with_blocks()
    assert {path.name for path in pages} >= {"index.md", *(f"{paper}.md" for paper in PAPERS)}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert render_page(text, rows, meta) == text, f"{page.relative_to(PROJECT_ROOT)} is stale: {FIX}"


def test_the_snapshot_judges_every_claim_of_the_registry() -> None:
    rows, meta = read_snapshot()
    missing = {claim.claim for claim in load_claims()} - set(rows["claim"])
    assert not missing, f"docs/snapshot has no row for {sorted(missing)}: {FIX} --model {meta['model']}"
