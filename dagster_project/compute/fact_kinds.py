"""The registry of fact kinds: what the attention pass can write for a corpus.

Each kind names its warehouse table (schema in sql/schema/<table>.sql), what it needs from the
corpus besides its tokens, how it collects rows batch by batch, and the checks its rows must
pass. Corpora list the kinds they get (CorpusSpec.fact_kinds); the fact assets, their checks
and the tables they write are derived from here. Adding a kind: an entry below, its per-batch
function in `attention_facts`, its schema file and a view.
"""

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import polars as pl
import torch

from dagster_project.compute.attention_facts import (
    PatternCandidates,
    dense_head_maps,
    dense_relation_hits,
    feature_pair_columns,
    frame_link_columns,
    head_map_columns,
    pattern_map_candidates,
    pick_pattern_examples,
    received_attention_columns,
    relation_hit_columns,
    relation_hit_rows,
)
from dagster_project.compute.batching import Batch, dense_histograms, frame, histogram_columns, histogram_rows
from dagster_project.compute.checks import (
    CheckOutcome,
    example_maps_whole,
    finite,
    frame_link_bounds,
    histogram_masses,
    received_sums_to_one,
    relation_hit_targets,
    rows_per_example,
    rows_sum_to_one,
)
from dagster_project.compute.clark.head_clustering import QueryRows, distance_rows
from dagster_project.compute.host_frames import built_beside
from dagster_project.compute.metrics import PATTERNS, PatternThresholds
from dagster_project.compute.weightings import LAYER_MAP_HEAD, LAYER_WEIGHTINGS, value_norm_columns
from dagster_project.corpora import CorpusSpec

# What a corpus can give a kind besides its tokens (CorpusSpec.provides).
WORDS, SPACY_FEATURES, FRAME_LINKS = "words", "word_features", "frame_links"
PATTERN_EXAMPLES_PER_CLASS = 3  # Kovaleva Fig. 2: example maps kept per pattern class
# Clark Figs. 1 and 5: every head's whole map is kept for the corpus's first examples (example_id
# order), and for the first example with each Fig. 5 relation (figure_5_examples); how many in all
# is recorded in head_example_maps.kept_examples.
HEAD_MAP_EXAMPLES = 2
# Clark Fig. 5's named relations (SD, as clark_head_example_maps names them) by the UD relation of
# their gold edges (int_dependency_edges reads them the same way; pobj: a UD case edge of an ADP).
FIGURE_5_UD_RELATIONS = {"dobj": "obj", "det": "det", "poss": "nmod:poss", "auxpass": "aux:pass", "pobj": "case"}
HISTOGRAM_CHECK = "Per example and head: histogram pair counts sum to n^2 and weights to n."


@dataclass(frozen=True)
class PassInputs:
    """What the kinds of one pass read besides the attention maps."""

    n_examples: int
    n_layers: int
    n_heads: int
    words: pl.DataFrame | None = None  # example_id, word_index, piece_start, piece_end (+ WORD_FEATURES)
    frame_links: pl.DataFrame | None = None  # example_id and attention_facts.FRAME_LINK_COLUMNS
    # example_id and attention_facts.FEATURE_LINK_COLUMNS (attention_facts.feature_pair_links)
    feature_links: pl.DataFrame | None = None
    word_mode: str = "mean"  # a split word's row from its pieces' rows (metrics.WORD_MODES)
    thresholds: PatternThresholds = field(default_factory=PatternThresholds)
    pattern_examples: int = PATTERN_EXAMPLES_PER_CLASS  # example maps kept per pattern class
    # the example ids whose whole maps head_example_maps keeps: the corpus's first HEAD_MAP_EXAMPLES
    # and figure_5_examples
    map_examples: tuple[int, ...] = ()


class Collector(Protocol):
    """Rows of one kind, gathered batch by batch over a pass, and within a batch layer by layer in layer
    order: `attn` (B, L, H, T, T) holds the L layers from `first_layer` (1-based) on, and `summaries` their
    head summaries. A kind whose rows span layers (head distances, pattern examples) keeps what it needs
    of each layer until the batch's last (PassInputs.n_layers)."""

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Gather the rows of one batch's layers from `first_layer` on (`attn`, and their head `summaries`)."""

    def finish(self) -> pl.DataFrame:
        """The kind's rows of the whole pass; an empty frame when it gathered none."""


