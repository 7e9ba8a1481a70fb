"""Charts of Clark et al. 2019: Figs. 1 and 5 head maps, Fig. 2 special tokens, Fig. 3 gradients, Fig. 4 entropy,
Fig. 6 MDS, Tables 1-3."""

import dataclasses
import re

import altair as alt
import polars as pl

from dagster_project.presentation.charts.common import in_order, layer_paper_marks
from dagster_project.presentation.paper_marks import paper_marks

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
    )
    strip = layer_paper_marks([strip], paper_marks("clark_fig2_special_tokens", "special tokens"), rows).properties(
        width=420, height=220, title=f"{title}: attention to special tokens"
    )
    sep = (
        alt.Chart(rows)
        .mark_circle(size=40, opacity=0.7, color="#e45756")
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("sep_to_sep:Q", title="avg. attention [SEP] → [SEP]", scale=alt.Scale(domain=[0, 1])),
            tooltip=["layer", "head", alt.Tooltip("sep_to_sep:Q", format=".3f")],
        )
    )
    sep = layer_paper_marks([sep], paper_marks("clark_fig2_special_tokens", "sep to sep"), rows).properties(
        width=420, height=160, title="attention from [SEP] to [SEP]"
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
    return layer_paper_marks([heads, references], paper_marks("clark_fig4_entropy"), rows).properties(
        width=420, height=260, title=f"{title}: attention entropy"
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
    x = alt.X("mention_type:N", title="mention type", sort=["all", "pronoun", "proper", "nominal"])
    offset = alt.XOffset("system:N", sort=systems)
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=alt.Y("accuracy:Q", title="antecedent selection accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("system:N", sort=systems, title="system"),
            tooltip=["corpus", "system", "mention_type", alt.Tooltip("accuracy:Q", format=".3f"), "n"],
        )
    )
    # the paper's head 5-4 stands on the bar of the model's best head (its system is "head <layer>-<head>")
    heads = [system for system in systems if re.fullmatch(r"head \d+-\d+", system)]
    marks = [
        dataclasses.replace(mark, at=tuple((field, heads[0] if value == "head" else value) for field, value in mark.at))
        for mark in paper_marks("clark_table2_coreference")
        if dict(mark.at).get("system") in systems or (dict(mark.at).get("system") == "head" and heads)
    ]
    # x and xOffset on the layer: the bars and the paper's ticks share them
    return (
        layer_paper_marks([bars], marks, data=rows)
        .encode(x=x, xOffset=offset)
        .properties(width=420, height=260)
        .facet(column=alt.Column("corpus:N", title=None, sort=in_order(rows, "corpus")))
        .properties(title=f"{title}: coreference antecedent selection (ticks: Clark BERT-base, CoNLL-2012)")
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
    relations = set(rows["relation"])
    marks = [mark for mark in paper_marks("clark_table1_dependency_heads") if dict(mark.at)["relation"] in relations]
    return layer_paper_marks([bars, baseline, labels], marks, y=y).properties(
        width=420,
        height=alt.Step(14),
        title=f"{title}: best head per dependency relation (coloured tick: Clark BERT-base)",
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


def clark_head_distances_chart(rows: pl.DataFrame, title: str) -> alt.Chart:
    """Clark Fig. 6 (its input): the Jensen-Shannon distance between every two heads' attention
    maps, heads in layer order, the matrix the MDS embedding is drawn from."""
    rows = rows.sort("layer_a", "head_a", "layer_b", "head_b").with_columns(
        head=pl.format("{}-{}", "layer_a", "head_a"), other=pl.format("{}-{}", "layer_b", "head_b")
    )
    order = rows.unique("head", maintain_order=True)["head"].to_list()
    return (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("other:O", title="head", sort=order, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("head:O", title="head", sort=order, axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("js:Q", title="JS distance", scale=alt.Scale(scheme="viridis", reverse=True)),
            tooltip=["head", "other", alt.Tooltip("js:Q", format=".3f")],
        )
        .properties(width=360, height=360, title=f"{title}: Jensen-Shannon distance between heads")
    )


# Clark Figs. 1 and 5: the heads each figure names (clark_head_example_maps' roles), in the
# paper's order, with what the paper says each does.
HEAD_MAP_ROLES = {
    "Fig. 1": {
        "broad": "attends broadly",
        "next token": "attends to the next token",
        "[SEP]": "attends to [SEP]",
        ". and ,": "attends to periods and commas",
    },
    "Fig. 5": {
        "dobj": "direct objects attend to their verbs",
        "det": "determiners attend to their noun",
        "poss": "possessives attend to the head of the NP",
        "auxpass": "passive auxiliaries attend to their verb",
        "pobj": "prepositions attend to their objects",
        "coreference": "coreferent mentions attend to their antecedents",
    },
}
# A line per (query, key) weight of at least MIN_LINE_WEIGHT, at most LINES_PER_QUERY per query
# (the largest): lighter ones would be invisible anyway (Clark Fig. 1: "some attention weights are
# so low they are invisible"), and a 128-token map stays within Altair's 5000 rows per panel.
MIN_LINE_WEIGHT = 0.02
LINES_PER_QUERY = 20
_TOKEN_STEP = 9  # pixels per token


def _shown_example(rows: pl.DataFrame) -> int:
    """The kept example a role is drawn on: the one with the most gold links of the role (Fig. 5;
    null for Fig. 1), then the first by example_id."""
    per_example = rows.group_by("example_id").agg(pl.col("gold_links").max().fill_null(0))
    return per_example.sort(pl.col("gold_links"), pl.col("example_id"), descending=[True, False])["example_id"][0]


def _head_map_panel(rows: pl.DataFrame, figure: str) -> alt.LayerChart:
    """One named head on one kept example, drawn as Clark draws it: the tokens twice, attending
    (left) and attended (right), a line per weight, darker for more."""
    first = rows.row(0, named=True)
    example = _shown_example(rows)
    cells = rows.filter(pl.col("example_id") == example)
    tokens = cells.select(position="query", token="query_token").unique().sort("position")
    lines = (
        cells.filter(pl.col("attention") >= MIN_LINE_WEIGHT)
        .filter(pl.col("attention").rank("ordinal", descending=True).over("query") <= LINES_PER_QUERY)
        .select("query", "key", "query_token", "key_token", "attention", left=pl.lit(0.0), right=pl.lit(1.0))
    )
    n = tokens.height
    y = alt.Scale(domain=[-0.5, n - 0.5], reverse=True)
    x = alt.Scale(domain=[0, 1])
    edges = (
        alt.Chart(lines)
        .mark_rule(color="#1f4e99")
        .encode(
            x=alt.X("left:Q", scale=x, axis=None),
            x2="right:Q",
            y=alt.Y("query:Q", scale=y, axis=None),
            y2="key:Q",
            opacity=alt.Opacity("attention:Q", scale=alt.Scale(domain=[0, 1], range=[0, 1]), legend=None),
            tooltip=["query_token", "key_token", alt.Tooltip("attention:Q", format=".3f")],
        )
    )
    words = alt.Chart(tokens.with_columns(left=pl.lit(0.0), right=pl.lit(1.0))).encode(
        y=alt.Y("position:Q", scale=y, axis=None), text="token:N"
    )
    attending = words.mark_text(align="right", dx=-3, fontSize=8).encode(x=alt.X("left:Q", scale=x, axis=None))
    attended = words.mark_text(align="left", dx=3, fontSize=8).encode(x=alt.X("right:Q", scale=x, axis=None))
    role, score = first["role"], first["score"]
    if figure == "Fig. 5":
        links = int(cells["gold_links"].max() or 0)
        measure = f"{score:.1%}" + (f" {first['direction']}" if first["direction"] else "")
        shown = f"ex. {example}" + ("" if links else f": no {role} in the kept examples")
    else:
        measure = f"{score:.2f}" + (" nats" if role == "broad" else "")
        shown = f"ex. {example}"
    return alt.layer(edges, attending, attended).properties(
        width=90,
        height=n * _TOKEN_STEP,
        title=alt.TitleParams(
            f"Head {first['layer']}-{first['head']}: {role} ({measure})",
            subtitle=[HEAD_MAP_ROLES[figure].get(role, role), f"{first['corpus']}, {shown}"],
            fontSize=11,
        ),
    )


def _head_maps_chart(rows: pl.DataFrame, title: str, figure: str) -> alt.HConcatChart:
    """The named heads of `figure`, one panel each in the paper's order; a role several corpora
    name is drawn from the first of them (the rows' order)."""
    rows = rows.filter(pl.col("figure") == figure)
    what = "heads with the patterns of §3" if figure == "Fig. 1" else "heads that correspond to linguistic phenomena"
    if rows.is_empty():
        note = pl.DataFrame({"note": [f"no head is named for {figure} on these corpora"]})
        return alt.hconcat(alt.Chart(note).mark_text().encode(text="note:N")).properties(title=f"{title}: {what}")
    order = list(HEAD_MAP_ROLES[figure])
    roles = sorted(set(rows["role"]), key=lambda role: (order.index(role) if role in order else len(order), role))
    panels = []
    for role in roles:
        of_role = rows.filter(pl.col("role") == role)
        panels.append(_head_map_panel(of_role.filter(pl.col("corpus") == of_role["corpus"][0]), figure))
    return alt.hconcat(*panels, spacing=70).properties(title=f"{title}: {what}").configure_view(strokeWidth=0)


def clark_fig1_head_maps_chart(rows: pl.DataFrame, title: str) -> alt.HConcatChart:
    """Clark Fig. 1: the broadest head and the heads putting the most on the next token, [SEP] and
    periods/commas, each on a kept example."""
    return _head_maps_chart(rows, title, "Fig. 1")


def clark_fig5_head_maps_chart(rows: pl.DataFrame, title: str) -> alt.HConcatChart:
    """Clark Fig. 5: the best head for direct objects, determiners, possessives, passive
    auxiliaries, prepositional objects and coreference, each on the kept example with the most
    instances of its relation."""
    return _head_maps_chart(rows, title, "Fig. 5")
