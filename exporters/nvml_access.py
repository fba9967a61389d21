"""Access to an NVML module (``pynvml`` from nvidia-ml-py, or the test fake): timed calls,
bounded error reasons and per-device fallbacks between API versions.

Every call goes through :meth:`Nvml.call`, which adds its duration to
``nvml_seconds`` and counts it in ``calls``: the driver's own cost, exported
apart from the collector's (NVML calls are slow: ~0.8 ms for samples, ~3.6 ms for
power on an H100).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# NVML return code constant -> error reason label (a bounded set; anything else is "other").
_REASON_CODES = {
    "NVML_ERROR_UNINITIALIZED": "uninitialized",
    "NVML_ERROR_INVALID_ARGUMENT": "invalid_argument",
    "NVML_ERROR_NOT_SUPPORTED": "not_supported",
    "NVML_ERROR_NO_PERMISSION": "no_permission",
    "NVML_ERROR_NOT_FOUND": "not_found",
    "NVML_ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
    "NVML_ERROR_TIMEOUT": "timeout",
    "NVML_ERROR_LIBRARY_NOT_FOUND": "library_not_found",
    "NVML_ERROR_FUNCTION_NOT_FOUND": "function_not_found",
    "NVML_ERROR_GPU_IS_LOST": "gpu_lost",
    "NVML_ERROR_RESET_REQUIRED": "reset_required",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": "version_mismatch",
    "NVML_ERROR_UNKNOWN": "unknown",
}
ERROR_REASONS: tuple[str, ...] = (*_REASON_CODES.values(), "import")

# Codes that mean "this driver or GPU cannot do that": try the next API version, or give up on the reading.
_UNSUPPORTED = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_ARGUMENT_VERSION_MISMATCH")


class Nvml:
    """One NVML module plus the bookkeeping every caller needs."""

    def __init__(self, module: Any) -> None:
        self.m = module
        self.error_class: type[Exception] = module.NVMLError
        # pynvml's unversioned wrappers turn "function not found" into this non-NVMLError class.
        self.mismatch_class: type[Exception] = module.NVMLLibraryMismatchError
        self._reasons = {getattr(module, name): reason for name, reason in _REASON_CODES.items()}
        self._unsupported = {getattr(module, name) for name in _UNSUPPORTED}
        self.lost_code = module.NVML_ERROR_GPU_IS_LOST
        self.not_found_code = module.NVML_ERROR_NOT_FOUND
        self.timeout_code = module.NVML_ERROR_TIMEOUT
        self.nvml_seconds = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self.nvml_seconds += elapsed
                self.calls += 1

    def reason(self, exc: BaseException) -> str:
        return self._reasons.get(getattr(exc, "value", None), "other")

    def code(self, exc: BaseException) -> Any:
        return getattr(exc, "value", None)

    def unsupported(self, exc: BaseException) -> bool:
        return self.code(exc) in self._unsupported


class UnsupportedError(Exception):
    """No API version of a reading works on this GPU. ``first`` is True only the time it is
    found out, so the caller counts and logs it once and then just skips the reading."""

    def __init__(self, key: str, first: bool) -> None:
        super().__init__(key)
        self.first = first


class Fallbacks:
    """Remembers, per device and reading, the first API version the driver supports.

    ``read("memory", v2, v1)`` tries ``v2`` and, when the driver lacks it, ``v1``;
    the choice sticks, so an old driver costs one failed call, not one per poll.
    """

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self._choice: dict[str, int] = {}

    def read(self, key: str, *calls: Callable[[], T]) -> T:
        start = self._choice.get(key, 0)
        if start < 0:
            raise UnsupportedError(key, first=False)
        for index in range(start, len(calls)):
            try:
                value = self.nvml.call(calls[index])
            except self.nvml.mismatch_class:
                continue
            except self.nvml.error_class as exc:
                if self.nvml.unsupported(exc):
                    continue
                raise
            self._choice[key] = index
            return value
        self._choice[key] = -1
        raise UnsupportedError(key, first=True)
