"""Attention-based probing classifiers for dependency heads (Clark et al. §5, Table 3).

Each probe is a graph-based head selector: for dependent word i it scores every candidate
head (ROOT and the other words of the sentence) and a softmax picks one. The scores are
linear in the probe's parameters (multinomial logistic regression on fixed features), so
zero initialisation plus Adam over seeded, shuffled batches is deterministic.

ROOT, as in the released code (heads use CoNLL numbering, 0 = ROOT sits where [CLS] is):
ROOT is candidate 0 and word j is candidate j + 1; the ROOT score of word i comes from each
head's attention between i and [CLS] / [SEP] (both directions) plus a constant feature. ROOT
is trained on but never scored: UAS counts the words whose head is another word, Clark §5's
"distribution over other words in the sentence" (probe_inputs.gold_heads), the word set of Table 1's "All".

The attention-and-words probe learns only W and U ("only the two weight matrices W and U are
learned", Clark §5); a learned bias per map is the option `bias` (ProbeSettings.word_probe_bias).

The distance baseline is the paper's other parser: a one-hidden-layer network over the two
words' vectors and distance features (DistanceProbe), not a linear probe.

Word vectors: the paper's are GloVe. Without a vector file the probes use the model's own
input embeddings (mean over a word's pieces), which are not GloVe and are labelled so; with
one (GloVe's text format, probe_inputs.read_word_vectors) they use its vectors.

Shapes: B sentences padded to W words; K = layers x heads maps; D = word-vector size.
"""

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import polars as pl
import torch
from transformers import AutoModel, PreTrainedModel

from dagster_project.compute.backoff import BackOff
from dagster_project.compute.clark.probe_inputs import (
    IGNORE,
    ROOT,
    ProbeBatch,
    WordVectorTable,
    probe_batches,
)
from dagster_project.compute.metrics import WORD_MODES
from dagster_project.compute.models import LoadedEncoder

SHORT_DISTANCE = 5  # distance baseline: indicators of the offsets -5..-1 and 1..5 ("short distances")
DISTANCE_FEATURES = 2 * SHORT_DISTANCE + 4  # indicators, then ahead and behind as log(1 + d) and d / 10
DISTANCE_HIDDEN = 64  # the distance baseline's hidden units
DISTANCE_LEARNING_RATE = 0.01  # its Adam step (the linear probes' 0.05 is too large for the network)
INPUT_EMBEDDINGS = "input_embeddings"  # `word_vectors` of the probes without a vector file: not GloVe
PROBES = ("right_branching", "attn", "attn_words", "distance_words", "random_init_attn_words")  # the suite's, in order

Progress = Callable[[int, int, float], None]  # progress(done, total, seconds)


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
