"""Where export jobs keep their files: `<root>/jobs/<id>/` holds the upload (`input`) until the
job finishes and the result (`result.<format>`) until it expires; `<root>/incoming/` holds uploads
still being received. One filesystem, so every move is an atomic rename.

The root must be shared by the API and every worker (a volume in docker-compose).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from service.config import Settings
from service.jobs.store import JobStore

log = logging.getLogger(__name__)
INCOMING_MAX_AGE_S = 6 * 3600.0  # an upload this old was abandoned by a dead API process


class JobStorage:
    def __init__(self, root: Path, *, owned: bool = False) -> None:
        """`owned`: a temporary root, removed with its manager."""
        self.root = root
        self.owned = owned
        self.jobs = root / "jobs"
        self.incoming = root / "incoming"
        self.jobs.mkdir(parents=True, exist_ok=True)
        self.incoming.mkdir(parents=True, exist_ok=True)

    def receiving_dir(self) -> Path:
        """A fresh directory for an upload being received (then `adopt`ed or removed)."""
        return Path(tempfile.mkdtemp(prefix="upload-", dir=self.incoming))

    def adopt(self, job_id: str, upload: Path) -> Path:
        """Move a received upload into the job's directory (atomic: same filesystem)."""
        path = self.input_path(job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(upload, path)
        return path

    def job_dir(self, job_id: str) -> Path:
        return self.jobs / job_id

    def input_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "input"

    def result_path(self, job_id: str, fmt: str) -> Path:
        return self.job_dir(job_id) / f"result.{fmt}"

    def markers_path(self, job_id: str) -> Path:
        """The result's contact markers (service.markers' JSON document), beside it."""
        return self.job_dir(job_id) / "markers.json"

    def staging_path(self, job_id: str, fmt: str, token: str) -> Path:
        """Where one attempt writes its result before renaming it into place: a lost attempt's
        leftovers never look like a result."""
        return self.job_dir(job_id) / f".attempt-{token}.{fmt}"

    def clear_staging(self, job_id: str) -> None:
        """Remove what lost attempts left behind (one attempt runs at a time: the store's
        compare-and-set on `attempts` sees to that)."""
        for path in self.job_dir(job_id).glob(".attempt-*"):
            path.unlink(missing_ok=True)

    def remove_input(self, job_id: str) -> None:
        self.input_path(job_id).unlink(missing_ok=True)

    def remove(self, job_id: str) -> None:
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    def sweep(self, store: JobStore) -> int:
        """Remove the files of jobs whose record has expired, and abandoned uploads; returns how
        many directories went."""
        removed = 0
        now = time.time()
        for path in self.jobs.iterdir():
            record = store.get(path.name)
            if record is None:
                # No record: expired, or (for a moment) not yet written by the API.
                gone = path.stat().st_mtime < now - 60
            else:
                gone = record.expires_at is not None and record.expires_at <= now
            if gone:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
        cutoff = now - INCOMING_MAX_AGE_S
        for path in self.incoming.iterdir():
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
        if removed:
            log.info("removed the files of %d expired or abandoned jobs", removed)
        return removed


def storage_root(settings: Settings) -> Path:
    """`storage_dir`; required with a broker (the API and the workers must share it)."""
    if settings.storage_dir is None:
        raise ValueError(
            "FOLEY_STORAGE_DIR must be set with FOLEY_BROKER_URL: a directory the "
            "API and every worker share"
        )
    return settings.storage_dir
