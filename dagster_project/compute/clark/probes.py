"""Attention-based probing classifiers for dependency heads (Clark et al. §5, Table 3).

Each probe is a graph-based head selector: for dependent word i it scores every candidate
head (ROOT and the other words of the sentence) and a softmax picks one. The scores are
linear in the probe's parameters (multinomial logistic regression on fixed features), so
zero initialisation plus Adam over seeded, shuffled batches is deterministic.

ROOT, as in the released code (heads use CoNLL numbering, 0 = ROOT sits where [CLS] is):
ROOT is candidate 0 and word j is candidate j + 1; the ROOT score of word i comes from each
head's attention between i and [CLS] / [SEP] (both directions) plus a constant feature. ROOT
is trained on but never scored: UAS counts the words whose head is another word, Clark §5's
"distribution over other words in the sentence" (gold_heads), the word set of Table 1's "All".

The attention-and-words probe learns only W and U ("only the two weight matrices W and U are
learned", Clark §5); a learned bias per map is the option `bias` (ProbeSettings.word_probe_bias).

The distance baseline is the paper's other parser: a one-hidden-layer network over the two
words' vectors and distance features (DistanceProbe), not a linear probe.

Word vectors: the paper's are GloVe. Without a vector file the probes use the model's own
input embeddings (mean over a word's pieces), which are not GloVe and are labelled so; with
one (GloVe's text format, read_word_vectors) they use its vectors.

Shapes: B sentences padded to W words; K = layers x heads maps; D = word-vector size.
"""

import copy
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl
import torch
from transformers import AutoModel, PreTrainedModel

from dagster_project.compute.backoff import BackOff
from dagster_project.compute.batching import BUILT_ON, length_batches
from dagster_project.compute.devices import float32_maps
from dagster_project.compute.metrics import WORD_MODES, word_level_maps, word_piece_matrix
from dagster_project.compute.models import LoadedEncoder

ROOT = 0  # candidate index of ROOT; word j is candidate j + 1
IGNORE = -100  # gold value of padded word slots (cross_entropy's ignore_index)
SHORT_DISTANCE = 5  # distance baseline: indicators of the offsets -5..-1 and 1..5 ("short distances")
DISTANCE_FEATURES = 2 * SHORT_DISTANCE + 4  # indicators, then ahead and behind as log(1 + d) and d / 10
DISTANCE_HIDDEN = 64  # the distance baseline's hidden units
DISTANCE_LEARNING_RATE = 0.01  # its Adam step (the linear probes' 0.05 is too large for the network)
INPUT_EMBEDDINGS = "input_embeddings"  # `word_vectors` of the probes without a vector file: not GloVe
PROBES = ("right_branching", "attn", "attn_words", "distance_words", "random_init_attn_words")  # the suite's, in order

Progress = Callable[[int, int, float], None]  # progress(done, total, seconds)


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


class HeadProbe(torch.nn.Module):
    """Clark's probe: score(i, j) = sum_m weight_m(i, j) * pair_m(i, j).

    Without word vectors weight_m is one learned scalar per feature map (the attention-only
    probe: w_k for alpha_ij and u_k for alpha_ji when `both_directions`). With word vectors
    weight_m(i, j) = W_m . (v_i + v_j concatenated) (the attention-and-words probe: W for
    alpha_ij, U for alpha_ji), plus a learned b_m only with `bias`. ROOT's score is
    sum_r rho_r(i) * root_r(i), rho_r a scalar or W'_r . v_i (+ b'_r with `bias`) alike.
    """

    def __init__(
        self, n_pair: int, n_root: int, word_dim: int | None, both_directions: bool, bias: bool = False
    ) -> None:
        super().__init__()
        self.both_directions = both_directions
        self.uses_words = word_dim is not None
        maps = n_pair * (2 if both_directions else 1)

        def zeros(*shape):
            return torch.nn.Parameter(torch.zeros(*shape))

        if word_dim is None or bias:  # the attention-only probe's weights, or the words probe's bias
            self.pair_bias, self.root_bias = zeros(maps), zeros(n_root)
        else:  # the paper's words probe: fixed zeros, so forward stays one formula
            self.register_buffer("pair_bias", torch.zeros(maps))
            self.register_buffer("root_bias", torch.zeros(n_root))
        if word_dim is not None:
            self.pair_dependent, self.pair_candidate = zeros(maps, word_dim), zeros(maps, word_dim)
            self.root_dependent = zeros(n_root, word_dim)

    def forward(self, batch: ProbeBatch) -> torch.Tensor:
        """(B, W, W + 1) logits over candidates, disallowed ones at -inf."""
        pair = batch.pair
        if self.both_directions:
            pair = torch.cat([pair, pair.transpose(-1, -2)], 1)
        word_scores = torch.einsum("m,bmij->bij", self.pair_bias, pair)
        root_scores = torch.einsum("r,bri->bi", self.root_bias, batch.root)
        if self.uses_words:
            dependent = torch.einsum("bwd,md->bmw", batch.vectors, self.pair_dependent)
            candidate = torch.einsum("bwd,md->bmw", batch.vectors, self.pair_candidate)
            word_scores = (
                word_scores
                + torch.einsum("bmi,bmij->bij", dependent, pair)
                + torch.einsum("bmj,bmij->bij", candidate, pair)
            )
            root_scores = root_scores + torch.einsum("bwd,rd,brw->bw", batch.vectors, self.root_dependent, batch.root)
        logits = torch.cat([root_scores[..., None], word_scores], -1)
        return logits.masked_fill(~batch.candidates, float("-inf"))


