"""A live JPEG frame's size is read from its header before anything is decoded: a small file
that declares a huge picture is refused without the decoder allocating it."""

from __future__ import annotations

import pytest

from service.preview.frames import FrameDecoder, jpeg_size
from service.preview.protocol import SessionConfig
from tests.preview.jpegs import declaring, jpeg


@pytest.mark.parametrize("size", [(96, 96), (320, 180), (1920, 1080)])
def test_the_header_says_the_size(size: tuple[int, int]) -> None:
    assert jpeg_size(jpeg(*size)) == size


@pytest.mark.parametrize("data", [b"", b"\xff\xd8", b"not a jpeg at all", b"\xff\xd8\xff\xda\x00"])
def test_no_frame_header_is_no_size(data: bytes) -> None:
    assert jpeg_size(data) is None


def test_a_frame_declaring_a_huge_picture_is_refused_unread() -> None:
    config = SessionConfig(type="config", width=96, height=96, pixel_format="jpeg")
    decoder = FrameDecoder(config, 96, 96)
    assert decoder(memoryview(jpeg(96, 96))).shape == (96, 96, 3)
    huge = declaring(jpeg(96, 96), 16000, 8000)
    with pytest.raises(ValueError, match="16000x8000 JPEG frame header"):
        decoder(memoryview(huge))
