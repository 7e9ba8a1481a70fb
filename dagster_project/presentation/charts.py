"""Altair charts of the paper figures, drawn from view rows only."""

from pathlib import Path

import altair as alt
import polars as pl

_TOKEN_TYPES = {"to_cls": "[CLS]", "to_sep": "[SEP]", "to_punct": ". or ,"}


def clark_special_tokens_chart(rows: pl.DataFrame, title: str) -> alt.VConcatChart:
    """Clark Fig. 2: each head's mean attention to [CLS]/[SEP]/punctuation, and [SEP]->[SEP]."""
    long = rows.unpivot(index=["layer", "head"], on=list(_TOKEN_TYPES), variable_name="type", value_name="attention")
    long = long.with_columns(pl.col("type").replace_strict(_TOKEN_TYPES))
    strip = (
        alt.Chart(long)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("layer:O", title="layer"),
            xOffset=alt.XOffset("type:N"),
            y=alt.Y("attention:Q", title="avg. attention", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("type:N", title="token"),
            tooltip=["layer", "head", "type", alt.Tooltip("attention:Q", format=".3f")],
        )
        .properties(width=420, height=220, title=f"{title}: attention to special tokens")
    )
    sep = (
        alt.Chart(rows)
        .mark_circle(size=40, opacity=0.7, color="#e45756")
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("sep_to_sep:Q", title="avg. attention [SEP] → [SEP]", scale=alt.Scale(domain=[0, 1])),
            tooltip=["layer", "head", alt.Tooltip("sep_to_sep:Q", format=".3f")],
        )
        .properties(width=420, height=160, title="attention from [SEP] to [SEP]")
    )
    return alt.vconcat(strip, sep)


def clark_entropy_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Clark Fig. 4: mean entropy of each head per layer, with the uniform-attention baseline."""
    per_layer = rows.group_by("layer").agg(
        pl.col("uniform_entropy").mean().alias("uniform attention"),
        pl.col("cls_entropy").mean().alias("[CLS] row (mean over heads)"),
    )
    lines = per_layer.unpivot(index="layer", variable_name="reference", value_name="entropy")
    heads = (
        alt.Chart(rows)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("entropy:Q", title="avg. attention entropy (nats)"),
            tooltip=[
                "layer",
                "head",
                alt.Tooltip("entropy:Q", format=".2f"),
                alt.Tooltip("cls_entropy:Q", format=".2f"),
            ],
        )
    )
    references = (
        alt.Chart(lines)
        .mark_line(strokeDash=[4, 3])
        .encode(x="layer:O", y="entropy:Q", color=alt.Color("reference:N", title=None))
    )
    return alt.layer(heads, references).properties(width=420, height=260, title=f"{title}: attention entropy")


def pascual_histograms_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 2/3, appendices A/B: a layer x head grid of max-normalized position histograms."""
    return (
        alt.Chart(rows)
        .mark_line(strokeWidth=1)
        .encode(
            x=alt.X("offset:Q", title="relative position"),
            y=alt.Y("value_max_normalized:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("scope:N"),
        )
        .properties(width=90, height=50)
        .facet(row=alt.Row("layer:O"), column=alt.Column("head:O"))
        .properties(title=f"{title}: histograms by relative position (each head scaled to its maximum)")
    )


def _center_of_mass_panels(rows: pl.DataFrame, color: alt.Color, dash: str, what: str, title: str) -> alt.FacetChart:
    """Center of mass per layer as lines, one panel per corpus in the rows' order."""
    return (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("center_of_mass:Q", title=f"mean {what} (tokens)"),
            color=color,
            strokeDash=alt.StrokeDash(f"{dash}:N"),
            tooltip=["model", "corpus", "layer", "scope", "kind", alt.Tooltip("center_of_mass:Q", format=".2f")],
        )
        .properties(width=300, height=240)
        .facet(column=alt.Column("corpus:N", title=None, sort=_in_order(rows, "corpus")))
        .properties(title=f"{title}: {what} per layer")
    )


