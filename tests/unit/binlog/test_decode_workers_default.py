"""How many decode processes a changefeed gets when it does not say (``[mounter] worker-num``)."""

from __future__ import annotations

import pytest

from cdc.binlog.decode_pool import default_workers


@pytest.mark.parametrize(("cores", "workers"), [(1, 0), (2, 0), (3, 1), (4, 2), (6, 4), (64, 4)])
def test_small_machines_decode_in_the_reader_and_larger_ones_leave_it_two_cores(
    cores: int, workers: int
) -> None:
    assert default_workers(cores) == workers
