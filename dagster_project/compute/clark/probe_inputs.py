"""The probes' fixed inputs (Clark et al. §5, Table 3): one forward pass over a gold-parsed
corpus, kept as ProbeBatch per length bucket: word-level attention features of each (dependent,
candidate head) pair and of ROOT, word vectors, and the gold heads UAS is scored on. probes.py
trains on them; nothing here is trained.

ROOT, as in the released code (heads use CoNLL numbering, 0 = ROOT sits where [CLS] is): ROOT is
candidate 0 and word j is candidate j + 1. Word vectors: the model's own input embeddings (mean
over a word's pieces), or a GloVe-style file's (read_word_vectors).

Shapes: B sentences padded to W words; K = layers x heads maps; D = word-vector size.
"""

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from transformers import PreTrainedModel

from dagster_project.compute.batching import BUILT_ON, length_batches
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.metrics import word_level_maps, word_piece_matrix

ROOT = 0  # candidate index of ROOT; word j is candidate j + 1
IGNORE = -100  # gold value of padded word slots (cross_entropy's ignore_index)


@dataclass(frozen=True)
class ProbeBatch:
    """Fixed probe inputs for B padded sentences (nothing here is trained)."""

    pair: torch.Tensor  # (B, M, W, W) feature m of (dependent i, candidate head j)
    root: torch.Tensor  # (B, R, W) feature r of ROOT as the head of word i
    vectors: torch.Tensor  # (B, W, D) fixed word vectors
    gold: torch.Tensor  # (B, W) int64 gold candidate index, IGNORE on padded slots
    scored: torch.Tensor  # (B, W) bool: counted in UAS (gold_heads: a real word, not punctuation, not the root)
    words: torch.Tensor  # (B, W) bool: real word slots

    @property
    def candidates(self) -> torch.Tensor:
        """(B, W, W + 1) allowed heads: ROOT, and every other real word."""
        width = self.words.shape[1]
        others = self.words[:, None, :] & ~torch.eye(width, dtype=torch.bool, device=self.words.device)[None]
        return torch.cat([torch.ones_like(others[..., :1]), others], -1)


def gold_heads(dependencies: pl.DataFrame) -> pl.DataFrame:
    """One gold head per surface word: (example_id, word_index, gold, punct, scored).

    A multiword token ("don't" = do + n't) is one surface word with several syntactic words;
    it takes the head of the first of them whose head is another word, else (a root half and
    halves headed inside the word) ROOT, as Table 1's int_dependency_edges picks its 'All'
    edge. gold is the candidate index (0 = ROOT, j + 1 = word j); punct marks UPOS PUNCT.

    scored: the words UAS counts, for every Table 3 row alike. Clark §5: "Given an input word,
    the classifier produces a probability distribution over other words in the sentence
    indicating how likely each other word is to be the syntactic head of the current one", and
    the baseline "always predicts the head is to the dependent's right": a head is another word,
    so the root word (no head word) is not scored, nor is punctuation. It is Table 1's 'All' set,
    whose right-branching UAS (26.3) is Table 3's (26).
    """
    return (
        dependencies.filter(pl.col("head_word_index").is_null() | (pl.col("head_word_index") != pl.col("word_index")))
        .sort("example_id", "word_index", pl.col("head_word_index").is_null(), "ud_id")
        .group_by("example_id", "word_index", maintain_order=True)
        .first()
        .select(
            "example_id",
            "word_index",
            gold=(pl.col("head_word_index") + 1).fill_null(ROOT).cast(pl.Int64),
            punct=pl.col("upos") == "PUNCT",
            scored=pl.col("head_word_index").is_not_null() & (pl.col("upos") != "PUNCT"),
        )
    )


