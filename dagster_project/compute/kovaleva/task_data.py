"""GLUE task data for fine-tuning and scoring (Kovaleva §4.3, Table 1): a split's labelled pairs
encoded as GLUE evaluation does (pairs over max_len cut longest segment first, or dropped), padded
model inputs and length-sorted batches."""

from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from transformers import PreTrainedTokenizerBase

from dagster_project.corpora import CORPORA
from dagster_project.corpora.base import OVERLONG
from dagster_project.corpora.text_pairs import GLUE_TASKS


@dataclass(frozen=True)
class TaskData:
    """Encoded examples with their labels, in example_id order."""

    example_ids: list[int]
    token_ids: list[torch.Tensor]
    segments: list[torch.Tensor]
    labels: torch.Tensor  # (N,) float; class index or score

    def __len__(self) -> int:
        return len(self.example_ids)


def task_head(task: str) -> tuple[int, str]:
    """(num_labels, problem_type) of a GLUE task: STS-B is a 1-output regression."""
    if task not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task '{task}'; known: {sorted(GLUE_TASKS)}")
    names = GLUE_TASKS[task].label_names
    return (1, "regression") if names is None else (len(names), "single_label_classification")


@dataclass(frozen=True)
class EncodedTask:
    data: TaskData
    n_overlong: int  # examples over max_len pieces: truncated or dropped, as `overlong` says


def encode_task(
    texts: pl.DataFrame, tokenizer: PreTrainedTokenizerBase, max_len: int, overlong: str, corpus: str
) -> EncodedTask:
    """A GLUE split (example_id, text_a, text_b, label) encoded for fine-tuning and scoring.

    `truncate` (the default) cuts a pair to `max_len` pieces the way GLUE evaluation does
    (longest segment first), so every example is scored (RTE validation: 277, not the 244 that
    fit in 128); `drop` leaves overlong pairs out, as the attention analyses do.
    """
    if overlong not in OVERLONG:
        raise ValueError(f"overlong must be one of {OVERLONG}, got {overlong!r}")
    unlabelled = texts.filter(pl.col("label").is_null())
    if unlabelled.height:
        raise ValueError(
            f"{unlabelled.height} examples of '{corpus}' have no label (first example_id "
            f"{unlabelled['example_id'][0]}): fine-tuning and scoring need the labelled train/validation splits."
        )
    texts = texts.sort("example_id")
    segments = [texts["text_a"].to_list()]
    if texts["text_b"].is_not_null().any():
        segments.append(texts["text_b"].to_list())
    # split_special_tokens: '[SEP]' or '<s>' in a sentence is text, as in encode_corpus
    encoded = tokenizer(*segments, split_special_tokens=True, return_token_type_ids=True, verbose=False)
    token_ids, token_types = encoded["input_ids"], encoded["token_type_ids"]
    overlong_rows = [row for row, ids in enumerate(token_ids) if len(ids) > max_len]
    keep = list(range(len(token_ids)))
    if overlong == "drop":
        keep = sorted(set(keep) - set(overlong_rows))
    elif overlong_rows:
        cut = tokenizer(
            *([segment[row] for row in overlong_rows] for segment in segments),
            truncation="longest_first",
            max_length=max_len,
            split_special_tokens=True,
            return_token_type_ids=True,
        )
        for row, ids, types in zip(overlong_rows, cut["input_ids"], cut["token_type_ids"]):
            token_ids[row], token_types[row] = ids, types
    if not keep:
        raise ValueError(f"no example of '{corpus}' fits in {max_len} pieces; raise max_len or use overlong=truncate")
    example_ids = texts["example_id"].to_list()
    data = TaskData(
        example_ids=[example_ids[row] for row in keep],
        token_ids=[torch.tensor(token_ids[row]) for row in keep],
        segments=[torch.tensor(token_types[row]) for row in keep],
        labels=torch.tensor(texts["label"].to_numpy()[keep], dtype=torch.float32),
    )
    return EncodedTask(data, len(overlong_rows))


def read_task_split(
    data_root: Path, corpus: str, tokenizer: PreTrainedTokenizerBase, max_len: int, overlong: str
) -> EncodedTask:
    """The whole labelled split of a GLUE corpus, read from its files (the `<corpus>_examples`
    rows keep only the pairs that fit, up to the corpus's size) and encoded for scoring."""
    texts = CORPORA[corpus].read(data_root).texts
    return encode_task(texts, tokenizer, max_len, overlong, corpus)


def pad_inputs(
    data: TaskData, indices: list[int], pad_token_id: int, with_token_types: bool
) -> dict[str, torch.Tensor]:
    """Model inputs for some examples, padded to the longest of them."""
    pad = torch.nn.utils.rnn.pad_sequence
    input_ids = pad([data.token_ids[i] for i in indices], batch_first=True, padding_value=pad_token_id)
    lengths = torch.tensor([len(data.token_ids[i]) for i in indices], device=input_ids.device)
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    inputs = {"input_ids": input_ids, "attention_mask": (positions < lengths[:, None]).long()}
    if with_token_types:
        inputs["token_type_ids"] = pad([data.segments[i] for i in indices], batch_first=True, padding_value=0).long()
    return inputs


def length_sorted_batches(data: TaskData, batch_size: int) -> list[list[int]]:
    """Example indices in batches of similar length (less padding for evaluation)."""
    order = sorted(range(len(data)), key=lambda i: len(data.token_ids[i]))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