def probe_for(batch: ProbeBatch, use_words: bool, both_directions: bool, bias: bool = False) -> HeadProbe:
    """A zero-initialised probe sized for the features of `batch`, built on the CPU and moved to their
    device; `bias` gives the attention-and-words probe a learned bias (not the paper's)."""
    with torch.device("cpu"):
        probe = HeadProbe(
            batch.pair.shape[1],
            batch.root.shape[1],
            batch.vectors.shape[-1] if use_words else None,
            both_directions,
            bias,
        )
    return probe.to(batch.pair.device)


def distance_features(width: int, device: torch.device | None = None) -> torch.Tensor:
    """(W, W, DISTANCE_FEATURES) features of candidate head j for dependent i (Clark's footnote 5:
    "indicator features for short distances as well as continuous distance features, with
    distance ahead/behind treated separately"): one-hot of the offset j - i in -5..-1, 1..5, then
    log(1 + ahead), log(1 + behind), ahead / 10, behind / 10, with ahead = max(j - i, 0) and
    behind = max(i - j, 0)."""
    positions = torch.arange(width, device=device)
    offsets = positions[None, :] - positions[:, None]
    bins = torch.cat(
        [torch.arange(-SHORT_DISTANCE, 0, device=device), torch.arange(1, SHORT_DISTANCE + 1, device=device)]
    )
    ahead, behind = offsets.clamp(min=0).float(), (-offsets).clamp(min=0).float()
    continuous = torch.stack([ahead.log1p(), behind.log1p(), ahead / 10, behind / 10], -1)
    return torch.cat([(offsets[..., None] == bins).float(), continuous], -1)


class DistanceProbe(torch.nn.Module):
    """Clark's distance baseline: score(i, j) = u . relu(A v_i + B v_j + C d_ij + b), a one-hidden-
    layer network over the dependent's and the candidate's word vectors and their distance
    features d_ij; ROOT's score is u . relu(A v_i + r + b) with a learned r. No attention."""

    def __init__(self, word_dim: int, hidden: int, seed: int) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):  # seeded initialisation, the global generator untouched
            torch.manual_seed(seed)
            self.dependent = torch.nn.Linear(word_dim, hidden)
            self.candidate = torch.nn.Linear(word_dim, hidden, bias=False)
            self.distance = torch.nn.Linear(DISTANCE_FEATURES, hidden, bias=False)
            self.root = torch.nn.Parameter(0.1 * torch.randn(hidden))
            self.output = torch.nn.Linear(hidden, 1, bias=False)

    def forward(self, batch: ProbeBatch) -> torch.Tensor:
        """(B, W, W + 1) logits over candidates, disallowed ones at -inf."""
        dependent = self.dependent(batch.vectors)  # (B, W, hidden)
        candidate = self.candidate(batch.vectors)
        distance = self.distance(distance_features(batch.words.shape[1], batch.vectors.device))  # (W, W, hidden)
        hidden = torch.relu(dependent[:, :, None] + candidate[:, None, :] + distance[None])
        word_scores = self.output(hidden).squeeze(-1)
        root_scores = self.output(torch.relu(dependent + self.root)).squeeze(-1)
        logits = torch.cat([root_scores[..., None], word_scores], -1)
        return logits.masked_fill(~batch.candidates, float("-inf"))


