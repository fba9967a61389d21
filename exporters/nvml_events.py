"""XID critical errors: an NVML event set waited on by one background thread.

Events arrive whenever the driver raises them, so they are not polled: the
thread blocks in ``nvmlEventSetWait_v2`` (a short timeout keeps ``stop()``
prompt) and credits each XID to the GPU whose handle the event names.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from exporters.collector import BoundedCounts
from exporters.nvml_access import Nvml
from exporters.nvml_device import GpuDevice, handle_address

log = logging.getLogger(__name__)

WAIT_MS = 500
ERROR_BACKOFF_SECONDS = 1.0  # after an unexpected wait error, so a broken event set cannot spin


class XidWatcher:
    def __init__(self, nvml: Nvml, devices: list[GpuDevice], errors: BoundedCounts) -> None:
        self.nvml, self.m = nvml, nvml.m
        self.devices = {d.address: d for d in devices}
        self.errors = errors
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set = None

    def start(self) -> bool:
        """Register every GPU that supports XID events; False (and no thread) when none does."""
        m = self.m
        try:
            self._event_set = self.nvml.call(m.nvmlEventSetCreate)
        except self.nvml.error_class as exc:
            self.errors.inc(self.nvml.reason(exc))
            log.warning("XID events unavailable: nvmlEventSetCreate failed: %s", exc)
            return False
        registered = 0
        for device in self.devices.values():
            if device.lost:
                continue
            try:
                xid = m.nvmlEventTypeXidCriticalError
                self.nvml.call(m.nvmlDeviceRegisterEvents, device.handle, xid, self._event_set)
                registered += 1
            except self.nvml.error_class as exc:
                self.errors.inc(self.nvml.reason(exc))
                log.warning("GPU %s (%s): XID events unavailable: %s", device.labels[0], device.labels[1], exc)
        if not registered:
            self._free()
            return False
        self._thread = threading.Thread(target=self._run, name="gpu-xid", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._free()

    def _free(self) -> None:
        if self._event_set is not None:
            with contextlib.suppress(self.nvml.error_class):  # freed with the NVML session anyway
                self.nvml.call(self.m.nvmlEventSetFree, self._event_set)
            self._event_set = None

    def _run(self) -> None:
        m = self.m
        failing: str | None = None  # a failure repeating on every wait is counted and logged once
        while not self._stop.is_set():
            try:
                # Not timed through Nvml.call: this is waiting, not driver work.
                event = m.nvmlEventSetWait_v2(self._event_set, WAIT_MS)
            except self.nvml.error_class as exc:
                if self.nvml.code(exc) == self.nvml.timeout_code:
                    failing = None
                    continue
                reason = self.nvml.reason(exc)
                if reason != failing:
                    failing = reason
                    self.errors.inc(reason)
                    log.warning("waiting for XID events failed: %s; retrying every %.0f s", exc, ERROR_BACKOFF_SECONDS)
                self._stop.wait(ERROR_BACKOFF_SECONDS)
                continue
            failing = None
            if not event.eventType & m.nvmlEventTypeXidCriticalError:
                continue
            device = self.devices.get(handle_address(event.device))
            if device is None:
                self.errors.inc("other")
                log.error("XID %d on a GPU this sidecar does not watch", event.eventData)
                continue
            device.record_xid(int(event.eventData))