def pascual_center_of_mass_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 4/5: mean center of mass of the histograms per layer, one panel per corpus
    (English, German and Arabic XNLI side by side, Fig. 4), attention and contribution (Fig. 5)."""
    return _center_of_mass_panels(rows, alt.Color("scope:N"), "kind", "center of mass", title)


def pascual_center_of_mass_models_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 4 across models: the attention center of mass per layer of every model with
    rows, one panel per corpus (the paper compares English, German and Arabic BERTs)."""
    rows = rows.filter(pl.col("kind") == "attention")
    color = alt.Color("model:N", sort=_in_order(rows, "model"))
    return _center_of_mass_panels(rows, color, "scope", "attention center of mass", title)


def pascual_correlation_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 1/6: each head's mean Pearson (top) and Spearman (bottom) correlation of
    attention with a contribution, per layer, with the per-layer median (red line)."""
    long = rows.unpivot(
        index=["layer", "head"], on=["pearson", "spearman"], variable_name="coefficient", value_name="correlation"
    ).with_columns(pl.col("coefficient").replace_strict({"pearson": "Pearson", "spearman": "Spearman"}))
    heads = (
        alt.Chart()
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y(
                "correlation:Q",
                title="mean row correlation",
                scale=alt.Scale(domain=[-0.2, 1]),
            ),
            tooltip=["layer", "head", "coefficient", alt.Tooltip("correlation:Q", format=".3f")],
        )
    )
    median = alt.Chart().mark_line(color="#e45756").encode(x="layer:O", y="median(correlation):Q")
    return (
        alt.layer(heads, median, data=long)
        .properties(width=420, height=200)
        .facet(row=alt.Row("coefficient:N", title=None, sort=["Pearson", "Spearman"]))
        .properties(title=title)
    )


def _map_cells(rows: pl.DataFrame, value: str, legend: str, labels: list[str]) -> alt.Chart:
    """One attention-like map per facet cell: key x query cells shaded by `value` in [0, 1]."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key", axis=None),
            y=alt.Y("query:O", title="query", axis=None),
            color=alt.Color(f"{value}:Q", title=legend, scale=alt.Scale(scheme="blues", domain=[0, 1])),
            tooltip=[*labels, "query_token", "key_token", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(width=110, height=110)
    )


_HTA_MAPS = {"attention": "attention", "previous_layer": "previous-layer contribution", "input": "input contribution"}


def pascual_hta_pattern_maps_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Pascual Fig. 7: for one head of each Kovaleva pattern class, its attention map above its
    previous-layer and input contribution maps (Appendix C has every head: pascual_hta_example_maps)."""
    rows = rows.with_columns(
        shown=pl.col("map").replace_strict(_HTA_MAPS),
        panel=pl.format("{} ({}-{}, ex. {})", "pattern", "layer", "head", "example_id"),
        pattern_order=pl.col("pattern").replace_strict(
            {pattern: index for index, pattern in enumerate(_PATTERN_ORDER)}, default=len(_PATTERN_ORDER)
        ),
    ).sort("pattern_order", maintain_order=True)
    return (
        _map_cells(rows, "value", "weight", ["panel", "shown"])
        .facet(
            row=alt.Row("shown:N", title=None, sort=list(_HTA_MAPS.values())),
            column=alt.Column("panel:N", title=None, sort=_in_order(rows, "panel")),
        )
        .resolve_scale(x="independent", y="independent")
        .properties(title=f"{title}: attention vs Hidden Token Attribution per pattern class")
    )


_TARGET_TYPES = {"sep": "[SEP]", "punct": ". or ,", "other": "other"}


def clark_grad_importance_chart(rows: pl.DataFrame, title: str) -> alt.Chart:
    """Clark Fig. 3: per layer, the mean |d loss / d attention| for attention to [SEP],
    to '.'/',' and to other tokens."""
    loss = rows["loss_name"][0].replace("_", " ")
    long = rows.with_columns(pl.col("target_type").replace_strict(_TARGET_TYPES).alias("attention to"))
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("grad_magnitude:Q", title="avg. gradient magnitude", axis=alt.Axis(format=".1e")),
            color=alt.Color("attention to:N", sort=list(_TARGET_TYPES.values())),
            tooltip=["layer", "attention to", alt.Tooltip("grad_magnitude:Q", format=".3e"), "n_examples"],
        )
        .properties(width=420, height=260, title=f"{title}: gradient of the {loss} loss w.r.t. attention")
    )


def clark_coreference_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Clark Table 2: antecedent selection accuracy of the baselines and the best head,
    grouped by mention type, one panel per corpus."""
    systems = rows.unique("system", maintain_order=True)["system"].to_list()  # the view's order
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("mention_type:N", title="mention type", sort=["all", "pronoun", "proper", "nominal"]),
            xOffset=alt.XOffset("system:N", sort=systems),
            y=alt.Y("accuracy:Q", title="antecedent selection accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("system:N", sort=systems, title="system"),
            tooltip=["corpus", "system", "mention_type", alt.Tooltip("accuracy:Q", format=".3f"), "n"],
        )
        .properties(width=420, height=260)
        .facet(column=alt.Column("corpus:N", title=None, sort=_in_order(rows, "corpus")))
        .properties(title=f"{title}: coreference antecedent selection")
    )


