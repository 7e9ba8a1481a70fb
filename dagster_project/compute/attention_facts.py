"""The per-batch computations of the attention pass, one per fact kind (docs/methods.md §3): each
takes a batch's (B, L, H, T, T) attention maps, those of the L layers from `first_layer` (1-based) on,
and returns that kind's rows as flat columns; the pass gives them one layer at a time.
The registry in `fact_kinds` says which corpus gets which; `attention_pass` runs them."""

import numpy as np
import polars as pl
import torch

from dagster_project.compute.batching import Batch, flat, head_columns, head_grid, list_series
from dagster_project.compute.metrics import (
    PATTERNS,
    PatternThresholds,
    head_summaries,
    map_pattern_classes,
    most_attended_words,
    pair_mask,
    received_attention,
    span_pair_max,
    word_level_maps,
    word_pair_attention,
    word_piece_matrix,
)

# Kovaleva §4.5 token-to-token pairs, attention from the first word of a linked pair to the second:
# verb_subject, a verb to its own subject (a spaCy subject whose dependency head is that verb);
# noun_pronoun, a noun to a pronoun it is the antecedent of (gold coreference, where the corpus has it).
FEATURE_PAIRS = ("verb_subject", "noun_pronoun")
FEATURE_LINK_COLUMNS = ("pair", "source_word", "target_word")
NOUN_MENTIONS = ("proper", "nominal")  # coref_mentions.mention_type of a noun antecedent
MENTION_COLUMNS = ("example_id", "cluster_id", "word_start", "word_end", "head_word", "mention_type")
FRAME_LINK_COLUMNS = ("target_start", "target_end", "element_start", "element_end")


def relation_hit_frame(
    attn: torch.Tensor, word_spans: torch.Tensor, example_ids: torch.Tensor, word_mode: str, first_layer: int = 1
) -> pl.DataFrame:
    """Per (example, word with pieces, layer, head) the most-attended other word of the
    word-level map (docs/methods.md §3 relation hits), in the warehouse's dense grain
    (sql/schema/relation_hits.sql): per (example, layer, head) one row whose target_words[i]
    is word i's target, null for a word without pieces; examples without a hit have no row."""
    return dense_relation_hits(relation_hit_columns(attn, word_spans, example_ids, word_mode, first_layer))


def relation_hit_columns(
    attn: torch.Tensor, word_spans: torch.Tensor, example_ids: torch.Tensor, word_mode: str, first_layer: int = 1
) -> dict[str, np.ndarray]:
    """relation_hit_frame's targets on the maps' device, as flat columns on the host (dense_relation_hits
    makes the frame of them)."""
    membership = word_piece_matrix(word_spans[..., 0], word_spans[..., 1], attn.shape[-1])
    real = membership.sum(-1) > 0
    best = most_attended_words(word_level_maps(attn, membership, word_mode), real)
    hit = real & (best[:, 0, 0] >= 0)  # (B, W): words with pieces, when the example has another one
    words = torch.arange(1, hit.shape[1] + 1, device=hit.device)
    length = torch.where(hit, words, 0).amax(-1)  # (B,): up to its last word with a hit
    cells = (words <= length[:, None])[:, None, None].expand_as(best)
    grid = head_grid(*best.shape[:3], best.device, first_layer)
    rows, layers, heads = (index.expand(best.shape[:3]) for index in grid)
    per_head = (length > 0)[:, None, None].expand_as(rows)
    columns = flat(
        {
            "example_id": example_ids[rows[per_head]],
            "layer": layers[per_head],
            "head": heads[per_head],
            "length": length[rows[per_head]],
            "target_words": best[cells].to(torch.int16),
            "hit": hit[:, None, None].expand_as(best)[cells],
        }
    )
    return columns | {"word_mode": np.asarray(word_mode)}


def dense_relation_hits(columns: dict[str, np.ndarray]) -> pl.DataFrame:
    """The frame of relation_hit_columns' columns (relation_hit_frame)."""
    columns = dict(columns)
    lengths, word_mode = columns.pop("length"), str(columns.pop("word_mode"))
    targets = np.where(columns.pop("hit"), columns.pop("target_words"), -1).astype(np.int16)
    return pl.DataFrame(columns).with_columns(
        target_words=list_series(lengths, targets, null_value=-1), word_mode=pl.lit(word_mode)
    )


