"""Zoo test fixtures: 30 real SCAN rows."""

from __future__ import annotations

import pytest
from tiny_zoo import ScanRows, read_scan_rows


@pytest.fixture(scope="session")
def scan_rows(shared_data) -> ScanRows:
    """The first 30 rows of SCAN's tasks.txt whose action sequence has at most 6 actions."""
    return read_scan_rows(shared_data)


@pytest.fixture(params=["compiled", "torch"])
def loops(request, monkeypatch):
    """Each test of a one-node loop runs twice: its steps as the compiled loops of `recurrent_kernels` (the CPU at a
    batch of a few rows) and as torch operators (other devices, larger batches)."""
    from benchbuild.zoo import recurrent_kernels

    used = []
    real = recurrent_kernels.uses_kernels
    monkeypatch.setattr(recurrent_kernels, "uses_kernels",
                        lambda *tensors: used.append(request.param == "compiled" and real(*tensors)) or used[-1])
    yield request.param
    assert any(used) == (request.param == "compiled")
