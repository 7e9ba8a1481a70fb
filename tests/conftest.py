"""Shared fixtures: a tiny random-weight BERT on disk, temporary warehouses, the data directory."""

import os

# Before torch is imported: 2-thread torch spins (and slows ~4x) when a core is busy.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# No hub is reachable here; fail fast instead of retrying the network for unknown ids.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import duckdb  # noqa: E402
import polars as pl  # noqa: E402
import pytest  # noqa: E402
from transformers import AutoTokenizer, BertConfig, BertModel  # noqa: E402

from dagster_project import settings  # noqa: E402
from dagster_project.corpora import encode_corpus, read_demo_pairs  # noqa: E402
from dagster_project.compute.models import DEFAULT_MODEL, LoadedEncoder, load_encoder, resolve_source  # noqa: E402
from dagster_project.storage.warehouse import apply_views  # noqa: E402

TINY_LAYERS, TINY_HEADS = 2, 4


def tiny_config(vocab_size: int, **extra) -> BertConfig:
    """The tiny BERT's config: 2 layers x 4 heads, hidden size 32 (extra: e.g. num_labels)."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=TINY_LAYERS,
        num_attention_heads=TINY_HEADS,
        intermediate_size=64,
        max_position_embeddings=160,
        **extra,
    )


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 4-head BERT with random weights and the bert-base-uncased vocabulary."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(resolve_source(DEFAULT_MODEL)[0])
    config = tiny_config(tokenizer.vocab_size)
    model = BertModel(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def encoder(tiny_model_dir: Path) -> LoadedEncoder:
    """The tiny BERT, loaded."""
    return load_encoder(str(tiny_model_dir))


@pytest.fixture(scope="session")
def demo_tokens(encoder: LoadedEncoder) -> pl.DataFrame:
    """The tiny BERT's pieces of 12 demo pairs."""
    return encode_corpus(read_demo_pairs(), encoder.tokenizer, 128, 12, 0).tokens


@pytest.fixture
def conn() -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with every table and view."""
    connection = duckdb.connect(":memory:")
    apply_views(connection)
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    root = settings.data_dir()
    if not (root / "xnli").is_dir():
        pytest.skip(f"shared data directory not found at {root} (set ATTN_DATA_DIR)")
    return root
