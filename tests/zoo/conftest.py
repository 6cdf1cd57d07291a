"""Zoo test fixtures: 30 real SCAN rows."""

from __future__ import annotations

import pytest
from tiny_zoo import ScanRows, read_scan_rows


@pytest.fixture(scope="session")
def scan_rows(shared_data) -> ScanRows:
    """The first 30 rows of SCAN's tasks.txt whose action sequence has at most 6 actions."""
    return read_scan_rows(shared_data)
