"""The papers' numbers on the charts: per chart, the rules, bands and ticks that draw the paper's
BERT-base value beside the model's, each with its label (charts/common.py layer_paper_marks draws
them).

A number a claim holds (sql/claims/<paper>.yaml, `paper_value`) is taken from the claim, so it
lives in one place; a literal is written here only where no claim holds the number, with where
it stands in the paper. Clark Table 3 and Kovaleva Table 1 draw the paper's ticks from their
views' paper columns (clark_probe_uas.paper_uas, kovaleva_task_scores.paper_score) and have no
entry here.

Values are on the chart's scale: a percentage of the paper drawn on a 0-1 axis is divided by
100 (`scale`). A depth-dependent mark (`layers`, BERT-base layers) spans the model's layers at
the same relative depth, ceil(12 * relative_depth - 1e-9), as the claims judge them."""

import functools
from dataclasses import dataclass

from dagster_project.storage.claims import Claim, load_claims

KINDS = ("rule", "band", "tick")
AXES = ("x", "y")


@dataclass(frozen=True)
class PaperMark:
    """One number of a paper drawn on a chart."""

    chart: str  # the chart's name (chart_registry.CHARTS)
    kind: str  # rule: a line across the plot (or the `layers`); band: a shaded range; tick: at a category
    axis: str  # the quantitative axis the value(s) lie on
    values: tuple[float, ...]  # rule, tick: one value; band: low, high (on the chart's scale)
    label: str  # the text drawn beside it (a tick's in its tooltip)
    claim: str | None = None  # the claim the value comes from; None: a literal of this module
    layers: tuple[int, int] | None = None  # the BERT-base layers (first, last) it spans, by relative depth
    at: tuple[tuple[str, str], ...] = ()  # a tick's category: (field, value) pairs of the chart's rows
    panel: str | None = None  # the panel of a chart of several that it is drawn on
    relative_to: str | None = None  # a column of the chart's rows whose first value the values add to

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.axis not in AXES:
            raise ValueError(f"{self.chart}: kind {self.kind!r} / axis {self.axis!r} not in {KINDS} / {AXES}")
        if len(self.values) != (2 if self.kind == "band" else 1):
            raise ValueError(f"{self.chart}: a {self.kind} takes {2 if self.kind == 'band' else 1} value(s)")


@dataclass(frozen=True)
class _Entry:
    """A mark as registered: its value(s) from `claim` (times `scale`) or the literal `values`;
    `label` is formatted with the values ({0}, {1})."""

    chart: str
    kind: str
    axis: str
    label: str
    claim: str | None = None
    values: tuple[float, ...] = ()
    scale: float = 1.0
    layers: tuple[int, int] | None = None
    at: tuple[tuple[str, str], ...] = ()
    panel: str | None = None
    relative_to: str | None = None