def relation_hit_rows(hits: pl.DataFrame) -> pl.DataFrame:
    """Dense relation hits (relation_hit_frame, or the warehouse table's) unpacked to the flat
    grain of stg_relation_hits: one row per (example, word with a hit, layer, head)."""
    return (
        hits.with_columns(word_index=pl.int_ranges(pl.col("target_words").list.len(), dtype=pl.Int32))
        .explode("word_index", "target_words")
        .drop_nulls("target_words")
        .with_columns(target_word=pl.col("target_words").cast(pl.Int32))
        .drop("target_words")
    )


def summary_columns(
    attn: torch.Tensor, batch: Batch, thresholds: PatternThresholds = PatternThresholds(), first_layer: int = 1
) -> dict[str, np.ndarray]:
    """Head summaries of one batch (with the Kovaleva pattern class, an index into PATTERNS,
    by the rules of `pattern_classes`), as flat columns."""
    masks = batch.masks
    n_tokens = masks.valid.sum(-1).to(torch.int16)[:, None, None].expand(attn.shape[:3])
    values = head_summaries(attn, masks)
    pattern = map_pattern_classes(attn, values, masks, thresholds).to(torch.int8)
    return head_columns({"n_tokens": n_tokens, **values, "pattern": pattern}, batch.example_ids, first_layer)


def received_attention_columns(attn: torch.Tensor, batch: Batch, first_layer: int = 1) -> dict[str, np.ndarray]:
    """Per (example, real token, layer, head) received attention and the [CLS] row's weight."""
    received, from_cls = received_attention(attn, batch.masks)
    b, layer, head, position = batch.masks.valid[:, None, None, :].expand_as(received).nonzero(as_tuple=True)
    return flat(
        {
            "example_id": batch.example_ids[b],
            "position": position.to(torch.int16),
            "layer": (layer + first_layer).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "received": received[b, layer, head, position],
            "from_cls": from_cls[b, layer, head, position],
        }
    )


def feature_pair_links(words: pl.DataFrame, mentions: pl.DataFrame | None = None) -> pl.DataFrame:
    """The linked word pairs of Kovaleva §4.5: example_id and FEATURE_LINK_COLUMNS.

    verb_subject: from words (word_features: example_id, word_index, is_verb, is_subject,
    head_word_index), a verb -> each subject whose head it is. noun_pronoun: from gold
    coreference mentions (coref_mentions' MENTION_COLUMNS), the head of a pronoun's nearest noun
    antecedent (a proper or nominal mention of its cluster ending before it starts) -> the
    pronoun's head; none without mentions.
    """
    verbs = words.filter(pl.col("is_verb")).select("example_id", source_word="word_index")
    subjects = words.filter(pl.col("is_subject") & pl.col("head_word_index").is_not_null()).select(
        "example_id", source_word="head_word_index", target_word="word_index"
    )
    parts = [subjects.join(verbs, on=["example_id", "source_word"]).with_columns(pair=pl.lit("verb_subject"))]
    if mentions is not None:
        pronouns = mentions.filter(pl.col("mention_type") == "pronoun")
        nouns = mentions.filter(pl.col("mention_type").is_in(NOUN_MENTIONS))
        antecedents = (
            pronouns.join(nouns, on=["example_id", "cluster_id"], suffix="_antecedent")
            .filter(pl.col("word_end_antecedent") <= pl.col("word_start"))
            .sort("word_end_antecedent", "word_start_antecedent")
            .group_by("example_id", "word_start", "word_end", "head_word")
            .agg(pl.col("head_word_antecedent").last())
        )
        parts.append(
            antecedents.select(
                "example_id",
                source_word="head_word_antecedent",
                target_word="head_word",
                pair=pl.lit("noun_pronoun"),
            )
        )
    types = {"example_id": pl.Int32, "pair": pl.String, "source_word": pl.Int32, "target_word": pl.Int32}
    return (
        pl.concat([part.select(pl.col(name).cast(kind) for name, kind in types.items()) for part in parts])
        .filter(pl.col("source_word") != pl.col("target_word"))
        .unique()
        .sort(*types)
    )


