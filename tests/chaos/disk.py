"""A worker's state directory on a small tmpfs that the ``diskfull`` scenario fills up.

Mounting needs root (CI containers and developer VMs usually are); elsewhere the scenario stops
with that reason instead of pretending.
"""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

FILLER = "filler.bin"


class SmallDisk:
    def __init__(self, path: Path, size_mb: int = 64) -> None:
        self.path = path
        self.size_mb = size_mb
        self.mounted = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.path)],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise SystemExit(f"diskfull needs to mount a tmpfs (root): {done.stderr.strip()}")
        self.mounted = True

    def fill(self) -> int:
        """Write until the disk is full; returns the bytes written."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(self.path / FILLER, "wb", buffering=0) as f:
            while True:
                try:
                    written += f.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            for size in (65536, 4096, 512, 1):  # the last few bytes too
                try:
                    while True:
                        written += f.write(b"\0" * size)
                except OSError:
                    continue
        return written

    def free(self) -> None:
        """The operator clears space."""
        try:
            os.remove(self.path / FILLER)
        except FileNotFoundError:
            pass

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=30)
            self.mounted = False