def _entries(claims: dict[str, Claim]) -> list[_Entry]:
    entries = [
        # Clark §3.2: "over half of BERT's attention in layers 6-10 focuses on [SEP]"
        _Entry(
            "clark_fig2_special_tokens",
            "rule",
            "y",
            "Clark BERT-base: over {0:g} on [SEP] in layers 6-10",
            claim="clark_sep_layers_6_10",
            layers=(6, 10),
            panel="special tokens",
        ),
        # Clark §3.2: [SEP] attends to [SEP] "more than 90%"
        _Entry(
            "clark_fig2_special_tokens",
            "rule",
            "y",
            "Clark BERT-base: [SEP] → [SEP] over {0:g} in layers 6-10",
            claim="clark_sep_to_sep",
            layers=(6, 10),
            panel="sep to sep",
        ),
        # Clark §3.3: "the last layer has a high entropy from [CLS] of 3.89 nats"
        _Entry(
            "clark_fig4_entropy",
            "rule",
            "y",
            "Clark BERT-base: [CLS] entropy {0:g} nats in the last layer",
            claim="clark_cls_entropy_last_layer",
            layers=(12, 12),
        ),
    ]
    # Clark Table 1: each relation's best head (accuracy in %, drawn on the view's 0-1 scale)
    for claim in claims.values():
        if claim.template == "clark_table1_{relation}_beats_baseline":
            params = dict(claim.params)
            entries.append(
                _Entry(
                    "clark_table1_dependency_heads",
                    "tick",
                    "x",
                    f"Clark BERT-base {params['relation']}: head {params['head']} {{0:.1%}}",
                    claim=claim.claim,
                    scale=0.01,
                    at=(("relation", params["relation"]),),
                )
            )
    # Clark Table 2 (accuracies in %, columns All, Pronoun, Proper, Nominal): the best head's "All"
    # is clark_table2_head_beats_nearest's; the rest of the table no claim holds.
    table2 = {
        "nearest": (27, 29, 29, 19),
        "head match": (52, 47, 67, 40),
        "rule-based": (69, 70, 77, 60),
        "head": (None, 64, 73, 58),  # head 5-4; All: the claim
    }
    for system, accuracies in table2.items():
        for mention_type, accuracy in zip(("all", "pronoun", "proper", "nominal"), accuracies):
            name = "best head (5-4)" if system == "head" else system
            entries.append(
                _Entry(
                    "clark_table2_coreference",
                    "tick",
                    "y",
                    f"Clark BERT-base, CoNLL-2012: {name}, {mention_type} mentions {{0:.0%}}",
                    claim="clark_table2_head_beats_nearest" if accuracy is None else None,
                    values=() if accuracy is None else (accuracy,),
                    scale=0.01,
                    at=(("mention_type", mention_type), ("system", system)),
                )
            )
    entries += [
        # Kovaleva §4.1: heterogeneous "varies from 32% (MRPC) to 61% (QQP) depending on the task";
        # kovaleva_fig2_heterogeneous_range states the range in its text only.
        _Entry(
            "kovaleva_fig2_pattern_shares",
            "band",
            "y",
            "Kovaleva BERT-base:\nheterogeneous\n{0:.0%}-{1:.0%} by task",
            values=(0.32, 0.61),
        ),
        # Kovaleva §4.2: the two FrameNet heads "account for 0.201 and 0.209"; 0.209 is the claim's
        _Entry(
            "kovaleva_fig3_framenet_heads",
            "rule",
            "x",
            "Kovaleva: {0:.3f}",
            values=(0.201,),  # §4.2, the first of the two heads
            panel="heads",
        ),
        _Entry(
            "kovaleva_fig3_framenet_heads",
            "rule",
            "x",
            "Kovaleva: {0:.3f}",
            claim="kovaleva_fig3_framenet_heads",
            panel="heads",
        ),
        _Entry("kovaleva_sec5_framenet_ablation", "rule", "x", "Kovaleva FrameNet head: {0:.3f}", values=(0.201,)),
        _Entry(
            "kovaleva_sec5_framenet_ablation",
            "rule",
            "x",
            "Kovaleva FrameNet head: {0:.3f}",
            claim="kovaleva_fig3_framenet_heads",
        ),
        # Kovaleva §5: the best single-head gain ranges "from the minimum absolute gain of 0.1% for
        # STS-B, to the maximum of 1.2% for MRPC (see Figure 8)"; the claim holds the minimum.
        _Entry(
            "kovaleva_fig8_head_ablation",
            "rule",
            "x",
            "Kovaleva: best gain +{0:g} (STS-B)",
            claim="kovaleva_fig8_disabling_a_head_helps",
            panel="changes",
        ),
        _Entry(
            "kovaleva_fig8_head_ablation",
            "rule",
            "x",
            "Kovaleva: best gain +{0:g} (MRPC)",
            values=(1.2,),  # §5, "the maximum of 1.2% for MRPC"
            panel="changes",
        ),
        # Kovaleva §5: "disabling the first layer in the RTE task gives ... an absolute performance
        # gain of 3.2%": drawn above the model's own baseline
        _Entry(
            "kovaleva_fig9_layer_ablation",
            "rule",
            "y",
            "Kovaleva: baseline +{0:g} (RTE, layer 1 disabled)",
            claim="kovaleva_fig9_disabling_a_layer_helps",
            relative_to="baseline_score",
        ),
    ]
    # Pascual §6 (Fig. 1): "For all heads except for two, Pearson's correlation coefficient is larger
    # than 0.7. Furthermore, 90% of the heads show a correlation ... of over 0.85"; "only four heads
    # have a Spearman's correlation smaller than 0.9, and that 75% of the heads have a correlation
    # coefficient larger than 0.95". The claims (pascual_fig1_*) hold the shares of heads above
    # each threshold; the thresholds drawn here are in their text only.
    fig1 = "pascual_fig1_local_correlation"
    entries += [
        _Entry(fig1, "rule", "y", "Pascual BERT-base: all heads but 2 above {0:g}", values=(0.7,), panel="Pearson"),
        _Entry(fig1, "rule", "y", "Pascual: 90% of heads above {0:g}", values=(0.85,), panel="Pearson"),
        _Entry(fig1, "rule", "y", "Pascual BERT-base: all heads but 4 above {0:g}", values=(0.9,), panel="Spearman"),
        _Entry(fig1, "rule", "y", "Pascual: 75% of heads above {0:g}", values=(0.95,), panel="Spearman"),
    ]
    # Pascual §8 (Fig. 6): "after only four layers Pearson's correlation coefficient for most heads is
    # smaller than 0.5 and in the last four layers the median head correlation value is smaller than
    # 0.25"; Spearman's median falls "under 0.7 already at layer 3, and under 0.25 at the last layer".
    fig6 = "pascual_fig6_global_correlation"
    entries += [
        _Entry(
            fig6,
            "rule",
            "y",
            "Pascual: most heads below {0:g} after layer 4",
            claim="pascual_fig6_pearson_below_05_after_layer_4",
            layers=(5, 12),
            panel="Pearson",
        ),
        _Entry(
            fig6,
            "rule",
            "y",
            "Pascual: median below {0:g}, last 4 layers",
            claim="pascual_fig6_median_below_025_last_four",
            layers=(9, 12),
            panel="Pearson",
        ),
        _Entry(
            fig6,
            "rule",
            "y",
            "Pascual: median below {0:g} from layer 3",
            claim="pascual_fig6_spearman_below_07_layer_3",
            layers=(3, 12),
            panel="Spearman",
        ),
        _Entry(
            fig6,
            "rule",
            "y",
            "Pascual: median below {0:g}, last layer",
            claim="pascual_fig6_spearman_below_025_last_layer",
            layers=(12, 12),
            panel="Spearman",
        ),
    ]
    entries.append(
        # GlobEnc against HTA: 0.84-0.96 across BERT-base's layers, each layer's own map (the per_layer
        # panel); the lowest is the claim's
        _Entry(
            "compare_weightings_hta_agreement",
            "rule",
            "y",
            "GlobEnc BERT-base: {0:g} or more in every layer",
            claim="compare_hta_agreement_globenc_high",
            panel="per_layer",
        )
    )
    return entries