def feature_pair_columns(
    attn: torch.Tensor, batch: Batch, links: pl.DataFrame, first_layer: int = 1
) -> list[dict[str, np.ndarray]]:
    """Per FEATURE_PAIRS pair and (example with such pairs, layer, head): mean word-level
    attention (`mean` mode) from the first word to the second over the example's linked pairs
    (`feature_pair_links`) whose words both have pieces, and the number of pairs."""
    spans = batch.word_spans
    device = spans.device
    membership = word_piece_matrix(spans[..., 0], spans[..., 1], attn.shape[-1])
    real = membership.sum(-1) > 0
    rows = pl.DataFrame({"example_id": batch.example_ids.cpu().numpy(), "row": np.arange(len(batch.example_ids))})
    links = links.join(rows, on="example_id").filter(pl.max_horizontal("source_word", "target_word") < real.shape[1])
    word_maps = word_level_maps(attn, membership, "mean")
    parts = []
    for pair in FEATURE_PAIRS:
        linked = links.filter(pl.col("pair") == pair)
        if linked.height == 0:
            continue
        pairs = torch.zeros(real.shape[0], real.shape[1], real.shape[1], dtype=torch.bool, device=device)
        index = [torch.tensor(linked[name].to_numpy(), device=device) for name in ("row", "source_word", "target_word")]
        pairs[index[0], index[1], index[2]] = True
        means, counts = word_pair_attention(word_maps, pairs & pair_mask(real, real))
        b, layer, head = (counts > 0)[:, None, None].expand_as(means).nonzero(as_tuple=True)
        columns = flat(
            {
                "example_id": batch.example_ids[b],
                "layer": (layer + first_layer).to(torch.int16),
                "head": (head + 1).to(torch.int16),
                "attention": means[b, layer, head],
                "pairs": counts[b].to(torch.int32),
            }
        )
        parts.append({**columns, "pair": np.full(len(b), pair)})
    return parts


