"""Fixtures every test folder may use: tiny random-weight models on disk (tests/tiny_models.py),
the data directory, the PostgreSQL and S3 servers (tests/servers.py, standard library only), and
folders that refuse writes: a disk that fills, a read-only folder.

Nothing here imports more than torch, transformers, polars and the compute layer, so
tests/device runs where only those are installed (a GPU machine without the project's
warehouse stack); the warehouse and Dagster fixtures (`conn`, `resources`) live in the
conftest.py of the folders that use them.
"""

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
import torch
from transformers import (
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    PreTrainedTokenizerBase,
)

from dagster_project import settings
from dagster_project.compute.models import LoadedEncoder, load_encoder
from dagster_project.corpora import encode_corpus, read_demo_pairs
from tests.servers import PostgresServer, S3Server, ServerUnavailable, start_postgres, start_s3
from tests.tiny_models import bert_tokenizer, save_model, tiny_config

# Folders in the order their files start on the test workers: the longest files (a MiniLM run,
# subprocess runs, servers, a wheel install) first, so no worker is left with one of them at the end.
FOLDERS_LONGEST_FIRST = ("integration", "deploy", "storage", "assets", "device", "unit", "views")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def folder_rank(item: pytest.Item) -> int:
        folder = item.path.parent.name
        return FOLDERS_LONGEST_FIRST.index(folder) if folder in FOLDERS_LONGEST_FIRST else len(FOLDERS_LONGEST_FIRST)

    items.sort(key=folder_rank)  # stable: each file's tests keep their order


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerBase:
    """The bert-base-uncased vocabulary of the default model."""
    return bert_tokenizer()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: PreTrainedTokenizerBase) -> Path:
    """A 2-layer, 4-head BERT with random weights and the bert-base-uncased vocabulary, the same
    whichever tests ran before (seed 1: the passes' own random draws use seed 0, which would
    redraw these very weights)."""
    torch.manual_seed(1)
    return save_model(tmp_path_factory.mktemp("tiny-bert"), BertModel(tiny_config(tokenizer.vocab_size)), tokenizer)


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: PreTrainedTokenizerBase) -> Path:
    """The tiny BERT with a masked-LM head."""
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny_config(tokenizer.vocab_size))
    return save_model(tmp_path_factory.mktemp("tiny-mlm"), model, tokenizer)


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: PreTrainedTokenizerBase) -> Path:
    """The tiny BERT with a 3-class sequence-classification head."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(tokenizer.vocab_size, num_labels=3))
    return save_model(tmp_path_factory.mktemp("tiny-classifier"), model, tokenizer)


@pytest.fixture(scope="session")
def encoder(tiny_model_dir: Path) -> LoadedEncoder:
    """The tiny BERT, loaded."""
    return load_encoder(str(tiny_model_dir))


@pytest.fixture(scope="session")
def demo_tokens(encoder: LoadedEncoder) -> pl.DataFrame:
    """The tiny BERT's pieces of 12 demo pairs."""
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).tokens


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CLI test's environment: every location in tmp_path, the data directory there and empty.
    Returns the warehouse path."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("ATTN_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("ATTN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ATTN_CHARTS_DIR", str(tmp_path / "charts"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return tmp_path / "warehouse.duckdb"


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch finds neither a CUDA nor an MPS device (nothing else changes)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    root = settings.data_dir()
    if not (root / "xnli").is_dir():
        pytest.skip(f"shared data directory not found at {root} (set ATTN_DATA_DIR)")
    return root


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    """A PostgreSQL cluster from the machine's binaries on a free port (tests/servers.py); skips
    saying why where none can start."""
    try:
        server = start_postgres()
    except ServerUnavailable as error:
        pytest.skip(str(error))
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A URL (with password) of a new empty database on the session's PostgreSQL."""
    return postgres_server.url(postgres_server.create_database())


@pytest.fixture(scope="session")
def s3_server() -> S3Server:
    """moto's S3 on a free port (tests/servers.py)."""
    try:
        server = start_s3()
    except ServerUnavailable as error:
        pytest.skip(str(error))
    yield server
    server.stop()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs, a disk that fills (mounting needs root; skipped elsewhere)."""
    folder = tmp_path / "tiny-disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "--lazy", str(folder)], check=True)


@pytest.fixture
def make_read_only() -> Iterator[Callable[[Path], None]]:
    """make_read_only(folder): no file can be created, renamed or deleted in `folder` until the test
    ends, for root too (chmod does not stop root: the immutable attribute, chattr +i, does; skipped
    where that is refused)."""
    locked: list[Path] = []

    def lock(folder: Path) -> None:
        if os.geteuid() != 0:
            folder.chmod(0o555)
        elif subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("cannot make a folder read-only here: chattr +i refused")
        locked.append(folder)

    yield lock
    for folder in locked:
        if os.geteuid() != 0:
            folder.chmod(0o755)
        else:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