def _resolve(entry: _Entry, claims: dict[str, Claim]) -> PaperMark:
    if entry.claim is not None:
        claim = claims.get(entry.claim)
        if claim is None or claim.paper_value is None:
            raise ValueError(f"{entry.chart}: claim {entry.claim} is not in sql/claims or has no paper_value")
        values = (claim.paper_value,)
    else:
        values = entry.values
    values = tuple(round(value * entry.scale, 10) for value in values)
    return PaperMark(
        chart=entry.chart,
        kind=entry.kind,
        axis=entry.axis,
        values=values,
        label=entry.label.format(*values),
        claim=entry.claim,
        layers=entry.layers,
        at=entry.at,
        panel=entry.panel,
        relative_to=entry.relative_to,
    )


@functools.cache
def _all_marks(claims: tuple[Claim, ...]) -> tuple[PaperMark, ...]:
    by_id = {claim.claim: claim for claim in claims}
    return tuple(_resolve(entry, by_id) for entry in _entries(by_id))


def all_paper_marks() -> tuple[PaperMark, ...]:
    """Every chart's marks, values read from the claims registry as it is now."""
    return _all_marks(load_claims())


def paper_marks(chart: str, panel: str | None = None) -> tuple[PaperMark, ...]:
    """The marks of one chart (of one of its panels, where `panel` is given)."""
    return tuple(mark for mark in all_paper_marks() if mark.chart == chart and (panel is None or mark.panel == panel))


def mark_of_claim(claim: str) -> PaperMark | None:
    """The first mark whose value is the claim's (the headline tables' paper column)."""
    return next((mark for mark in all_paper_marks() if mark.claim == claim), None)