_PROBE_ORDER = [
    "right_branching",
    "distance_words",
    "random_init_attn_words",
    "attn",
    "attn_words",
]  # Clark Table 3's rows


def clark_probe_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Clark Table 3: UAS of each probe (bars) with the paper's BERT-base value (tick)."""
    order = [probe for probe in _PROBE_ORDER if probe in set(rows["probe"])] + sorted(
        set(rows["probe"]) - set(_PROBE_ORDER)
    )
    # bars named by the view's label: which word vectors a probe used (input embeddings are not GloVe)
    labels = dict(rows.select("probe", "label").iter_rows())
    x = alt.X("label:N", sort=[labels[probe] for probe in order], title=None, axis=alt.Axis(labelAngle=-30))
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("uas:Q", title="UAS (%, punctuation excluded)", scale=alt.Scale(domain=[0, 100])),
            tooltip=[
                "probe",
                "word_vectors",
                alt.Tooltip("uas:Q", format=".1f"),
                "paper_label",
                "paper_uas",
                "n_words",
            ],
        )
    )
    paper = (
        alt.Chart(rows.drop_nulls("paper_uas"))
        .mark_tick(color="#e45756", thickness=2, size=30)
        .encode(x=x, y="paper_uas:Q")
    )
    return alt.layer(bars, paper).properties(
        width=360, height=260, title=f"{title}: dependency probes (red tick: Clark BERT-base)"
    )


