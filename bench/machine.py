"""What a benchmark ran on: printed above every table."""

from __future__ import annotations

import os
import platform


def describe() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import av
    import onnxruntime

    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"ONNX Runtime {onnxruntime.__version__}, PyAV {av.__version__} "
        f"(FFmpeg {av.ffmpeg_version_info})"
    )
