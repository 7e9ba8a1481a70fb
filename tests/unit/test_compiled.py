"""Compiled tensor functions: torch.compile on first use, the plain function where compiling fails."""

import logging

import pytest
import torch

from dagster_project.compute.compiled import CompiledFunction


def _scaled_log(x: torch.Tensor) -> torch.Tensor:
    return 2.0 * torch.log(x)


def test_a_failing_compile_falls_back_to_the_function_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_compiler(function: object, **options: object) -> object:
        def compiled(*args: object) -> object:
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\ndetails")

        return compiled

    monkeypatch.setattr(torch, "compile", no_compiler)
    function = CompiledFunction(_scaled_log)
    x = torch.tensor([1.0, torch.e, torch.e**2])
    with caplog.at_level(logging.WARNING, logger="dagster_project.compute.compiled"):
        first, second = function(x), function(x)
    assert first.tolist() == pytest.approx([0.0, 2.0, 4.0])
    assert torch.equal(first, second)
    assert function.failed
    assert [record.getMessage() for record in caplog.records] == [
        "torch.compile of _scaled_log failed, so it runs uncompiled (slower, same values): "
        "InvalidCxxCompiler: No working C++ compiler found"
    ]
