from dagster import AssetKey

from dagster_project.defs.jobs import ANALYSES, DEFAULT_ANALYSES, analysis_asset_keys


def names(keys: list[AssetKey]) -> set[str]:
    return {key.to_user_string() for key in keys}


def test_attention_and_clark_are_the_defaults_and_cover_the_chosen_corpora() -> None:
    assert DEFAULT_ANALYSES == ("attention", "clark")
    keys = names(analysis_asset_keys(ANALYSES["attention"], ["demo", "xnli_en"], ["demo", "xnli_en", "wiki_segments"]))
    assert {
        "encoder_model",
        "demo_examples",
        "demo_attention_facts",
        "xnli_en_examples",
        "xnli_en_attention_facts",
    } <= keys
    assert {"clark_fig2_special_tokens", "pascual_fig2_attention_histograms"} <= keys
    assert not {key for key in keys if key.startswith("wiki_segments") or "hta" in key}
    assert "clark_fig3_grad_importance" not in keys  # needs an analysis asset: the "clark" analysis


def test_a_chosen_corpus_without_files_is_left_out() -> None:
    keys = names(analysis_asset_keys(ANALYSES["hta"], ["demo", "xnli_en"], ["demo"]))
    assert {"demo_examples", "demo_hta_facts", "pascual_fig1_local_correlation"} <= keys
    assert "xnli_en_hta_facts" not in keys and "xnli_en_examples" not in keys


def test_clark_brings_the_assets_its_charts_need_and_only_when_the_corpus_is_there() -> None:
    keys = names(analysis_asset_keys(ANALYSES["clark"], ["demo", "wiki_segments"], ["demo", "wiki_segments"]))
    assert {
        "grad_importance",
        "clark_fig3_grad_importance",
        "head_mds",
        "clark_fig6_head_mds",
        "wiki_segments_examples",
    } <= keys
    assert "demo_attention_facts" not in keys and not {key for key in keys if "finetun" in key or "ablation" in key}
    assert analysis_asset_keys(ANALYSES["clark"], ["demo"], ["demo"]) == []
    probes = names(analysis_asset_keys(ANALYSES["clark"], ["ud_ewt_dev", "ud_ewt_test"], ["ud_ewt_dev", "ud_ewt_test"]))
    assert {"dependency_probes", "clark_table3_probes", "ud_ewt_dev_examples", "ud_ewt_test_examples"} <= probes


def test_finetuning_is_its_own_analysis() -> None:
    keys = names(analysis_asset_keys(ANALYSES["finetuning"], ["glue_rte"], ["glue_rte", "glue_rte_train"]))
    assert {"finetuned_rte", "rte_ablation", "kovaleva_fig8_head_ablation"} <= keys
    assert not {"grad_importance", "head_mds", "dependency_probes"} & keys


def test_every_chart_belongs_to_an_analysis_and_its_tables_have_writers() -> None:
    from dagster_project.defs.assets.charts import TABLE_WRITERS
    from dagster_project.presentation.chart_registry import CHARTS, PAPER_AUTHORS

    assert {spec.analysis for spec in CHARTS} <= set(ANALYSES)
    assert {spec.paper for spec in CHARTS} <= set(PAPER_AUTHORS)
    assert {table for spec in CHARTS for table in spec.reads} <= set(TABLE_WRITERS)


def test_the_pattern_example_maps_chart_is_drawn_by_the_attention_analysis() -> None:
    # Its name ends in "_examples", which the key-suffix rule used to take for a corpus asset.
    keys = names(analysis_asset_keys(ANALYSES["attention"], ["demo"], ["demo"]))
    assert "kovaleva_fig1_pattern_examples" in keys


def test_a_chart_reading_per_corpus_tables_brings_only_the_chosen_corpora_assets() -> None:
    present = ["ontogum", "conll2012", "glue_mrpc", "glue_mrpc_train", "glue_rte", "glue_rte_train"]
    clark = names(analysis_asset_keys(ANALYSES["clark"], ["conll2012"], present))
    assert {"conll2012_examples", "conll2012_coreference_baselines", "clark_table2_coreference"} <= clark
    assert not {key for key in clark if key.startswith("ontogum")}
    both = names(analysis_asset_keys(ANALYSES["clark"], ["conll2012", "ontogum"], present))
    assert {"conll2012_coreference_baselines", "ontogum_coreference_baselines"} <= both
    tuning = names(analysis_asset_keys(ANALYSES["finetuning"], ["glue_mrpc"], present))
    assert {"finetuned_mrpc", "glue_mrpc_train_examples", "mrpc_ablation"} <= tuning
    assert not {key for key in tuning if "rte" in key}


def test_the_weighting_faithfulness_comes_with_the_attention_on_sst2() -> None:
    # a checkpoint fine-tuned on SST-2 is registered for attention on glue_sst2: its own run computes it
    faithfulness = {"weighting_faithfulness", "compare_weightings_faithfulness"}
    assert faithfulness <= names(analysis_asset_keys(ANALYSES["attention"], ["glue_sst2"], ["glue_sst2"]))
    assert not faithfulness & names(analysis_asset_keys(ANALYSES["attention"], ["glue_mrpc"], ["glue_mrpc"]))
    tuning = names(analysis_asset_keys(ANALYSES["finetuning"], ["glue_sst2"], ["glue_sst2", "glue_sst2_train"]))
    assert "finetuned_sst2" in tuning and not faithfulness & tuning  # the base model has no classifier to explain