def clark_dependency_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Clark Table 1: per relation the best head's accuracy (bar, labelled layer-head and
    direction) against the best fixed-offset baseline (tick)."""
    rows = rows.with_columns(
        best_head=pl.format("{}-{}", "layer", "head"),
        baseline=pl.format("offset {}", "baseline_offset"),
    )
    order = rows.sort("n", descending=True)["relation"].to_list()
    y = alt.Y("relation:N", sort=order, title=None)
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X(
                "accuracy:Q", title="accuracy (bar: best head, tick: best fixed offset)", scale=alt.Scale(domain=[0, 1])
            ),
            color=alt.Color("direction:N"),
            tooltip=[
                "relation",
                "best_head",
                "direction",
                alt.Tooltip("accuracy:Q", format=".3f"),
                "baseline",
                alt.Tooltip("baseline_accuracy:Q", format=".3f"),
                "n",
            ],
        )
    )
    labels = bars.mark_text(align="left", dx=3, fontSize=10, color="black").encode(
        text="best_head:N", color=alt.value("black")
    )
    baseline = alt.Chart(rows).mark_tick(color="black", thickness=2).encode(y=y, x="baseline_accuracy:Q")
    return alt.layer(bars, baseline, labels).properties(
        width=420, height=alt.Step(14), title=f"{title}: best head per dependency relation"
    )


_BEHAVIOURS = ["previous", "next", "[CLS]/[SEP]", "broad", "other"]  # int_head_behaviours' rules


def clark_head_mds_chart(rows: pl.DataFrame, title: str) -> alt.HConcatChart:
    """Clark Fig. 6: heads embedded in 2-D by MDS of their Jensen-Shannon divergences, coloured
    by their §3 behaviour (attends to [CLS]/[SEP], the previous or next token, broadly) and,
    beside, by layer."""
    rows = rows.with_columns(
        layer_head=pl.format("{}-{}", "layer", "head"), behaviour=pl.col("behaviour").fill_null("unknown")
    )
    base = (
        alt.Chart(rows)
        .mark_circle(size=60, opacity=0.8)
        .encode(
            x=alt.X("x:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("y:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
            tooltip=[
                alt.Tooltip("layer_head:N", title="layer-head"),
                "behaviour",
                alt.Tooltip("stress:Q", title="Stress-1", format=".3f"),
            ],
        )
        .properties(width=360, height=360)
    )
    by_behaviour = base.encode(
        color=alt.Color("behaviour:N", sort=[*_BEHAVIOURS, "unknown"], scale=alt.Scale(scheme="category10"))
    ).properties(title="by behaviour")
    by_layer = base.encode(color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis"))).properties(title="by layer")
    return (
        alt.hconcat(by_behaviour, by_layer)
        .resolve_scale(color="independent")
        .properties(title=f"{title}: heads embedded by Jensen-Shannon distance (MDS)")
    )


def _primary_metric(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of the task's headline metric: accuracy, else Pearson (STS-B)."""
    metric = "accuracy" if "accuracy" in set(rows["metric"]) else "pearson"
    return rows.filter(pl.col("metric") == metric)


def kovaleva_head_ablation_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 8: score with one head disabled (layer x head), change vs the baseline."""
    rows = _primary_metric(rows)
    metric, baseline = rows["metric"][0], rows["baseline_score"][0]
    limit = max(float(rows["delta_vs_baseline"].abs().max()), 1e-9)
    cells = alt.Chart(rows).encode(x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"))
    heat = cells.mark_rect().encode(
        color=alt.Color(
            "delta_vs_baseline:Q",
            title="Δ vs baseline (points)",
            scale=alt.Scale(scheme="redblue", domain=[-limit, limit]),
        ),
        tooltip=[
            "layer",
            "head",
            alt.Tooltip("score:Q", format=".1f"),
            alt.Tooltip("delta_vs_baseline:Q", format="+.2f"),
            alt.Tooltip("to_sep:Q", format=".2f"),
            alt.Tooltip("entropy:Q", format=".2f"),
        ],
    )
    labels = cells.mark_text(fontSize=8).encode(text=alt.Text("score:Q", format=".1f"))
    return alt.layer(heat, labels).properties(
        width=420, height=260, title=f"{title}: {metric} with one head disabled (baseline {baseline:.1f})"
    )


def kovaleva_layer_ablation_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 9: score with every head of one layer disabled, and the baseline."""
    rows = _primary_metric(rows)
    metric = rows["metric"][0]
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("layer:O", title="disabled layer"),
            y=alt.Y("score:Q", title=f"{metric} (%)", scale=alt.Scale(zero=False)),
            tooltip=["layer", alt.Tooltip("score:Q", format=".1f"), alt.Tooltip("delta_vs_baseline:Q", format="+.2f")],
        )
    )
    baseline = alt.Chart(rows.head(1)).mark_rule(color="orange", strokeWidth=2).encode(y="baseline_score:Q")
    return alt.layer(bars, baseline).properties(
        width=420, height=240, title=f"{title}: {metric} with one layer disabled"
    )


_PATTERN_ORDER = ["vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous"]


def _in_order(rows: pl.DataFrame, column: str) -> list:
    """The values of `column` in the order the rows bring them (ChartSpec.rows orders tasks as
    the paper does and puts the pre-trained model first)."""
    return list(dict.fromkeys(rows[column]))


