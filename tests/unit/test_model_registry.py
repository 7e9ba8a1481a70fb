from pathlib import Path

import pytest

from dagster_project import settings
from dagster_project.defs.model_registry import (
    RegistryEntry,
    RegistryError,
    checkpoint_folders,
    read_registry,
    scan_registry,
)

ANALYSES, CORPORA = {"attention", "hta"}, {"demo", "xnli_en"}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_entries_with_defaults_selections_and_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    registry = write(
        tmp_path / "models.toml",
        '[[model]]\nsource = "org/encoder"\n\n'
        '[[model]]\nsource = "ckpt"\nanalyses = ["attention", "hta"]\ncorpora = ["xnli_en"]\nenabled = false\n',
    )
    scan = read_registry(registry, ANALYSES, CORPORA)
    assert scan.problems == ()
    assert scan.entries == (
        RegistryEntry("org/encoder", "models.toml [[model]] #1 (org/encoder)"),
        RegistryEntry(
            str((tmp_path / "ckpt").resolve()),
            "models.toml [[model]] #2 (ckpt)",
            ("attention", "hta"),
            ("xnli_en",),
            False,
        ),
    )


def test_bad_entries_are_problems_and_do_not_stop_the_others(tmp_path: Path) -> None:
    registry = write(
        tmp_path / "models.toml",
        '[[model]]\nsource = "org/a"\nanalyses = ["nonsense"]\n\n'
        '[[model]]\nanalyses = ["attention"]\n\n'
        '[[model]]\nsource = "org/b"\nenabled = "yes"\n\n'
        '[[model]]\nsource = "org/c"\ncolour = "red"\n\n'
        '[[model]]\nsource = "org/good"\n',
    )
    scan = read_registry(registry, ANALYSES, CORPORA)
    assert [entry.source for entry in scan.entries] == ["org/good"]
    reasons = {problem.origin: problem.reason for problem in scan.problems}
    assert list(reasons) == [
        "models.toml [[model]] #1 (org/a)",
        "models.toml [[model]] #2",
        "models.toml [[model]] #3 (org/b)",
        "models.toml [[model]] #4 (org/c)",
    ]
    assert "unknown analyses ['nonsense']" in reasons["models.toml [[model]] #1 (org/a)"]
    assert "'source'" in reasons["models.toml [[model]] #2"]
    assert "'enabled' must be true or false" in reasons["models.toml [[model]] #3 (org/b)"]
    assert "unknown keys ['colour']" in reasons["models.toml [[model]] #4 (org/c)"]


def test_malformed_file_names_the_line(tmp_path: Path) -> None:
    registry = write(tmp_path / "models.toml", '[[model]]\nsource = "org/a"\nsource "org/b"\n')
    with pytest.raises(RegistryError, match=r"line 3"):
        read_registry(registry, ANALYSES, CORPORA)
    with pytest.raises(RegistryError, match=r"unknown top-level keys \['models'\]"):
        read_registry(write(registry, '[[models]]\nsource = "org/a"\n'), ANALYSES, CORPORA)


def test_missing_registry_is_empty(tmp_path: Path) -> None:
    assert read_registry(tmp_path / "absent.toml", ANALYSES, CORPORA).entries == ()


def test_drop_folders_add_checkpoints_and_duplicates_are_reported(tmp_path: Path) -> None:
    drop, finetuned = tmp_path / "drop", tmp_path / "finetuned"
    for folder in (drop / "mine", drop / "no_config", finetuned / "sst2-run"):
        folder.mkdir(parents=True)
    write(drop / "mine" / "config.json", "{}")
    write(finetuned / "sst2-run" / "config.json", "{}")
    assert checkpoint_folders(drop) == [drop / "mine"]
    registry = write(tmp_path / "models.toml", '[[model]]\nsource = "drop/mine"\nanalyses = ["hta"]\n')
    scan = scan_registry(registry, [drop, finetuned, tmp_path / "absent"], ANALYSES, CORPORA)
    assert [(entry.source, entry.origin, entry.analyses) for entry in scan.entries] == [
        (str((drop / "mine").resolve()), "models.toml [[model]] #1 (drop/mine)", ("hta",)),
        (str((finetuned / "sst2-run").resolve()), "finetuned/sst2-run", None),
    ]
    assert [problem.origin for problem in scan.problems] == ["drop/mine"]
    assert "already listed by models.toml [[model]] #1" in scan.problems[0].reason


