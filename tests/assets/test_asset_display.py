"""What the Dagster UI shows beside each asset (defs/asset_display.py): kinds declared once per
asset module and a code reference, checked through the loaded definitions."""

import inspect
import re
from pathlib import Path

import pytest
from dagster import AssetsDefinition, LocalFileCodeReference, UrlCodeReference, asset

from dagster_project.defs import asset_display
from dagster_project.defs.asset_display import KINDS_BY_MODULE, asset_module, displayed_assets
from dagster_project.settings import PROJECT_ROOT

CODE_REFERENCES = "dagster/code_references"


@asset
def displayed_example() -> None:
    """An asset defined outside the asset modules."""


def _references(spec) -> list:
    return spec.metadata[CODE_REFERENCES].code_references


def test_every_asset_has_kinds_and_a_reference_to_its_code() -> None:
    from dagster_project.definitions import defs

    graph = defs.resolve_asset_graph()
    specs = {key.to_user_string(): graph.get(key) for key in graph.get_all_asset_keys()}
    assert len(specs) > 100
    assert {key for key, spec in specs.items() if not spec.kinds} == set()
    for key, spec in specs.items():
        (reference,) = _references(spec)
        assert isinstance(reference, LocalFileCodeReference), key
        line = Path(reference.file_path).read_text(encoding="utf-8").splitlines()[reference.line_number - 1]
        # The line of the function that computes the asset (or, for corpus files, reads them: a
        # function, or a lambda in the corpus registry).
        assert re.match(r"\s*(def |@|(read=)?lambda )", line), (key, line)

    facts = specs["ud_ewt_dev_attention_facts"]
    assert facts.kinds == {"pytorch", "polars", "duckdb"}
    assert Path(_references(facts)[0].file_path) == PROJECT_ROOT / "dagster_project/defs/assets/facts.py"
    views = specs["warehouse_views"]
    assert views.kinds == {"sql", "duckdb"}
    files = specs["ud_ewt_dev_files"]
    assert files.kinds == {"file"}
    (reader,) = _references(files)
    assert Path(reader.file_path) == PROJECT_ROOT / "dagster_project/corpora/__init__.py"
    assert "read_ud(" in Path(reader.file_path).read_text(encoding="utf-8").splitlines()[reader.line_number - 1]


def test_kinds_are_declared_for_exactly_the_asset_modules() -> None:
    from dagster_project.defs.assets import all_assets

    assert set(KINDS_BY_MODULE) == {asset_module(asset) for asset in all_assets if asset.is_executable}


def test_an_asset_module_without_kinds_is_an_error_that_names_the_fix() -> None:
    with pytest.raises(KeyError, match=r"tests\.assets\.test_asset_display, which has no kinds.*KINDS_BY_MODULE"):
        displayed_assets([displayed_example])


def test_a_configured_repository_turns_references_into_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(asset_display.KINDS_BY_MODULE, __name__, frozenset({"python"}))
    monkeypatch.setenv("ATTN_GIT_URL", "https://github.com/example/attention-warehouse/")
    monkeypatch.setenv("ATTN_GIT_BRANCH", "dev")
    (shown,) = displayed_assets([displayed_example])
    assert isinstance(shown, AssetsDefinition)
    spec = shown.get_asset_spec(displayed_example.key)
    assert spec.kinds == {"python"}
    line = inspect.getsourcelines(displayed_example.op.compute_fn.decorated_fn)[1]
    (reference,) = _references(spec)
    assert isinstance(reference, UrlCodeReference)
    assert (
        reference.url
        == f"https://github.com/example/attention-warehouse/tree/dev/tests/assets/test_asset_display.py#L{line}"
    )