def kovaleva_pattern_shares_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 2: stacked shares of the five pattern classes per task, the pre-trained
    model beside the model fine-tuned on the task where there is one."""
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("role:N", title=None, sort=_in_order(rows, "role")),
            y=alt.Y(
                "share:Q",
                title="share of (example, head) maps",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("pattern:N", sort=_PATTERN_ORDER),
            order=alt.Order("pattern_order:Q"),
            tooltip=["task", "model", "pattern", alt.Tooltip("share:Q", format=".1%"), "maps"],
        )
        .properties(width=alt.Step(50), height=260)
        .facet(column=alt.Column("task:N", title=None, sort=_in_order(rows, "task")))
        .properties(title=f"{title}: attention pattern classes")
    )


def kovaleva_pattern_examples_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 1: the kept example maps, one row of maps per pattern class."""
    rows = rows.with_columns(
        map=pl.format("{} L{}-H{} ex. {}", "task", "layer", "head", "example_id"),
        slot=pl.col("example_id").rank("dense").over("task", "pattern").cast(pl.Int32),
    )
    return (
        _map_cells(rows, "attention", "attention", ["map"])
        .facet(row=alt.Row("pattern:N", sort=_PATTERN_ORDER), column=alt.Column("slot:O", title="example"))
        .resolve_scale(x="independent", y="independent")
        .properties(title=f"{title}: example maps per pattern class")
    )


def _head_heatmap(
    rows: pl.DataFrame, value: str, legend: str, scheme: str, domain: list[float] | None = None
) -> alt.Chart:
    """Layer x head heatmap of one per-head value."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("head:O"),
            y=alt.Y("layer:O", sort="descending"),
            color=alt.Color(
                f"{value}:Q", title=legend, scale=alt.Scale(scheme=scheme, **({"domain": domain} if domain else {}))
            ),
            tooltip=["layer", "head", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(width=alt.Step(22), height=alt.Step(22))
    )


def kovaleva_framenet_chart(rows: pl.DataFrame, title: str) -> alt.LayerChart:
    """Kovaleva Fig. 3: mean max attention over FrameNet links per head; x marks the heads
    above the 99th percentile."""
    marks = (
        alt.Chart(rows.filter(pl.col("above_p99")))
        .mark_text(text="×", fontSize=16, color="#e45756")
        .encode(x="head:O", y=alt.Y("layer:O", sort="descending"))
    )
    p99 = rows["p99"][0]
    return alt.layer(_head_heatmap(rows, "mean_max_attention", "mean max attention", "blues"), marks).properties(
        title=f"{title}: frame-semantic links (× above p99 = {p99:.3f})"
    )


def kovaleva_finetune_similarity_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 5: per-head cosine of pre-trained and fine-tuned maps, one panel per task."""
    return (
        # The scale spans the observed cosines (often all > 0.9), so small changes show.
        _head_heatmap(rows, "cosine", "cosine", "greys")
        .encode(color=alt.Color("cosine:Q", scale=alt.Scale(scheme="greys", reverse=True, zero=False)))
        .facet(column=alt.Column("task:N", sort=_in_order(rows, "task")))
        .properties(title=f"{title}: pre-trained vs fine-tuned attention (darker: more change)")
    )


