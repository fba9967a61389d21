"""Child processes for the local stack: launch, wait until ready, stop with nothing left behind.

Every child runs in its own session, so its process group holds whatever it forks
(vLLM's engine core, say) and stopping the group reaches all of it. Readiness is
polled, never slept for: how long a server takes to come up varies by machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class MissingBinaryError(RuntimeError):
    """A required program is not on PATH; the message names the package that provides it."""


class NotReadyError(RuntimeError):
    """A child did not become ready in time, or exited first; the message carries its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def find_binary(names: Sequence[str], package: str) -> str:
    """The first of ``names`` found on PATH, or an error saying which package to install."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise MissingBinaryError(
        f"none of {', '.join(names)} found on PATH; install it with: "
        f"apt-get install -y --no-install-recommends {package}"
    )


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """Status and body of a GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError):
        return 0, b""


def http_ok(url: str, timeout: float = 2.0) -> bool:
    return http_get(url, timeout)[0] == 200


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` fields from the state on (field 3), or None if the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or None if gone.

    Recorded beside a PID so a later ``stop`` never signals a stranger that reused the number.
    """
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``.

    Read from /proc rather than ``killpg(pgid, 0)``, which also counts zombies that
    an absent parent may never reap.
    """
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(entry.name)
            if fields and fields[2] == str(pgid) and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def stop_group(
    pgid: int, start_time: int | None = None, timeout: float = 10.0, reap: Callable[[], object] = bool
) -> bool:
    """SIGTERM the process group ``pgid``, then SIGKILL whatever is left after ``timeout`` seconds.

    ``start_time`` (from :func:`process_start_time`) guards against a reused PID: when
    the leader's PID now belongs to another process, the group we started is already
    gone and nothing is signalled. ``reap`` is called while waiting so a direct child's
    zombie does not keep the group alive. Returns True once the group is empty.
    """
    current = process_start_time(pgid)
    if start_time is not None and current is not None and current != start_time:
        return True
    deadline = time.monotonic() + timeout
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        while time.monotonic() < deadline:
            reap()
            if not group_members(pgid):
                return True
            time.sleep(0.05)
        deadline = time.monotonic() + 5.0
    reap()
    return not group_members(pgid)


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.1,
    alive: Callable[[], str | None] | None = None,
    context: Callable[[], str] | None = None,
) -> T:
    """Poll ``check`` until it returns something truthy and return that.

    ``alive`` returns a reason string when waiting is pointless (the process died);
    then, or after ``timeout`` seconds, :class:`NotReadyError` names ``what`` and
    adds ``context()`` (a log tail, say).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        reason = alive() if alive is not None else None
        if reason is None and time.monotonic() >= deadline:
            reason = f"not ready after {timeout:g} s"
        if reason is not None:
            extra = f"\n{context()}" if context is not None else ""
            raise NotReadyError(f"{what}: {reason}{extra}")
        time.sleep(interval)


class ManagedProcess:
    """One child in its own process group, its output in a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None
        self.start_time: int | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        self.start_time = process_start_time(self.popen.pid)
        return self

    def exited(self) -> str | None:
        """Why the process is no longer running (for :func:`wait_until`), or None while it runs."""
        if self.popen is None or self.popen.poll() is None:
            return None
        return f"exited with status {self.popen.returncode}"

    def wait_ready(self, check: Callable[[], T | None], timeout: float, interval: float = 0.1) -> T:
        """Poll ``check`` until ready; on failure the error carries the log tail."""
        return wait_until(check, timeout, self.name, interval, alive=self.exited, context=self.log_tail)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last {len(text)} lines of {self.log_path} ---\n" + "\n".join(text)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the whole process group; True when nothing of it is left."""
        if self.popen is None:
            return True
        popen = self.popen
        return stop_group(popen.pid, self.start_time, timeout, reap=popen.poll)
