from __future__ import annotations

import os

import pytest

from service.media.decode import DecodeLimits, warm_up

os.environ.setdefault("SVT_LOG", "1")  # libsvtav1 prints a banner per encoder otherwise


@pytest.fixture(scope="session", autouse=True)
def _decoder_forkserver() -> None:
    """Start the forkserver once, so no test's deadline includes its start-up."""
    warm_up()


@pytest.fixture
def limits() -> DecodeLimits:
    return DecodeLimits(max_pixels=4096 * 2304, max_duration_s=3 * 3600.0, stall_timeout_s=10.0)
