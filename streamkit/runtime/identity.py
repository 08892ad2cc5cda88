"""A stable identity per worker process, persisted under ``data_dir``.

Exactly-once with one producer per worker needs a ``transactional.id`` that survives restarts
(the restarted worker's producer then aborts what its crashed predecessor left open, instead of
the broker waiting ``transaction_timeout_ms``) yet is never shared by two live workers (they
would fence each other forever). A worker takes the first free slot ``worker-<n>`` under
``<data_dir>/<app-id>/``, holds an exclusive lock on it while it runs, and reads (or creates
once) the random id stored there — unique across machines that reuse the same path.
"""
from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path

from ..errors import ConfigurationError

MAX_SLOTS = 256


class WorkerIdentity:
    """Holds the slot's lock until ``release``."""

    def __init__(self, data_dir: str, app_id: str) -> None:
        base = Path(data_dir) / app_id
        base.mkdir(parents=True, exist_ok=True)
        for slot in range(MAX_SLOTS):
            fd = os.open(base / f"worker-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._fd: int | None = fd
            self.slot = slot
            self.id = self._read_or_create(base / f"worker-{slot}.id")
            return
        raise ConfigurationError(f"all {MAX_SLOTS} worker slots under {base} are taken by running workers")

    @staticmethod
    def _read_or_create(path: Path) -> str:
        try:
            existing = path.read_text().strip()
        except FileNotFoundError:
            existing = ""
        if existing:
            return existing
        new = uuid.uuid4().hex[:12]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(new)
        os.replace(tmp, path)  # atomic: a crash never leaves a half-written id
        return new

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