def distance_probe_for(batch: ProbeBatch, hidden: int, seed: int) -> DistanceProbe:
    """A seeded distance baseline sized for the word vectors of `batch`, initialised on the CPU (the same
    weights on every device) and moved to their device."""
    with torch.device("cpu"):
        probe = DistanceProbe(batch.vectors.shape[-1], hidden, seed)
    return probe.to(batch.vectors.device)


def train_probe(
    probe: torch.nn.Module,
    batches: Sequence[ProbeBatch],
    epochs: int,
    learning_rate: float,
    seed: int,
    progress: Callable[[int, int, float], None] | None = None,
    micro_batch: int | None = None,
) -> float:
    """Adam on the mean cross-entropy of each batch's words, batches in a seeded random order
    per epoch. Returns the last epoch's mean loss per word. A batch goes through the probe
    `micro_batch` sentences at a time (None: whole), its gradients summed; a batch that runs out of
    device memory is taken again at half the micro-batch (logged), down to one sentence."""
    if not batches:
        raise ValueError("train_probe got no training batches: the training corpus has no sentences with gold heads.")
    optimizer = torch.optim.Adam(probe.parameters(), lr=learning_rate)
    order = torch.Generator().manual_seed(seed)
    backoff = BackOff(
        "Probe training",
        "sentences per micro-batch",
        "Lower the run config's batch_tokens or the corpus's max_len, or run on a device with more memory "
        "(ATTN_DEVICE). Nothing was written.",
        batches[0].gold.device,
    )
    micro = micro_batch or max(len(batch.gold) for batch in batches)
    started = time.perf_counter()
    epoch_loss = float("nan")
    for epoch in range(epochs):
        total, count = 0.0, 0
        for index in torch.randperm(len(batches), generator=order, device=order.device).tolist():
            batch = batches[index]
            words = int((batch.gold != IGNORE).sum())
            while True:
                optimizer.zero_grad()
                try:
                    loss = sum(_part_loss(probe, part, words) for part in _sentence_parts(batch, micro))
                    break
                except torch.OutOfMemoryError as error:
                    reason = str(error)  # the traceback, which holds the batch's tensors, stays in the except clause
                micro = backoff.halved(min(micro, len(batch.gold)), reason)
            optimizer.step()
            total, count = total + loss * words, count + words
        epoch_loss = total / count
        if progress:
            progress(epoch + 1, epochs, time.perf_counter() - started)
    return epoch_loss