def word_vectors(input_ids: torch.Tensor, membership: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
    """(B, W, D) mean of each word's pieces' rows of the input embedding matrix (V, D)."""
    counts = membership.sum(-1, keepdim=True).clamp(min=1)
    return torch.einsum("bwt,btd->bwd", membership / counts, embeddings[input_ids])


@dataclass(frozen=True)
class WordVectorTable:
    """Static word vectors read from a file (e.g. GloVe), kept for the words a corpus has."""

    name: str  # the file's name, recorded with the scores
    index: dict[str, int]  # word -> row of `matrix`
    matrix: torch.Tensor  # (V, D)

    def lookup(self, words: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(len(words), D) vectors: the word's, else its lowercase form's (GloVe is lowercased),
        else zeros; and (len(words),) bool: found."""
        device = self.matrix.device
        rows = torch.tensor([self.index.get(word, self.index.get(word.lower(), -1)) for word in words], device=device)
        found = rows >= 0
        vectors = torch.zeros(len(words), self.matrix.shape[1], device=device)
        vectors[found] = self.matrix[rows[found]]
        return vectors, found


def read_word_vectors(path: Path, words: Collection[str]) -> WordVectorTable:
    """The vectors of `words` (and their lowercase forms) from a text file with one word and its
    numbers per line, space-separated (GloVe's format; a word2vec "count dim" first line is skipped)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"word vector file {path} not found: run config word_vectors_file takes a GloVe-style text file "
            "(one word and its numbers per line, e.g. glove.840B.300d.txt)"
        )
    wanted = set(words) | {word.lower() for word in words}
    index: dict[str, int] = {}
    vectors: list[list[float]] = []
    dim = None
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            try:
                fields = raw.decode("utf-8").rstrip().split(" ")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}, line {number}: not UTF-8 ({error})") from error
            if number == 1 and len(fields) == 2 and all(field.isdigit() for field in fields):
                continue
            dim = dim or len(fields) - 1
            if len(fields) - 1 != dim or dim == 0:
                raise ValueError(
                    f"{path}, line {number}: {len(fields) - 1} numbers after the word, expected {dim} as on the "
                    "first line (one word and its numbers per line, space-separated)"
                )
            if fields[0] in wanted and fields[0] not in index:
                try:
                    vectors.append([float(value) for value in fields[1:]])
                except ValueError as error:
                    raise ValueError(f"{path}, line {number}: {error}") from error
                index[fields[0]] = len(index)
    if not vectors:
        raise ValueError(f"{path}: none of the {len(set(words))} corpus words has a vector; is it the right file?")
    return WordVectorTable(path.name, index, torch.tensor(vectors, dtype=torch.float32))


def attention_features(
    attn: torch.Tensor, membership: torch.Tensor, cls: torch.Tensor, sep: torch.Tensor, mode: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Word-level pair maps (B, K, W, W) and ROOT features (B, 4K + 1, W) of (B, L, H, T, T) attention.

    [CLS] and [SEP] (all of them) join the words as two extra slots of the word-level map, so
    the ROOT features are each head's attention word -> [CLS], word -> [SEP], [CLS] -> word,
    [SEP] -> word, then a constant 1 (ROOT's bias).
    """
    slots = torch.cat([cls[:, None].float(), membership, sep[:, None].float()], 1)
    maps = word_level_maps(attn, slots, mode).flatten(1, 2)  # (B, K, W + 2, W + 2)
    words = slice(1, -1)
    pair = maps[:, :, words, words].contiguous()
    root = torch.cat(
        [
            maps[:, :, words, 0],
            maps[:, :, words, -1],
            maps[:, :, 0, words],
            maps[:, :, -1, words],
            torch.ones_like(pair[:, :1, 0]),
        ],
        1,
    )
    return pair, root


def _padded(rows: list[list], fill: float, dtype: torch.dtype) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(row, dtype=dtype, device=BUILT_ON) for row in rows], batch_first=True, padding_value=fill
    )


def probe_batches(
    model: PreTrainedModel,
    tokens: pl.DataFrame,
    words: pl.DataFrame,
    dependencies: pl.DataFrame,
    pad_token_id: int,
    takes_token_types: bool,
    word_mode: str,
    batch_tokens: int,
    progress: Callable[[int, int, float], None] | None = None,
    vector_table: WordVectorTable | None = None,
) -> list[ProbeBatch]:
    """Forward passes over a gold-parsed corpus, kept as probe inputs batched by length.

    `tokens`, `words`, `dependencies` are one (model, corpus) partition of those tables (`words`
    with its `word` column when a `vector_table` is given). Word vectors are the table's, else
    the model's own input embeddings (mean over each word's pieces). The forward
    runs on the model's device and dtype; the probe inputs are float32 on that device.
    """
    per_example = (
        words.sort("example_id", "word_index")
        .join(gold_heads(dependencies), on=("example_id", "word_index"), how="left")
        .group_by("example_id", maintain_order=True)
        .agg(
            *([pl.col("word")] if vector_table else []),
            start=pl.col("piece_start").fill_null(0),
            end=pl.col("piece_end").fill_null(0),
            gold=pl.col("gold").fill_null(IGNORE),
            scored=pl.col("scored").fill_null(False),
            real=pl.col("word_index").is_not_null(),
        )
    )
    by_id = {row["example_id"]: row for row in per_example.iter_rows(named=True)}
    missing = set(tokens["example_id"].unique()) - set(by_id)
    if missing:
        raise ValueError(
            f"{len(missing)} examples have tokens but no words (e.g. example_id {min(missing)}): "
            "re-materialize the corpus asset."
        )
    device = model.device
    embeddings = model.get_input_embeddings().weight.detach().float()
    total = tokens["example_id"].n_unique()
    started, done, batches = time.perf_counter(), 0, []
    with torch.no_grad():  # not inference_mode: the probes train on these tensors
        for batch in length_batches(tokens, pad_token_id, batch_tokens, takes_token_types):
            batch = batch.to(device)
            rows = [by_id[example_id] for example_id in batch.example_ids.tolist()]
            membership = word_piece_matrix(
                _padded([row["start"] for row in rows], 0, torch.int64).to(device),
                _padded([row["end"] for row in rows], 0, torch.int64).to(device),
                batch.masks.valid.shape[1],
            )
            attn = float32_maps(model(**batch.inputs, output_attentions=True).attentions)
            pair, root = attention_features(attn, membership, batch.masks.cls, batch.masks.sep, word_mode)
            if vector_table is None:
                vectors = word_vectors(batch.inputs["input_ids"], membership, embeddings)
            else:
                looked_up = [vector_table.lookup(row["word"])[0] for row in rows]
                vectors = torch.nn.utils.rnn.pad_sequence(looked_up, batch_first=True).to(device)
            batches.append(
                ProbeBatch(
                    pair=pair,
                    root=root,
                    vectors=vectors,
                    gold=_padded([row["gold"] for row in rows], IGNORE, torch.int64).to(device),
                    scored=_padded([row["scored"] for row in rows], False, torch.bool).to(device),
                    words=_padded([row["real"] for row in rows], False, torch.bool).to(device),
                )
            )
            done += len(rows)
            if progress:
                progress(done, total, time.perf_counter() - started)
    return batches
