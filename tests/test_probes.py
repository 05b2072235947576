"""The hook's probes: sync sites from warn mode, FLOPs from FlopCounterMode (CPU torch)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from gputop_train.hook.probes import FlopCounter, SyncScanner
from tests.scenarios import fake_cuda
from tests.scenarios.fake_cuda import FakeCuda

torch = pytest.importorskip("torch")


def test_a_scan_counts_each_sync_with_its_call_site_and_lets_other_warnings_through() -> None:
    cuda = FakeCuda()
    scanner = SyncScanner(SimpleNamespace(cuda=cuda, __file__=fake_cuda.__file__))
    scanner.start()
    assert cuda.mode == "warn"
    for _ in range(3):
        cuda.sync()  # the user's line: the scan names it, not the library's
    with pytest.warns(DeprecationWarning):
        warnings.warn("the user's own warning", DeprecationWarning, stacklevel=1)
    result = scanner.stop()
    assert cuda.mode == "default"
    assert result.count == 3
    (site,) = result.sites
    assert site["file"].endswith("test_probes.py") and site["op"].startswith("cuda.sync()")


def test_flops_of_a_step_are_counted() -> None:
    model = torch.nn.Linear(64, 32)
    counter = FlopCounter()
    counter.start()
    model(torch.randn(8, 64)).sum().backward()
    flops = counter.stop()
    # Forward and the weight gradient: two 8x64x32 matmuls (the input needs no gradient).
    assert flops == 2 * (2 * 8 * 64 * 32)
    assert not counter.active