def _part_loss(probe: torch.nn.Module, part: ProbeBatch, words: int) -> float:
    """Backward pass of a part's share of its batch's mean cross-entropy (its words' summed loss over
    the batch's `words`); returns that share."""
    loss = (
        torch.nn.functional.cross_entropy(
            probe(part).flatten(0, 1), part.gold.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        / words
    )
    loss.backward()
    return loss.item()


def _sentence_parts(batch: ProbeBatch, size: int) -> list[ProbeBatch]:
    """A batch `size` sentences at a time."""
    tensors = [getattr(batch, field.name) for field in fields(ProbeBatch)]
    return [
        ProbeBatch(*(tensor[start : start + size] for tensor in tensors)) for start in range(0, len(batch.gold), size)
    ]


def predict_heads(probe: torch.nn.Module, batch: ProbeBatch) -> torch.Tensor:
    """(B, W) most probable candidate per word (0 = ROOT, j + 1 = word j)."""
    with torch.no_grad():
        return probe(batch).argmax(-1)


def right_branching(batch: ProbeBatch) -> torch.Tensor:
    """(B, W) baseline heads: the next word ("always predicts the head is to the dependent's right",
    Clark §5); the last word gets ROOT, a miss on every scored word."""
    width = batch.words.shape[1]
    following = torch.cat([batch.words[:, 1:], torch.zeros_like(batch.words[:, :1])], 1)
    return torch.where(following, torch.arange(2, width + 2, device=following.device)[None], ROOT)


def attachment_counts(predictions: Sequence[torch.Tensor], batches: Sequence[ProbeBatch]) -> tuple[int, int]:
    """(correct, scored) head attachments over the scored words of every batch."""
    correct = sum(int(((heads == batch.gold) & batch.scored).sum()) for heads, batch in zip(predictions, batches))
    return correct, sum(int(batch.scored.sum()) for batch in batches)


def uas(predictions: Sequence[torch.Tensor], batches: Sequence[ProbeBatch]) -> float:
    """Unlabelled attachment score over the scored words (gold_heads: not punctuation, not the root)."""
    correct, total = attachment_counts(predictions, batches)
    if total == 0:
        raise ValueError("No scored words: every word is punctuation, a root or padding; nothing to compute UAS on.")
    return correct / total


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


def random_init_encoder(model: PreTrainedModel, seed: int) -> PreTrainedModel:
    """The same architecture with the pre-trained embedding module (word, position, token-type
    embeddings and their LayerNorm) and every other weight freshly initialised from `seed` (on the
    CPU, so the same weights on every device), on `model`'s device and dtype."""
    pretrained = {name: value for name, value in model.state_dict().items() if name.startswith("embeddings.")}
    if not pretrained:
        raise ValueError(
            f"{type(model).__name__} has no `embeddings` module: cannot build the random-init variant that keeps them."
        )
    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(seed)
        fresh = AutoModel.from_config(copy.deepcopy(model.config), attn_implementation="eager")
    fresh.load_state_dict(pretrained, strict=False)
    return fresh.to(model.device, model.dtype).eval()


def keep_first_examples(frames: dict[str, pl.DataFrame], count: int | None) -> dict[str, pl.DataFrame]:
    """The rows of the first `count` example ids (all when None) of several frames of one corpus."""
    if count is None:
        return frames
    kept = frames["tokens"]["example_id"].unique().sort().head(count).implode()
    return {name: frame.filter(pl.col("example_id").is_in(kept)) for name, frame in frames.items()}


@dataclass(frozen=True)
class ProbeSettings:
    """The probe suite's hyperparameters: each changes what the probes learn."""

    word_mode: str  # how a split word's attention row is formed (WORD_MODES)
    epochs: int
    learning_rate: float  # the linear probes' Adam step
    distance_learning_rate: float  # the distance baseline's
    distance_hidden: int  # the distance baseline's hidden units
    seed: int  # batch order of training, the random-init encoder's and the distance network's weights
    batch_tokens: int  # padded word pieces per forward batch, which is also a training batch
    word_probe_bias: bool = False  # the attention-and-words probes also learn a bias (Clark §5: only W and U)

    def __post_init__(self) -> None:
        if self.word_mode not in WORD_MODES:
            raise ValueError(f"word_mode must be one of {WORD_MODES}, got '{self.word_mode}'")


@dataclass(frozen=True)
class ProbeCorpus:
    """A gold-parsed corpus as the probes read it."""

    name: str  # recorded as train_corpus, and named in the progress of its forward passes
    frames: dict[str, pl.DataFrame]  # its tokens, words (with `word`) and dependencies rows


@dataclass(frozen=True)
class ProbeScores:
    scores: pl.DataFrame  # the probe_scores rows: one per probe of PROBES
    forward_seconds: float  # the pre-trained encoder's forward passes over both corpora


@dataclass(frozen=True)
class _SuiteRun:
    """What every step of the probe suite shares."""

    encoder: LoadedEncoder
    corpora: tuple[ProbeCorpus, ProbeCorpus]  # train, test
    settings: ProbeSettings
    vector_table: WordVectorTable | None
    log: Callable[[str], None]
    progress: Callable[[str], Progress]  # a progress callback for the named pass

    def inputs(self, model: PreTrainedModel, label: str) -> tuple[list[ProbeBatch], list[ProbeBatch]]:
        """The train and test probe inputs from `model`'s forward passes (`label` names the model)."""
        return tuple(
            probe_batches(
                model,
                corpus.frames["tokens"],
                corpus.frames["words"],
                corpus.frames["dependencies"],
                self.encoder.tokenizer.pad_token_id or 0,
                self.encoder.spec.takes_token_types,
                self.settings.word_mode,
                self.settings.batch_tokens,
                self.progress(f"{label} forward {corpus.name}"),
                self.vector_table,
            )
            for corpus in self.corpora
        )

    def score(
        self,
        probe: str,
        word_vectors: str,
        test: list[ProbeBatch],
        predictions: list[torch.Tensor],
        since: float,
        loss: float | None = None,
    ) -> dict:
        """The probe_scores row of `predictions` on the test batches, timed from `since`."""
        correct, total = attachment_counts(predictions, test)
        row = {
            "probe": probe,
            "word_vectors": word_vectors,
            "uas": correct / total,
            "n_words": total,
            "n_correct": correct,
            "train_loss": loss,
            "seconds": time.perf_counter() - since,
        }
        self.log(f"{probe}: UAS {100 * correct / total:.1f} on {total} words ({row['seconds']:.0f} s)")
        return row

    def fit(
        self,
        probe: str,
        word_vectors: str,
        model: torch.nn.Module,
        train: list[ProbeBatch],
        test: list[ProbeBatch],
        since: float,
        learning_rate: float | None = None,
    ) -> dict:
        """`model` trained on the train batches (at the linear probes' learning rate unless given),
        then scored on the test batches."""

        def report(done: int, total: int, seconds: float) -> None:
            self.log(f"{probe}: epoch {done}/{total} in {seconds:.0f} s")

        rate = self.settings.learning_rate if learning_rate is None else learning_rate
        loss = train_probe(model, train, self.settings.epochs, rate, self.settings.seed, report)
        return self.score(probe, word_vectors, test, [predict_heads(model, batch) for batch in test], since, loss)


def run_probe_suite(
    encoder: LoadedEncoder,
    train_corpus: ProbeCorpus,
    test_corpus: ProbeCorpus,
    settings: ProbeSettings,
    vector_table: WordVectorTable | None,
    log: Callable[[str], None],
    progress: Callable[[str], Progress],
) -> ProbeScores:
    """Clark's Table 3: every probe of PROBES trained on `train_corpus` and scored by UAS on `test_corpus`.

    On the pre-trained encoder's features: right-branching, the attention-only probe, the
    attention-and-word-vector probe and the distance baseline; then the attention-and-word-vector
    probe on a random-init encoder's. Word vectors are the `vector_table`'s, else the encoder's
    input embeddings. `log` takes each probe's epochs and score; `progress` gives the callback of
    the named forward pass.
    """
    run = _SuiteRun(encoder, (train_corpus, test_corpus), settings, vector_table, log, progress)
    vectors_name = INPUT_EMBEDDINGS if vector_table is None else f"file:{vector_table.name}"
    since = time.perf_counter()
    train, test = run.inputs(encoder.model, "pre-trained")
    forward_seconds = time.perf_counter() - since
    rows = [run.score("right_branching", "none", test, [right_branching(batch) for batch in test], time.perf_counter())]
    rows.append(run.fit("attn", "none", probe_for(train[0], False, True), train, test, time.perf_counter()))
    bias = settings.word_probe_bias
    words_probe = probe_for(train[0], True, True, bias)
    rows.append(run.fit("attn_words", vectors_name, words_probe, train, test, time.perf_counter()))
    distance = distance_probe_for(train[0], settings.distance_hidden, settings.seed)
    rate = settings.distance_learning_rate
    rows.append(run.fit("distance_words", vectors_name, distance, train, test, time.perf_counter(), rate))
    del train, test  # the pre-trained features leave memory before the random-init encoder's come
    since = time.perf_counter()
    train, test = run.inputs(random_init_encoder(encoder.model, settings.seed), "random-init")
    words_probe = probe_for(train[0], True, True, bias)
    rows.append(run.fit("random_init_attn_words", vectors_name, words_probe, train, test, since))
    scores = pl.DataFrame(rows).with_columns(
        train_corpus=pl.lit(train_corpus.name),
        n_train_sentences=pl.lit(train_corpus.frames["tokens"]["example_id"].n_unique()),
        n_test_sentences=pl.lit(test_corpus.frames["tokens"]["example_id"].n_unique()),
        word_mode=pl.lit(settings.word_mode),
        epochs=pl.lit(settings.epochs),
        learning_rate=pl.lit(settings.learning_rate),
        word_probe_bias=pl.lit(bias),
        seed=pl.lit(settings.seed),
        torch_threads=pl.lit(torch.get_num_threads()),
    )
    return ProbeScores(scores, forward_seconds)