@dataclass
class BatchRows:
    """A kind whose rows are a function of each batch alone."""

    rows: Callable[[torch.Tensor, Batch, dict[str, np.ndarray], int], list[dict[str, np.ndarray]]]
    label: Callable[[pl.DataFrame], pl.DataFrame] = lambda rows: rows  # columns added once, at the end
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Keep the rows `rows` makes of the batch's layers."""
        self.parts.extend(self.rows(attn, batch, summaries, first_layer))

    def finish(self) -> pl.DataFrame:
        """Every batch's rows in one frame, with the columns `label` adds; an empty frame when there were none."""
        return self.label(frame(self.parts)) if self.parts else pl.DataFrame()


@dataclass
class BatchFrames:
    """A kind whose rows are a frame per batch and layer (the kinds stored in a dense grain, with list
    columns): `columns` takes the statistics on the device and brings them to the host as flat columns,
    `frame` makes the frame of those on the host frame worker (compute.host_frames) while the pass goes on."""

    columns: Callable[[torch.Tensor, Batch, int], object]
    frame: Callable[[object], pl.DataFrame]
    parts: list[Future[pl.DataFrame]] = field(default_factory=list)

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Take the batch's statistics on the device and queue their frame on the host frame worker."""
        self.parts.append(built_beside(self.frame, self.columns(attn, batch, first_layer)))

    def finish(self) -> pl.DataFrame:
        """Every batch's frame in order, once the host frame worker has built it; an empty frame when
        there were none."""
        return pl.concat([part.result() for part in self.parts]) if self.parts else pl.DataFrame()


@dataclass
class HeadDistances:
    """Jensen-Shannon divergence of every pair of heads, summed over the corpus's query tokens. Its rows of a
    batch compare heads of every two layers, so it gathers the batch's real query rows of each layer as the
    layer comes (QueryRows: not the layers' whole maps) and reduces them after the last. The sums stay on
    the pass's device until the end: no copy, no wait per batch."""

    n_layers: int
    n_heads: int
    js_sums: torch.Tensor | None = None  # (L*H, L*H), on the device of the first batch
    tokens: torch.Tensor | int = 0
    rows: QueryRows | None = None  # the batch under way's
    storage: torch.Tensor | None = None  # the rows' buffer, reused by the next batch where it fits

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Gather the batch's real query rows of these layers; after its last layer, add its divergence
        sums and token count to the corpus's."""
        if first_layer == 1:
            valid = batch.masks.valid
            self.rows = QueryRows(valid, self.n_layers, self.n_heads, attn.dtype, self.storage)
            self.storage = self.rows.storage
        for offset in range(attn.shape[1]):
            self.rows.add(first_layer - 1 + offset, attn[:, offset])
        if first_layer - 1 + attn.shape[1] == self.n_layers:
            sums = self.rows.divergences()
            self.js_sums = sums if self.js_sums is None else self.js_sums + sums
            self.tokens = self.tokens + batch.masks.valid.sum()
            self.rows = None

    def finish(self) -> pl.DataFrame:
        """`head_distances` rows of the corpus's summed divergences (brought to the host once); an empty
        frame when no batch came."""
        if self.js_sums is None:
            return pl.DataFrame()
        return distance_rows(self.js_sums, int(self.tokens), self.n_heads)


