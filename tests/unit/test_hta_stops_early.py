"""context_function stops the forward once the last layer's context is captured, in every family and
under torch.func transforms: the last output projection (and everything after it) never runs."""

import pytest
import torch
from torch.func import jvp, vjp

from dagster_project.compute.attention_layouts import attention_blocks, attention_layout
from dagster_project.compute.pascual.hta import context_function
from tests.tiny_models import FAMILIES, TINY_LAYERS, family_config

N = 5


@pytest.mark.parametrize("name", list(FAMILIES))
def test_contexts_skip_the_last_output_projection(name):
    tokenizer = FAMILIES[name].tokenizer()
    torch.manual_seed(0)
    model = FAMILIES[name].model_class(family_config(name, tokenizer, attn_implementation="eager")).eval().double()
    ids = torch.randint(5, len(tokenizer), (1, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        e0 = model(input_ids=ids, output_hidden_states=True).hidden_states[0]
    projections = [block.get_submodule(attention_layout(model).output) for block in attention_blocks(model)]
    last = projections[-1]
    runs_per_pass = sum(projection is last for projection in projections)  # ALBERT shares it: TINY_LAYERS
    calls = []
    counter = last.register_forward_hook(lambda *_: calls.append(1))
    try:
        contexts = context_function(model)
        with torch.no_grad():
            plain = contexts(e0)
        assert len(calls) == runs_per_pass - 1  # the old full pass ran it runs_per_pass times
        tangent = torch.randn_like(e0, generator=torch.Generator().manual_seed(2))
        primal_out, tangent_out = jvp(contexts, (e0,), (tangent,))
        out, pull_back = vjp(contexts, e0)
        (cotangent,) = pull_back(tangent_out)
        assert len(calls) == 3 * (runs_per_pass - 1)
        assert plain.shape[0] == TINY_LAYERS
        torch.testing.assert_close(primal_out, plain, rtol=0, atol=0)
        torch.testing.assert_close(out, plain, rtol=0, atol=0)
        # <J v, J v> = <v, J^T J v>: the forward and reverse transforms see the same truncated pass.
        torch.testing.assert_close((tangent_out * tangent_out).sum(), (tangent * cotangent).sum())
        calls.clear()
        with torch.no_grad():
            model(input_ids=ids)  # the stopping hooks are gone: a plain forward runs to the end
        assert len(calls) == runs_per_pass
    finally:
        counter.remove()