def kovaleva_special_tokens_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 6: per task, the attention [SEP] (top row) and [CLS] (bottom row) receive
    in every head, the pre-trained model beside the model fine-tuned on the task."""
    rows = rows.filter(pl.col("feature").is_in(["[SEP]", "[CLS]"])).with_columns(
        panel=pl.format("{} ({})", "task", "role")
    )
    return (
        _head_heatmap(rows, "score", "attention received", "viridis")
        .properties(width=alt.Step(14), height=alt.Step(14))
        .facet(
            row=alt.Row("feature:N", title=None, sort=["[SEP]", "[CLS]"]),
            column=alt.Column("panel:N", title=None, sort=_in_order(rows, "panel")),
        )
        .properties(title=f"{title}: attention to [SEP] and [CLS] per task")
    )


def kovaleva_feature_attention_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva §4.4-4.5: per head, the attention each feature type receives (and the
    token-to-token pairs); fine-tuned models show their base model's scores beside."""
    long = rows.select("feature", "layer", "head", "role", "score")
    if rows["base_score"].is_not_null().any():
        long = pl.concat(
            [long, rows.select("feature", "layer", "head", role=pl.lit("pre-trained (base)"), score="base_score")]
        )
    long = long.with_columns(panel=pl.format("{} ({})", "feature", "role"))
    return (
        _head_heatmap(long, "score", "attention", "viridis")
        .properties(width=alt.Step(14), height=alt.Step(14))
        .facet(facet=alt.Facet("panel:N", title=None, sort=sorted(set(long["panel"]))), columns=4)
        .resolve_scale(color="independent")
        .properties(title=f"{title}: attention received by feature type")
    )