def test_fine_tuned_checkpoint_registers_with_the_corpora_of_its_recipe(tmp_path: Path) -> None:
    """finetuned_<task> writes the entry's corpora into recipe.json: a checkpoint fine-tuned on RTE
    is analysed on glue_rte only (before: no corpora, i.e. the default demo/wiki/xnli corpora)."""
    finetuned = tmp_path / "finetuned"
    for name in ("base--rte", "broken", "unknown"):
        (finetuned / name).mkdir(parents=True)
        write(finetuned / name / "config.json", "{}")
    write(
        finetuned / "base--rte" / "recipe.json", '{"task": "rte", "corpora": ["glue_rte"], "analyses": ["attention"]}'
    )
    write(finetuned / "broken" / "recipe.json", "{not json")
    write(finetuned / "unknown" / "recipe.json", '{"corpora": ["glue_qqp"]}')
    scan = scan_registry(tmp_path / "absent.toml", [finetuned], ANALYSES, {*CORPORA, "glue_rte"})
    assert scan.entries == (
        RegistryEntry(str((finetuned / "base--rte").resolve()), "finetuned/base--rte", ("attention",), ("glue_rte",)),
    )
    reasons = {problem.origin: problem.reason for problem in scan.problems}
    assert list(reasons) == ["finetuned/broken", "finetuned/unknown"]
    assert "is not valid JSON" in reasons["finetuned/broken"]
    assert "unknown corpora ['glue_qqp']" in reasons["finetuned/unknown"]


def test_shipped_registry_lists_the_default_model() -> None:
    from dagster_project.compute.models import DEFAULT_MODEL
    from dagster_project.corpora import CORPORA as ALL_CORPORA
    from dagster_project.defs.jobs import ANALYSES as ALL_ANALYSES

    scan = read_registry(settings.SHIPPED_DIR / "models.toml", ALL_ANALYSES, ALL_CORPORA)
    assert scan.problems == ()
    assert [entry.source for entry in scan.entries] == [DEFAULT_MODEL]


def test_language_names_the_xnli_language_a_model_stands_for(tmp_path: Path) -> None:
    """Pascual Fig. 4: `language = "de"` marks a German BERT; a language without an xnli_<language>
    corpus is a problem naming the file and the entry, and the other entries still register."""
    registry = write(
        tmp_path / "models.toml",
        '[[model]]\nsource = "org/german-bert"\nlanguage = "de"\n\n'
        '[[model]]\nsource = "org/french-bert"\nlanguage = "fr"\n\n'
        '[[model]]\nsource = "org/arabic-bert"\nlanguage = "xnli_ar"\n\n'
        '[[model]]\nsource = "org/english-bert"\nlanguage = "en"\n',
    )
    scan = read_registry(registry, ANALYSES, CORPORA)
    assert scan.entries == (
        RegistryEntry("org/german-bert", "models.toml [[model]] #1 (org/german-bert)", language="de"),
        RegistryEntry("org/english-bert", "models.toml [[model]] #4 (org/english-bert)", language="en"),
    )
    assert [str(problem) for problem in scan.problems] == [
        "models.toml [[model]] #2 (org/french-bert): 'language' must be one of the XNLI languages "
        "['en', 'de', 'ar'] (corpora xnli_en, xnli_de, xnli_ar), got 'fr'",
        "models.toml [[model]] #3 (org/arabic-bert): 'language' must be one of the XNLI languages "
        "['en', 'de', 'ar'] (corpora xnli_en, xnli_de, xnli_ar), got 'xnli_ar'",
    ]


def test_a_random_init_control_is_an_entry_with_its_base_located_like_any_source(tmp_path: Path) -> None:
    """The folder after `random-init:` is relative to the registry file, as a folder entry's is, so the
    control's source is 'random-init:' and its base entry's source; a control naming no model is a problem."""
    (tmp_path / "ckpt").mkdir()
    registry = write(
        tmp_path / "models.toml",
        '[[model]]\nsource = "ckpt"\n\n'
        '[[model]]\nsource = "random-init:ckpt"\n\n'
        '[[model]]\nsource = "random-init:org/encoder@seed=3"\n\n'
        '[[model]]\nsource = "random-init:"\n',
    )
    scan = read_registry(registry, ANALYSES, CORPORA)
    folder = str((tmp_path / "ckpt").resolve())
    assert [entry.source for entry in scan.entries] == [
        folder,
        f"random-init:{folder}",
        "random-init:org/encoder@seed=3",
    ]
    assert [str(problem) for problem in scan.problems] == [
        "models.toml [[model]] #4 (random-init:): 'random-init:' names no model after 'random-init:': write "
        "'random-init:<hub id or path>' (seed 0) or 'random-init:<hub id or path>@seed=<n>'"
    ]
