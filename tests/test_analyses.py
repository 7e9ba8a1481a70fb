from dagster import AssetKey

from dagster_project.analyses import ANALYSES, DEFAULT_ANALYSES, analysis_asset_keys


def names(keys: list[AssetKey]) -> set[str]:
    return {key.to_user_string() for key in keys}


def test_attention_is_the_only_default_and_covers_the_chosen_corpora() -> None:
    assert DEFAULT_ANALYSES == ("attention",)
    keys = names(analysis_asset_keys(ANALYSES["attention"], ["demo", "xnli_en"], ["demo", "xnli_en", "wiki_segments"]))
    assert {"encoder_model", "demo_examples", "demo_attention_facts", "xnli_en_examples", "xnli_en_attention_facts"} <= keys
    assert {"clark_fig2_special_tokens", "pascual_fig2_attention_histograms"} <= keys
    assert not {key for key in keys if key.startswith("wiki_segments") or "hta" in key}
    assert "clark_fig3_grad_importance" not in keys  # needs an analysis asset: the "extras" analysis


def test_a_chosen_corpus_without_files_is_left_out() -> None:
    keys = names(analysis_asset_keys(ANALYSES["hta"], ["demo", "xnli_en"], ["demo"]))
    assert {"demo_examples", "demo_hta_facts", "pascual_fig1_local_correlation"} <= keys
    assert "xnli_en_hta_facts" not in keys and "xnli_en_examples" not in keys


def test_extras_bring_the_assets_their_charts_need_and_only_when_the_corpus_is_there() -> None:
    keys = names(analysis_asset_keys(ANALYSES["extras"], ["demo", "wiki_segments"], ["demo", "wiki_segments"]))
    assert {"grad_importance", "clark_fig3_grad_importance", "wiki_segments_examples", "encoder_model"} <= keys
    assert "demo_attention_facts" not in keys
    assert analysis_asset_keys(ANALYSES["extras"], ["demo"], ["demo"]) == []