def kovaleva_cls_attention_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Kovaleva Fig. 7: final-layer [CLS] row's weight to each feature type, per head; one
    column per task, the pre-trained model above the model fine-tuned on the task."""
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("head:O"),
            y=alt.Y("feature:N", title=None),
            color=alt.Color("score:Q", title="[CLS] attention", scale=alt.Scale(scheme="viridis")),
            tooltip=["task", "model", "feature", "head", alt.Tooltip("score:Q", format=".3f"), "n_examples"],
        )
        .properties(width=alt.Step(16), height=alt.Step(16))
        .facet(
            row=alt.Row("role:N", title=None, sort=_in_order(rows, "role")),
            column=alt.Column("task:N", title=None, sort=_in_order(rows, "task")),
        )
        .properties(title=f"{title}: final-layer [CLS] attention by feature type")
    )


def short_model_names(sources: pl.Expr) -> pl.Expr:
    """Models' names for titles and legends: the last part of a hub id or path (a local path's
    folder, not the whole path); the source itself goes in captions and tooltips."""
    last = sources.str.replace_all("\\", "/", literal=True).str.strip_chars_end("/").str.split("/").list.last()
    return pl.when(last == "").then(sources).otherwise(last)


def short_model_name(source: str) -> str:
    """short_model_names of one source."""
    return pl.select(short_model_names(pl.lit(source))).item()


def _with_model_names(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.with_columns(model_name=short_model_names(pl.col("model")), source=pl.col("model"))


def _interval(rows: pl.DataFrame, value: str, only_value: bool) -> tuple[str, str] | None:
    """The 95% interval columns of `value`: <value>_ci_low/<value>_ci_high, or ci_low/ci_high when
    `value` is the only one drawn from the view; None where the view has none."""
    candidates = [(f"{value}_ci_low", f"{value}_ci_high"), *([("ci_low", "ci_high")] if only_value else [])]
    return next((pair for pair in candidates if set(pair) <= set(rows.columns)), None)


def depth_curves_chart(
    rows: pl.DataFrame, title: str, values: tuple[str, ...], label: str, series: str | None = None
) -> alt.FacetChart:
    """Every model's per-layer result on relative depth ((layer - 0.5) / n_layers, so a 6- and a
    12-layer model share the axis), one panel per corpus: a line per model (and `series`: a value
    column or a view column such as the target type) through the per-layer mean over heads, the
    heads as faint points, and the 95% interval as error bars where the view carries one."""
    rows = _with_model_names(rows)
    index = [
        column
        for column in ("model_name", "source", "corpus", "layer", "relative_depth", "head")
        if column in rows.columns
    ]
    parts = []
    for value in values:
        interval = _interval(rows, value, len(values) == 1)
        part = rows.select(
            *index,
            pl.lit(value).alias("series") if series is None else pl.col(series).cast(pl.String).alias("series"),
            pl.col(value).cast(pl.Float64).alias("value"),
            *(
                pl.col(column).cast(pl.Float64).alias(name)
                for column, name in zip(interval or (), ("ci_low", "ci_high"))
            ),
        )
        if series is not None and len(values) > 1:
            part = part.with_columns(series=pl.format("{} {}", pl.lit(value), "series"))
        parts.append(part)
    long = pl.concat(parts, how="diagonal_relaxed")
    color = alt.Color("model_name:N", title="model", sort=_in_order(long, "model_name"))
    x = alt.X("relative_depth:Q", title="relative depth ((layer - 0.5) / layers)", scale=alt.Scale(domain=[0, 1]))
    tooltip = ["model_name", "source", "series", "layer", alt.Tooltip("relative_depth:Q", format=".2f")]
    # The line is the mean over a layer's heads (rows of per-layer views are their own mean).
    layers = [
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("mean(value):Q", title=label),
            color=color,
            strokeDash=alt.StrokeDash("series:N", title=None, legend=alt.Legend(symbolType="stroke")),
            tooltip=[*tooltip, alt.Tooltip("mean(value):Q", format=".3f", title="mean over heads")],
        )
    ]
    if "head" in long.columns:
        layers.append(
            alt.Chart()
            .mark_point(size=14, opacity=0.3, filled=True)
            .encode(
                x=x,
                y="value:Q",
                color=color,
                shape=alt.Shape("series:N", title=None),
                tooltip=[*tooltip, "head", alt.Tooltip("value:Q", format=".3f")],
            )
        )
    if "ci_low" in long.columns:
        layers.append(alt.Chart().mark_rule(opacity=0.4).encode(x=x, y="ci_low:Q", y2="ci_high:Q", color=color))
    return (
        alt.layer(*layers, data=long)
        .properties(width=300, height=220)
        .facet(column=alt.Column("corpus:N", title=None, sort=_in_order(long, "corpus")))
        .properties(title=f"{title}: {label} by relative depth")
    )


def compare_head_matches_chart(rows: pl.DataFrame, title: str) -> alt.FacetChart:
    """Head correspondence: each head (x: its relative depth) against its nearest head in the other
    model (y: that head's relative depth), coloured by their Jensen-Shannon distance; heads on the
    diagonal do at the same relative depth what their match does."""
    rows = rows.with_columns(
        other=short_model_names(pl.col("other_model")),
        head_label=pl.format("{}-{}", "layer", "head"),
        match_label=pl.format("{}-{}", "other_layer", "other_head"),
    )
    depth = alt.Scale(domain=[0, 1])
    points = (
        alt.Chart()
        .mark_circle(size=50, opacity=0.8)
        .encode(
            x=alt.X("relative_depth:Q", title="head's relative depth", scale=depth),
            y=alt.Y("other_relative_depth:Q", title="nearest head's relative depth", scale=depth),
            color=alt.Color("js_distance:Q", title="JS distance", scale=alt.Scale(scheme="viridis", reverse=True)),
            tooltip=[
                alt.Tooltip("head_label:N", title="head"),
                alt.Tooltip("match_label:N", title="nearest head"),
                "other_model",
                alt.Tooltip("js_distance:Q", format=".3f"),
                alt.Tooltip("runner_up_distance:Q", format=".3f"),
                "n_examples",
                "n_words",
            ],
        )
    )
    # y = x through the heads' own depths: a head on it matches a head at its own relative depth.
    diagonal = alt.Chart().mark_line(color="#999", strokeDash=[4, 3]).encode(x="relative_depth:Q", y="relative_depth:Q")
    return (
        alt.layer(diagonal, points, data=rows)
        .properties(width=260, height=260)
        .facet(column=alt.Column("other:N", title="nearest head in", sort=_in_order(rows, "other")))
        .properties(title=f"{title}: each head's nearest head in another model (word-level JS distance)")
    )


def save_chart(chart: alt.TopLevelMixin, folder: Path, name: str) -> tuple[Path, Path]:
    """Write `name`.html and `name`.png into `folder`; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    html, png = folder / f"{name}.html", folder / f"{name}.png"
    chart.save(html)
    chart.save(png, scale_factor=1.5)
    return html, png
