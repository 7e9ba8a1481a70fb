"""A run's HTA protocol (checked_hta_facts) on the tiny BERT: the estimator checked on the examples
the run writes, and a fallback to exact HTA that computes each example once."""

import copy
from dataclasses import replace

import polars as pl
import pytest
import torch
from polars.testing import assert_frame_equal

from dagster_project.compute.batching import first_examples
from dagster_project.compute.checks import CheckOutcome
from dagster_project.compute.models import LoadedEncoder
from dagster_project.compute.pascual import hta_facts
from dagster_project.compute.pascual.hta import HtaMethod
from dagster_project.compute.pascual.saved_contributions import SavedContributions


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[HtaMethod]:
    """The method of every input contribution computed from here on, one per example."""
    calls: list[HtaMethod] = []
    original = hta_facts.input_norms

    def counted(model, e0, method, generator, **options):
        calls.append(method)
        return original(model, e0, method, generator, **options)

    monkeypatch.setattr(hta_facts, "input_norms", counted)
    return calls


def exact(computed: list[HtaMethod]) -> list[HtaMethod]:
    return [method for method in computed if method.probes is None]


def test_a_fallback_to_exact_reuses_the_checks_exact_maps(
    encoder: LoadedEncoder, demo_tokens: pl.DataFrame, computed: list[HtaMethod]
):
    outcomes: list[CheckOutcome] = []
    checked = hta_facts.checked_hta_facts(
        encoder,
        demo_tokens,
        HtaMethod(1),  # one probe per token misses exact HTA on every layer
        max_examples=5,
        seed=0,
        check_examples=3,
        check_min_pearson=0.99,
        fallback_to_exact=True,
        progress=lambda done, total, seconds: None,
        checked=outcomes.append,
    )
    [outcome] = outcomes
    assert not outcome.passed and checked.method == HtaMethod(None)
    check_ids = [int(i) for i in outcome.metadata["example_ids"].split(", ")]
    written = first_examples(demo_tokens, 5)
    assert demo_tokens["example_id"].n_unique() > 5
    assert len(check_ids) == 3 and set(check_ids) <= set(written["example_id"])  # drawn from the written examples
    assert len(exact(computed)) == 5  # 3 in the check, then only the 2 others

    computed.clear()
    reference = hta_facts.extract_hta_facts(encoder, written, HtaMethod(None), seed=0)
    assert len(exact(computed)) == 5
    for table, rows in reference.tables.items():
        assert_frame_equal(checked.facts.tables[table], rows, check_exact=True)


def test_a_check_that_saw_every_written_example_gives_its_exact_maps(
    encoder: LoadedEncoder, demo_tokens: pl.DataFrame, computed: list[HtaMethod]
):
    outcomes: list[CheckOutcome] = []
    checked = hta_facts.checked_hta_facts(
        encoder,
        demo_tokens,
        HtaMethod(32),  # D = 32 orthonormal probes per token: the estimate is exact, and passes
        max_examples=3,
        seed=0,
        check_examples=16,
        check_min_pearson=0.99,
        fallback_to_exact=True,
        progress=lambda done, total, seconds: None,
        checked=outcomes.append,
    )
    [outcome] = outcomes
    assert outcome.passed and outcome.metadata["examples"] == outcome.metadata["written_examples"] == 3
    assert outcome.metadata["judged_on"].startswith("the gap itself: the check saw every one of the 3")
    # each example computed once exactly and once estimated (the check), not estimated again for the facts
    assert checked.method == HtaMethod(None) and len(computed) == 6 and len(exact(computed)) == 3
    assert checked.outcomes[-1].metadata["estimator_within_tolerance"]


class Killed(Exception):
    pass


def test_a_killed_run_resumes_from_the_saved_contributions(
    encoder: LoadedEncoder, demo_tokens: pl.DataFrame, computed: list[HtaMethod], tmp_path
):
    def killed_after(examples: int):
        def progress(done: int, total: int, seconds: float) -> None:
            if done == examples:
                raise Killed

        return progress

    written = first_examples(demo_tokens, 5)
    saved = SavedContributions.of(tmp_path / "hta_state", encoder.model)
    with pytest.raises(Killed):
        hta_facts.extract_hta_facts(encoder, written, HtaMethod(2), seed=3, progress=killed_after(3), saved=saved)
    assert len(computed) == 3 and saved.count() == 3

    computed.clear()
    resumed = hta_facts.extract_hta_facts(encoder, written, HtaMethod(2), seed=3, saved=saved)
    assert len(computed) == 2 and saved.count() == 5  # only the examples the killed run had not finished

    computed.clear()
    reference = hta_facts.extract_hta_facts(encoder, written, HtaMethod(2), seed=3)
    assert len(computed) == 5
    for table, rows in reference.tables.items():
        assert_frame_equal(resumed.tables[table], rows, check_exact=True)

    # another seed draws other probes, and other weights give other contributions: nothing is reused
    computed.clear()
    hta_facts.extract_hta_facts(encoder, written, HtaMethod(2), seed=4, saved=saved)
    assert len(computed) == 5 and saved.count() == 10
    retrained = replace(encoder, model=copy.deepcopy(encoder.model))
    with torch.no_grad():
        retrained.model.embeddings.word_embeddings.weight[0, 0] += 1.0
    computed.clear()
    saved_for_retrained = SavedContributions.of(saved.folder, retrained.model)
    hta_facts.extract_hta_facts(retrained, written, HtaMethod(2), seed=4, saved=saved_for_retrained)
    assert len(computed) == 5 and saved.count() == 15

    saved.remove()
    assert saved.count() == 0 and not saved.folder.exists()