@dataclass
class PatternExamples:
    """Per pattern class the maps of the first examples with a head of it; of the batch under way, each
    example's first map of each class so far (only the few examples that can still be picked)."""

    per_pattern: int
    n_layers: int
    picked: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    candidates: PatternCandidates = field(default_factory=dict)

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Note the batch's maps that can still be picked for each pattern class; after its last layer,
        pick from them the first examples of each class that still lacks maps."""
        patterns = torch.from_numpy(summaries["pattern"]).reshape(attn.shape[:3])
        wanted = {pattern: self.per_pattern - len(self.picked.get(pattern, ())) for pattern in PATTERNS}
        pattern_map_candidates(attn, batch, patterns, first_layer, self.candidates, wanted)
        if first_layer - 1 + attn.shape[1] == self.n_layers:
            pick_pattern_examples(self.candidates, batch.example_ids, self.picked, self.per_pattern)
            self.candidates.clear()

    def finish(self) -> pl.DataFrame:
        """The picked example maps of every pattern class in one frame; an empty frame when none was picked."""
        parts = [part for parts in self.picked.values() for part in parts]
        return pl.concat(parts) if parts else pl.DataFrame()


@dataclass
class WeightedRows:
    """A weighted kind's rows on one weighting's maps (compute/weightings.py), tagged with it; the rows of
    LAYER_WEIGHTINGS, one map per layer, carry head LAYER_MAP_HEAD."""

    rows: Collector
    weighting: str

    def add(self, attn: torch.Tensor, batch: Batch, summaries: dict[str, np.ndarray], first_layer: int) -> None:
        """Gather the wrapped kind's rows of the batch on this weighting's maps."""
        self.rows.add(attn, batch, summaries, first_layer)

    def finish(self) -> pl.DataFrame:
        """The wrapped kind's rows tagged with the weighting (and head LAYER_MAP_HEAD for a per-layer
        weighting); an empty frame when there were none."""
        rows = self.rows.finish()
        if rows.is_empty():
            return rows
        if self.weighting in LAYER_WEIGHTINGS:
            rows = rows.with_columns(head=pl.lit(LAYER_MAP_HEAD, dtype=pl.Int16))
        return rows.with_columns(weighting=pl.lit(self.weighting))


@dataclass(frozen=True)
class FactCheck:
    name: str
    description: str
    evaluate: Callable[[dict[str, pl.DataFrame], PassInputs], CheckOutcome]


@dataclass(frozen=True)
class FactKind:
    table: str  # the warehouse table it writes, sql/schema/<table>.sql
    description: str
    start: Callable[[PassInputs], Collector]
    needs: frozenset[str] = frozenset()  # of WORDS, SPACY_FEATURES, FRAME_LINKS
    checks: tuple[FactCheck, ...] = ()
    # also collected on the maps of the pass's other weightings (compute/weightings.py), each row
    # tagged with its `weighting`; a per-layer weighting's one map has head LAYER_MAP_HEAD
    weighted: bool = False
    # given the batch's value norms (B, L, H, T) instead of its maps; collected when the pass's
    # weightings include norm, whatever the corpus lists
    reads_norms: bool = False


def _lengths(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return tables["head_summaries"].select("example_id", "n_tokens").unique()


def attention_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows of a weighted kind taken on the attention maps themselves (every row of a pass
    without other weightings): the checks that count rows per head read these."""
    return rows.filter(pl.col("weighting") == "attention") if "weighting" in rows.columns else rows


def _heads(inputs: PassInputs) -> int:
    return inputs.n_layers * inputs.n_heads


def _feature_links(inputs: PassInputs) -> pl.DataFrame:
    if inputs.feature_links is None:
        raise ValueError(
            "fact kind 'feature_pair_attention' needs PassInputs.feature_links: the linked word pairs of "
            "attention_facts.feature_pair_links (spaCy word_features, and coref_mentions where the corpus has them)"
        )
    return inputs.feature_links


def figure_5_examples(dependencies: pl.DataFrame | None, mentions: pl.DataFrame | None) -> tuple[int, ...]:
    """The examples whose maps Clark Fig. 5 needs besides the first ones: per named relation the
    first example (by id) with a gold edge of it (`dependencies`: example_id, relation, upos), and
    the first with a coreferent mention, one with an earlier mention of its cluster (`mentions`:
    example_id, cluster_id, word_start, word_end). A corpus without either gives none."""
    found: set[int] = set()
    if dependencies is not None:
        named = dependencies.filter(
            pl.col("relation").is_in(list(FIGURE_5_UD_RELATIONS.values()))
            & ((pl.col("relation") != "case") | (pl.col("upos") == "ADP"))
        )
        found |= set(named.group_by("relation").agg(pl.col("example_id").min())["example_id"].to_list())
    if mentions is not None:
        coreferent = mentions.join(mentions, on=["example_id", "cluster_id"], suffix="_earlier").filter(
            pl.col("word_end_earlier") <= pl.col("word_start")
        )
        if coreferent.height:
            found.add(coreferent["example_id"].min())
    return tuple(sorted(found))


