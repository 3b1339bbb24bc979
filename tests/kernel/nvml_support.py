"""NVML's C functions as a Python double that speaks ctypes, for the device-capability tests."""

from __future__ import annotations

import ctypes

H100 = (9, 0)
A100 = (8, 0)
A6000 = (8, 6)


class FakeNVML:
    """NVML's C functions as ctypes would call them: status codes, out-parameters."""

    def __init__(self, devices=(), init_status=0, failing=(), missing=()):
        self.devices = list(devices)  # [((major, minor), uuid)] in PCI bus order
        self.init_status = init_status
        self.failing = dict(failing)  # function name -> status it returns
        self.missing = set(missing)
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(f"undefined symbol: {name}")
        return object.__getattribute__(self, name)

    def _status(self, name):
        self.calls.append(name)
        return self.failing.get(name, 0)

    def nvmlInit_v2(self):
        self.calls.append("nvmlInit_v2")
        return self.init_status

    def nvmlShutdown(self):
        return self._status("nvmlShutdown")

    def nvmlDeviceGetCount_v2(self, count):
        count.contents.value = len(self.devices)
        return self._status("nvmlDeviceGetCount_v2")

    def nvmlDeviceGetHandleByIndex_v2(self, index, handle):
        assert isinstance(index, ctypes.c_uint)
        handle.contents.value = 0x1000 + index.value
        return self._status("nvmlDeviceGetHandleByIndex_v2")

    def nvmlDeviceGetCudaComputeCapability(self, handle, major, minor):
        (major.contents.value, minor.contents.value), _ = self.devices[handle.value - 0x1000]
        return self._status("nvmlDeviceGetCudaComputeCapability")

    def nvmlDeviceGetUUID(self, handle, buffer, length):
        _, uuid = self.devices[handle.value - 0x1000]
        assert len(uuid) < length.value
        buffer.value = uuid.encode()
        return self._status("nvmlDeviceGetUUID")


def devices(*capabilities):
    return [(capability, f"GPU-{index:x}{index:x}0c1e5f-{index}") for index, capability
            in enumerate(capabilities)]