def frame_link_columns(
    attn: torch.Tensor, batch: Batch, links: pl.DataFrame, first_layer: int = 1
) -> dict[str, np.ndarray] | None:
    """Per (frame link of the batch's examples, layer, head) the largest attention between
    the pieces of the lexical unit and those of the frame element, both directions.

    links: example_id and FRAME_LINK_COLUMNS ([start, end) word spans); None if the batch has none."""
    rows = pl.DataFrame({"example_id": batch.example_ids.cpu().numpy(), "row": np.arange(len(batch.example_ids))})
    links = links.join(rows, on="example_id", maintain_order="left")
    if links.height == 0:
        return None
    spans = batch.word_spans
    membership = word_piece_matrix(spans[..., 0], spans[..., 1], attn.shape[-1])
    row = torch.tensor(links["row"].to_numpy(), device=spans.device)
    words = torch.arange(spans.shape[1], device=spans.device)
    bounds = {name: torch.tensor(links[name].to_numpy(), device=spans.device)[:, None] for name in FRAME_LINK_COLUMNS}

    def pieces(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
        in_span = ((words >= start) & (words < end)).to(membership.dtype)
        return torch.einsum("kw,kwt->kt", in_span, membership[row]) > 0

    best = span_pair_max(
        attn[row],
        pieces(bounds["target_start"], bounds["target_end"]),
        pieces(bounds["element_start"], bounds["element_end"]),
    )
    k, layer, head = torch.ones_like(best, dtype=torch.bool).nonzero(as_tuple=True)
    return flat(
        {
            "example_id": batch.example_ids[row[k]],
            **{name: value[k, 0].to(torch.int32) for name, value in bounds.items()},
            "layer": (layer + first_layer).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "max_attention": best[k, layer, head],
        }
    )


# per Kovaleva pattern class, per batch row: the (layer, head) and cropped map of the row's first head of
# that class, in (layer, head) order
PatternCandidates = dict[str, dict[int, tuple[int, int, torch.Tensor]]]


def pattern_map_candidates(
    attn: torch.Tensor,
    batch: Batch,
    patterns: torch.Tensor,
    first_layer: int,
    candidates: PatternCandidates,
    wanted: dict[str, int],
) -> None:
    """Add to `candidates` each example's first head of each pattern class (`patterns`: (B, L, H) indexes
    into PATTERNS) among the L layers of `attn` from `first_layer` on, given in layer order: an example
    keeps the map of the first layer where it has the class. Of a class only the first `wanted[pattern]`
    examples with a map (batch order) are kept: an example after them can never be picked."""
    n_tokens = batch.masks.valid.sum(-1)
    for index, pattern in enumerate(PATTERNS):
        found, want = candidates.setdefault(pattern, {}), wanted[pattern]
        if want == 0:
            continue
        is_class = patterns == index
        for row in is_class.any((1, 2)).nonzero()[:, 0].tolist():
            if sum(earlier < row for earlier in found) >= want:
                break
            if row not in found:
                layer, head = is_class[row].nonzero()[0].tolist()
                n = int(n_tokens[row])
                found[row] = (layer + first_layer, head + 1, attn[row, layer, head, :n, :n].clone())
        for row in sorted(found)[want:]:
            del found[row]


def pick_pattern_examples(
    candidates: PatternCandidates, example_ids: torch.Tensor, picked: dict[str, list[pl.DataFrame]], per_pattern: int
) -> None:
    """Add to `picked` (pattern -> cropped maps) up to `per_pattern` maps per class, each from a different
    example: the batch's first examples that have the class (`pattern_map_candidates` over every layer;
    batches come shortest first, so the maps stay small)."""
    for pattern, found in candidates.items():
        chosen = picked.setdefault(pattern, [])
        for row in sorted(found)[: per_pattern - len(chosen)]:
            layer, head, cells = found[row]
            n = cells.shape[0]
            query, key = np.meshgrid(np.arange(n, dtype=np.int16), np.arange(n, dtype=np.int16), indexing="ij")
            chosen.append(
                pl.DataFrame(
                    {
                        "example_id": np.full(n * n, int(example_ids[row]), dtype=np.int32),
                        "pattern": pattern,
                        "layer": np.full(n * n, layer, dtype=np.int16),
                        "head": np.full(n * n, head, dtype=np.int16),
                        "query": query.reshape(-1),
                        "key": key.reshape(-1),
                        "attention": cells.reshape(-1).cpu().numpy(),
                    }
                )
            )


def head_map_frame(attn: torch.Tensor, batch: Batch, keep: torch.Tensor, first_layer: int = 1) -> pl.DataFrame:
    """The whole maps of every head for the batch's examples whose ids are in `keep` (Clark Figs. 1
    and 5), in the dense grain of sql/schema/head_example_maps.sql: per (example, layer, head, real
    query token) one row whose `attention` lists the row's weights over the example's n real keys
    (position order); no row for padding. A batch without a kept example gives no rows."""
    return dense_head_maps(head_map_columns(attn, batch, keep, first_layer))


def head_map_columns(
    attn: torch.Tensor, batch: Batch, keep: torch.Tensor, first_layer: int = 1
) -> dict[str, np.ndarray]:
    """head_map_frame's rows as flat columns on the host (dense_head_maps makes the frame of them)."""
    chosen = torch.isin(batch.example_ids, keep.to(batch.example_ids.device)).nonzero()[:, 0]
    maps, valid = attn[chosen], batch.masks.valid[chosen]  # (S, L, H, T, T), (S, T)
    queries = valid[:, None, None, :].expand(maps.shape[:4])
    example, layer, head, query = queries.nonzero(as_tuple=True)  # row-major, the order of maps[cells]
    cells = queries[..., None] & valid[:, None, None, None, :]
    return flat(
        {
            "example_id": batch.example_ids[chosen][example].to(torch.int32),
            "layer": (layer + first_layer).to(torch.int16),
            "head": (head + 1).to(torch.int16),
            "query": query.to(torch.int16),
            "length": valid.sum(-1)[example],
            "weights": maps[cells].to(torch.float32),
        }
    )


def dense_head_maps(columns: dict[str, np.ndarray]) -> pl.DataFrame:
    """The frame of head_map_columns' columns (head_map_frame)."""
    columns = dict(columns)
    lengths, weights = columns.pop("length"), columns.pop("weights")
    return pl.DataFrame(columns).with_columns(attention=list_series(lengths, weights).cast(pl.List(pl.Float32)))
