"""Zoo test fixtures: 30 real SCAN rows and a single-threaded torch (the CI box is shared)."""

from __future__ import annotations

import pytest
import torch
from tiny_zoo import ScanRows, read_scan_rows


@pytest.fixture(scope="session")
def scan_rows(shared_data) -> ScanRows:
    """The first 30 rows of SCAN's tasks.txt whose action sequence has at most 6 actions."""
    return read_scan_rows(shared_data)


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
