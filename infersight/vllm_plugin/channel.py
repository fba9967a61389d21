"""Scheduler timings from the engine-core process to the API-server process.

The timed scheduler runs in vLLM's engine core, a child process of the API
server, where the plugin's metrics are not served. It keeps a histogram in a
small shared-memory file named after the API server's pid (its parent) and the
engine index; the plugin maps the same file and reads it at scrape time. Per
call the writer does two plain stores into the mapping: no lock, no syscall.
There is one writer per file, and the reader derives ``_count`` from the buckets,
so a scrape never shows a count that disagrees with them.

Layout: magic, number of calls, number of bounds (8 bytes each); the bounds
(float64); then per call the per-bucket counts (uint64, one more than the
bounds, for +Inf) and the sum of seconds (float64).
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path

from infersight.config import Config
from infersight.vllm_plugin.buckets import le
from infersight.vllm_plugin.histogram import cumulative

MAGIC = b"INFSCH01"
CALLS = ("schedule", "update_from_output")
_HEADER = struct.Struct("<8sQQ")
_WORD = 8


def channel_dir(config: Config) -> Path:
    if config.plugin.channel_dir:
        return Path(config.plugin.channel_dir)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


def channel_path(directory: Path, api_server_pid: int, engine: int | str) -> Path:
    return directory / f"infersight-scheduler-{api_server_pid}-{engine}"


def remove_stale(directory: Path) -> list[Path]:
    """Delete channel files whose API server is gone (an engine core killed before any scrape).

    The reader unlinks a channel as soon as it maps it and the writer at exit, but a
    process killed outright does neither; each API server sweeps up after dead ones.
    """
    removed = []
    for path in directory.glob("infersight-scheduler-*-*"):
        try:
            pid = int(path.name.split("-")[2])
            os.kill(pid, 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            removed.append(path)
        except (ValueError, PermissionError):  # not ours to judge: another user's live process, a foreign name
            continue
    return removed


def _size(n_bounds: int) -> int:
    return _HEADER.size + _WORD * n_bounds + len(CALLS) * _WORD * (n_bounds + 2)


class _Views:
    """Typed views of one mapped channel file: bounds, per-call counts and sums."""

    def __init__(self, buffer: memoryview, n_bounds: int) -> None:
        offset = _HEADER.size
        self.bounds = list(buffer[offset : offset + _WORD * n_bounds].cast("d"))
        offset += _WORD * n_bounds
        self.counts = []
        for _ in CALLS:
            self.counts.append(buffer[offset : offset + _WORD * (n_bounds + 1)].cast("Q"))
            offset += _WORD * (n_bounds + 1)
        self.sums = buffer[offset : offset + _WORD * len(CALLS)].cast("d")


class ChannelWriter:
    """The engine-core side: creates the file, then counts calls into it."""

    def __init__(self, path: Path, bounds: Sequence[float]) -> None:
        self.path = path
        n = len(bounds)
        initial = bytearray(_size(n))
        _HEADER.pack_into(initial, 0, MAGIC, len(CALLS), n)
        struct.pack_into(f"<{n}d", initial, _HEADER.size, *bounds)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(initial)
        os.replace(tmp, path)  # the reader never sees a half-written header
        with open(path, "r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), len(initial))
        views = _Views(memoryview(self._map), n)
        self._bounds = views.bounds
        self._counts = views.counts
        self._sums = views.sums

    def observe(self, call: int, seconds: float) -> None:
        counts = self._counts[call]
        index = bisect_left(self._bounds, seconds)
        counts[index] = counts[index] + 1
        self._sums[call] = self._sums[call] + seconds

    def remove(self) -> None:
        """Delete the file (the mapping lives on until the process ends); a no-op if the reader took it."""
        self.path.unlink(missing_ok=True)


class ChannelReader:
    """The API-server side: maps a writer's file and reports its histograms."""

    def __init__(self, buffer: memoryview, n_bounds: int) -> None:
        self._views = _Views(buffer, n_bounds)
        self.les = [le(b) for b in (*self._views.bounds, float("inf"))]

    @classmethod
    def attach(cls, path: Path) -> ChannelReader | None:
        """Map ``path`` if a writer has created it, then unlink it so no file outlives the processes.

        Returns None while there is no file; raises ValueError for a file that is not a channel.
        """
        try:
            with open(path, "rb") as handle:
                mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
        if len(mapped) < _HEADER.size:
            raise ValueError(f"{path}: {len(mapped)} bytes is too short for a scheduler channel")
        magic, n_calls, n_bounds = _HEADER.unpack_from(mapped, 0)
        if magic != MAGIC or n_calls != len(CALLS) or len(mapped) != _size(n_bounds):
            raise ValueError(f"{path}: not an infersight scheduler channel (magic {magic!r}, {len(mapped)} bytes)")
        path.unlink(missing_ok=True)
        return cls(memoryview(mapped), n_bounds)

    def histogram(self, call: int) -> tuple[list[tuple[str, int]], float]:
        """Cumulative ``(le, count)`` buckets and the sum of one call's durations."""
        return cumulative(self.les, self._views.counts[call]), self._views.sums[call]