def _head_maps(inputs: PassInputs) -> BatchFrames:
    keep = torch.tensor(inputs.map_examples, dtype=torch.int64)
    return BatchFrames(
        lambda attn, batch, first_layer: head_map_columns(attn, batch, keep, first_layer),
        lambda columns: dense_head_maps(columns).with_columns(
            kept_examples=pl.lit(len(inputs.map_examples), dtype=pl.Int16)
        ),
    )


def _with_pattern_names(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.with_columns(
        pattern=pl.col("pattern").replace_strict(dict(enumerate(PATTERNS)), return_dtype=pl.String)
    )


FACT_KINDS: dict[str, FactKind] = {
    kind.table: kind
    for kind in (
        FactKind(
            "head_summaries",
            "Per (example, layer, head): attention to [CLS]/[SEP]/punctuation/self/neighbours, entropy, "
            "Kovaleva pattern class (every corpus analysed for attention).",
            lambda inputs: BatchRows(lambda attn, batch, summaries, first_layer: [summaries], _with_pattern_names),
            weighted=True,
            checks=(
                FactCheck(
                    "rows_sum_to_one",
                    "Every attention row sums to 1 (max error <= 1e-4).",
                    lambda tables, inputs: rows_sum_to_one(tables["head_summaries"]),
                ),
                FactCheck(
                    "finite_values",
                    "No NaN or inf in the head summaries.",
                    lambda tables, inputs: finite(
                        tables["head_summaries"], ["to_cls", "to_sep", "to_self", "entropy", "row_sum_error"]
                    ),
                ),
                FactCheck(
                    "rows_per_example",
                    "One head-summary row per (example, layer, head).",
                    lambda tables, inputs: rows_per_example(
                        attention_rows(tables["head_summaries"]), inputs.n_examples, _heads(inputs)
                    ),
                ),
            ),
        ),
        FactKind(
            "position_histograms",
            "Per (example, layer, head, scope): attention mass and pair count per relative offset (Clark §3, Pascual).",
            lambda inputs: BatchFrames(
                lambda attn, batch, first_layer: histogram_columns(attn, batch.masks, batch.example_ids, first_layer),
                dense_histograms,
            ),
            weighted=True,
            checks=(
                FactCheck(
                    "histogram_pairs_and_mass",
                    HISTOGRAM_CHECK,
                    lambda tables, inputs: histogram_masses(
                        histogram_rows(attention_rows(tables["position_histograms"]), "attention"),
                        _lengths(tables),
                        "histogram_pairs_and_mass",
                        HISTOGRAM_CHECK,
                    ),
                ),
            ),
        ),
        FactKind(
            "relation_hits",
            "Per (example, word, layer, head): the most-attended other word of the word-level map, joined to "
            "gold relations in SQL (Clark §4).",
            lambda inputs: BatchFrames(
                lambda attn, batch, first_layer: relation_hit_columns(
                    attn, batch.word_spans, batch.example_ids, inputs.word_mode, first_layer
                ),
                dense_relation_hits,
            ),
            needs=frozenset({WORDS}),
            weighted=True,
            checks=(
                FactCheck(
                    "relation_hit_targets",
                    "Relation-hit targets are other words of the same example; one hit per word, layer and head.",
                    lambda tables, inputs: relation_hit_targets(
                        relation_hit_rows(attention_rows(tables["relation_hits"])), inputs.words, _heads(inputs)
                    ),
                ),
            ),
        ),
        FactKind(
            "head_distances",
            "Per pair of heads: Jensen-Shannon divergence summed over the corpus's query tokens (Clark §6).",
            lambda inputs: HeadDistances(inputs.n_layers, inputs.n_heads),
            checks=(
                FactCheck(
                    "finite_head_distances",
                    "Every head-pair Jensen-Shannon sum is finite.",
                    lambda tables, inputs: finite(tables["head_distances"], ["js_sum"], "finite_head_distances"),
                ),
            ),
        ),
        FactKind(
            "received_attention",
            "Per (example, token, layer, head): attention the token receives and the [CLS] row's weight on it "
            "(Kovaleva §4.4).",
            lambda inputs: BatchRows(
                lambda attn, batch, summaries, first_layer: [received_attention_columns(attn, batch, first_layer)]
            ),
            checks=(
                FactCheck(
                    "received_sums_to_one",
                    "Per example and head, received attention (column sums / n) and the [CLS] row each sum to 1 "
                    "over tokens.",
                    lambda tables, inputs: received_sums_to_one(tables["received_attention"]),
                ),
            ),
        ),
        FactKind(
            "feature_pair_attention",
            "Per (example, layer, head, pair): mean word-level attention over linked pairs, a verb -> its "
            "subject (spaCy) and a noun -> a pronoun it is the antecedent of (gold coreference) (Kovaleva §4.5).",
            lambda inputs: BatchRows(
                lambda attn, batch, summaries, first_layer: feature_pair_columns(
                    attn, batch, _feature_links(inputs), first_layer
                )
            ),
            needs=frozenset({WORDS, SPACY_FEATURES}),
        ),
        FactKind(
            "frame_link_attention",
            "Per (frame link, layer, head): the largest attention between the lexical unit and the frame "
            "element (Kovaleva §4.2).",
            lambda inputs: BatchRows(
                lambda attn, batch, summaries, first_layer: [
                    rows
                    for rows in [frame_link_columns(attn, batch, inputs.frame_links, first_layer)]
                    if rows is not None
                ]
            ),
            needs=frozenset({WORDS, FRAME_LINKS}),
            checks=(
                FactCheck(
                    "frame_link_bounds",
                    "Every frame link has one finite max attention in [0, 1] per (layer, head).",
                    lambda tables, inputs: frame_link_bounds(tables["frame_link_attention"]),
                ),
            ),
        ),
        FactKind(
            "pattern_example_maps",
            "Cropped maps of a few examples per Kovaleva pattern class (Fig. 2).",
            lambda inputs: PatternExamples(inputs.pattern_examples, inputs.n_layers),
        ),
        FactKind(
            "head_example_maps",
            f"Whole maps of every head for the corpus's first {HEAD_MAP_EXAMPLES} examples (example_id order) "
            "and the first with each Clark Fig. 5 relation, per query row a list over the keys (Clark Figs. 1 "
            "and 5).",
            _head_maps,
            checks=(
                FactCheck(
                    "example_maps_whole",
                    "The kept maps are those of the kept examples (the first by example_id, and the first with "
                    "each Fig. 5 relation): n rows of n keys per head, every row summing to 1 (max error <= 1e-4).",
                    lambda tables, inputs: example_maps_whole(
                        tables["head_example_maps"], _lengths(tables), list(inputs.map_examples), _heads(inputs)
                    ),
                ),
            ),
        ),
        FactKind(
            "value_norms",
            "Per (example, layer, head, token class): mean norm ||f_h(x_j)|| of the value vectors through the "
            "head's output projection (Kobayashi et al. 2020), written when the pass's weightings include norm.",
            lambda inputs: BatchRows(
                lambda norms, batch, summaries, first_layer: [
                    value_norm_columns(norms, batch.masks, batch.example_ids, first_layer)
                ]
            ),
            reads_norms=True,
        ),
    )
}
ALWAYS = ("head_summaries",)  # every pass writes them; the pattern examples read their classes


def corpus_fact_kinds(corpus: CorpusSpec) -> list[FactKind]:
    """The kinds a corpus gets, head summaries first; raises ValueError naming the corpus when
    it lists an unknown kind or one whose needs it does not provide."""
    names = list(dict.fromkeys([*ALWAYS, *corpus.fact_kinds]))
    unknown = [name for name in names if name not in FACT_KINDS]
    if unknown:
        raise ValueError(f"corpus '{corpus.name}' lists unknown fact kinds {unknown}; known: {sorted(FACT_KINDS)}")
    kinds = [FACT_KINDS[name] for name in names]
    for kind in kinds:
        missing = kind.needs - corpus.provides
        if missing:
            raise ValueError(
                f"corpus '{corpus.name}' lists fact kind '{kind.table}', which needs {sorted(missing)}; the corpus "
                f"provides {sorted(corpus.provides)}"
            )
    return kinds


def kind_checks(kinds: Sequence[FactKind]) -> list[FactCheck]:
    """The checks of every one of `kinds`, in their order."""
    return [check for kind in kinds for check in kind.checks]
