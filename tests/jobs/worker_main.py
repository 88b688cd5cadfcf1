"""`foley worker` for the reliability tests, with faults planted by file content.

FOLEY_TEST_CRASH_DECODER=<sha256>: the decoder child crashes (SIGSEGV-like exit) on that upload.
FOLEY_TEST_KILL_WORKER=<sha256>: the worker child running that upload SIGKILLs itself.
Everything else is the real worker: Celery, prefork children, the Redis store, the engine.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from pathlib import Path


def _sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _plant_faults() -> None:
    from service.media import decode
    from service.pipeline.engine import FoleyEngine
    from tests.media import faults

    crash = os.environ.get("FOLEY_TEST_CRASH_DECODER")
    kill = os.environ.get("FOLEY_TEST_KILL_WORKER")
    start, render = decode._start, FoleyEngine.render

    def faulty_start(job, target=None):
        if crash and job.decode_frames and _sha(job.path) == crash:
            return start(job, target=faults.crash)
        return start(job)

    def faulty_render(self, input_path, *args, **kwargs):
        if kill and _sha(input_path) == kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return render(self, input_path, *args, **kwargs)

    decode._start = faulty_start
    FoleyEngine.render = faulty_render


if __name__ == "__main__":
    _plant_faults()
    from service.cli import main

    sys.exit(main(["worker", *sys.argv[1:]]))
