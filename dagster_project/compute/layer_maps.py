"""Each encoder layer's attention maps, handed on as the forward finishes the layer: a pass that takes its
statistics there never holds every layer's maps at once (docs/operations/devices.md).

Read through PyTorch's forward hooks on the modules compute.attention_layouts names. A layer's attention
block returns (output, probabilities, ...); the layer module's hook hands those probabilities on once the
whole layer has run, so the states the weightings capture inside it (its LayerNorms') are complete by
then. transformers 5's encoders built on its AttentionInterface return the probabilities of eager
attention whatever `output_attentions` says, and keep none of them when it is False. The families that
compute them outside it (those whose layout names a probability dropout: MPNet, DeBERTa-v2) return them
only with output_attentions=True, and their encoder then collects every layer's: for those the block's
hook takes the probabilities out of what it returns, so the encoder collects None.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from transformers import PreTrainedModel

from dagster_project.compute.attention_layouts import attention_layout, unique_modules


@contextmanager
def finished_layers(model: PreTrainedModel, on_layer: Callable[[int, torch.Tensor], None]) -> Iterator[dict[str, bool]]:
    """While the block runs, every forward of `model` calls `on_layer(layer, probabilities)` as each layer
    finishes: layer 0-based in call order (ALBERT's shared layer once per use), probabilities (B, H, T, T)
    in the forward's dtype. Yields the keywords the forward must be called with (`output_attentions`)."""
    layout = attention_layout(model)
    layers = layout.layers(model.base_model)
    outside_interface = layout.probability_dropout is not None
    running: list[torch.Tensor] = []  # the probabilities of the layer that is running
    finished = [0]  # layers finished in the current forward

    def took_probabilities(_module: torch.nn.Module, _args: tuple, output: tuple) -> tuple | None:
        if output[1] is None:
            raise RuntimeError(
                f"{type(model).__name__}'s attention block returned no attention probabilities: the attention "
                "pass reads them from eager attention (load the model with attn_implementation='eager')"
            )
        running.append(output[1])
        return (output[0], None, *output[2:]) if outside_interface else None

    def started(_module: torch.nn.Module, _args: tuple) -> None:
        running.clear()  # what a forward that failed midway left
        finished[0] = 0

    def finished_layer(_module: torch.nn.Module, _args: tuple, _output: object) -> None:
        layer = finished[0]
        finished[0] = (layer + 1) % len(layers)
        on_layer(layer, running.pop())

    handles = [model.register_forward_pre_hook(started)]
    handles += [
        block.register_forward_hook(took_probabilities)
        for block in unique_modules([layer.get_submodule(layout.attention) for layer in layers])
    ]
    handles += [layer.register_forward_hook(finished_layer) for layer in unique_modules(layers)]
    try:
        yield {"output_attentions": outside_interface}
    finally:
        for handle in handles:
            handle.remove()
