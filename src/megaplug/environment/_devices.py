"""The local GPU's compute capability, without torch.

Asking torch means importing it and initialising CUDA, in every rank of every launch, for
one pair of integers. The driver's management library (NVML, what nvidia-smi uses)
answers without either, and a machine without an NVIDIA driver is recognised by a few
missing files. torch is asked only where NVML cannot give a certain answer. A host's NVML
answer is kept across processes, since starting NVML is itself a noticeable part of a
resolve (what each costs: docs/performance.md).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping


#: Present wherever an NVIDIA driver is loaded: the kernel module's proc directory (bare
#: metal and containers), its control device, and WSL 2's GPU device.
DRIVER_MARKERS: tuple[str, ...] = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg")

#: NVML's shared library, as the driver installs it (Linux, WSL 2 and Windows).
NVML_LIBRARIES: tuple[str, ...] = (
    ("nvml.dll", os.path.join(os.environ.get("ProgramFiles", r"C:\Program Files"),
                              "NVIDIA Corporation", "NVSMI", "nvml.dll"))
    if sys.platform == "win32" else
    ("libnvidia-ml.so.1", "libnvidia-ml.so", "/usr/lib/wsl/lib/libnvidia-ml.so.1"))

_NVML_SUCCESS = 0
_NVML_ERROR_DRIVER_NOT_LOADED = 9
_NVML_UUID_LENGTH = 96

#: NVML could not settle the question (no library, an error, an ambiguous device order).
_UNSETTLED = object()
_MEMO: dict[tuple[str | None, str | None], tuple[int, int] | None] = {}


def local_device_capability(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """The compute capability of the first GPU a CUDA program started with ``environ``
    would use (what ``torch.cuda.get_device_capability()`` answers), or ``None`` when it
    would see no GPU.

    Honours ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` as CUDA does. Read from
    NVML through ctypes; torch is imported only when the driver is present but NVML
    cannot answer for certain (library missing, an NVML error, or GPUs of different
    generations in CUDA's default fastest-first order). Memoised per process.
    """
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    order = environ.get("CUDA_DEVICE_ORDER")
    key = (visible, order)
    if key not in _MEMO:
        _MEMO[key] = _device_capability(visible, order)
    return _MEMO[key]


def forget_device_capability() -> None:
    """Drop the per-process memo (tests that fake a driver)."""
    _MEMO.clear()


def _device_capability(visible: str | None, order: str | None) -> tuple[int, int] | None:
    first = None if visible is None else visible.split(",")[0].strip()
    if first is not None and not _is_device_entry(first):
        return None  # CUDA stops at the first invalid entry: no device is visible
    if sys.platform == "darwin":
        return None  # no CUDA on macOS
    if sys.platform != "win32" and not any(os.path.exists(path) for path in DRIVER_MARKERS):
        return None  # no NVIDIA driver on this machine
    answer = _nvml_capability(first or "0", pci_bus_order=(order or "").strip() == "PCI_BUS_ID")
    if answer is _UNSETTLED:
        return _torch_capability()
    return answer  # type: ignore[return-value]


def _is_device_entry(entry: str) -> bool:
    """Whether ``entry`` can name a device in ``CUDA_VISIBLE_DEVICES``: an index or a UUID."""
    return _is_index(entry) or entry.startswith(("GPU-", "MIG-"))


def _is_index(entry: str) -> bool:
    return entry.isascii() and entry.isdigit()


def open_nvml() -> Any:
    """NVML's library through ctypes, or ``None`` where it cannot be loaded."""
    import ctypes

    for name in NVML_LIBRARIES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _nvml_capability(first: str, pci_bus_order: bool) -> Any:
    """``(major, minor)`` of the device ``first`` names, ``None`` if it names none, or
    ``_UNSETTLED``."""
    devices = host_devices()
    if devices is None or devices is _UNSETTLED:
        return devices
    return _choose(devices, first, pci_bus_order)


def host_devices() -> Any:
    """Every GPU NVML sees from this process, in PCI bus order, as ``((major, minor),
    uuid)`` (``uuid`` ``None`` where NVML would not tell it); ``None`` when the driver is
    not loaded, ``_UNSETTLED`` when NVML cannot answer.

    NVML's answer does not depend on ``CUDA_VISIBLE_DEVICES`` (CUDA applies that on top,
    as :func:`_choose` does), only on the host and on what this process may open; so it is
    kept in megaplug's cache directory under :func:`host_key` and read back without
    loading NVML, whose initialisation every rank of every launch paid before
    (docs/performance.md has the figure).
    """
    key = host_key()
    if key is None:
        return _nvml_devices_now()
    from ..cache import _store

    def compute() -> dict[str, Any]:
        found = _nvml_devices_now()
        if not isinstance(found, list):
            raise _NotKept(found)
        return {"key": key, "devices": [{"major": major, "minor": minor, "uuid": uuid}
                                        for (major, minor), uuid in found]}

    # a file per key, the last few kept per host: nodes sharing a home directory, and the
    # cgroups of one node, do not overwrite one another's answer
    host = _store.digest([os.uname().nodename])
    try:
        kept = _store.cached(f"device-capability-{host}", _store.digest([key]), compute,
                             shape={"key": str, "devices": _DEVICES_SHAPE}, per_key=True,
                             accept=lambda stored: _usable(stored, key))
    except _NotKept as unsettled:
        return unsettled.args[0]
    return [((row["major"], row["minor"]), row["uuid"]) for row in kept["devices"]]


class _NotKept(Exception):
    """NVML gave no device list (driver not loaded, an error): nothing to keep."""


#: The shape of a kept device list (a tampered or foreign file is not used).
_DEVICES_SHAPE = [{"major": int, "minor": int, "uuid": (str, None)}]


def _usable(stored: dict[str, Any], key: str) -> bool:
    """A kept answer is used only for its exact key (not merely its digest's) and only if
    it holds capabilities that can be."""
    return stored["key"] == key and all(
        0 < row["major"] < 1000 and 0 <= row["minor"] < 1000 for row in stored["devices"])


#: Where :func:`host_key` reads the host's state (tests point it at a fake tree).
HOST_ROOT = "/"


def host_key() -> str | None:
    """What decides NVML's device list for this process, read from a few small files:
    the boot (``/proc/sys/kernel/random/boot_id``: a reboot, a swapped GPU), the driver's
    version, the GPUs the driver lists (``/proc/driver/nvidia/gpus``: a container or
    cgroup shows only its own), the container's ``NVIDIA_VISIBLE_DEVICES``, the user and
    the process's cgroups (which GPUs it may open). ``None`` where any of the first three
    cannot be read (WSL, Windows, an unusual driver): NVML is then asked every time."""
    proc = os.path.join(HOST_ROOT, "proc")
    boot = _small_file(os.path.join(proc, "sys", "kernel", "random", "boot_id"))
    driver = (_small_file(os.path.join(proc, "driver", "nvidia", "version"))
              or _small_file(os.path.join(HOST_ROOT, "sys", "module", "nvidia", "version")))
    try:
        gpus = sorted(os.listdir(os.path.join(proc, "driver", "nvidia", "gpus")))
    except OSError:
        return None
    if not boot or not driver:
        return None
    getuid = getattr(os, "getuid", None)
    return "\n".join([
        "nvml devices 1", boot.strip(), driver.strip(), " ".join(gpus),
        f"NVIDIA_VISIBLE_DEVICES={os.environ.get('NVIDIA_VISIBLE_DEVICES')}",
        f"uid={getuid() if getuid else None}",
        (_small_file(os.path.join(proc, "self", "cgroup")) or "").strip()])


def _small_file(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(4096)
    except OSError:
        return None


def _nvml_devices_now() -> Any:
    """:func:`host_devices` from NVML itself."""
    nvml = open_nvml()
    if nvml is None:
        return None if sys.platform == "win32" else _UNSETTLED  # Windows: no driver
    try:
        status = nvml.nvmlInit_v2()
    except AttributeError:
        return _UNSETTLED
    if status == _NVML_ERROR_DRIVER_NOT_LOADED:
        return None
    if status != _NVML_SUCCESS:
        return _UNSETTLED
    try:
        devices = _nvml_devices(nvml)
    except AttributeError:  # a driver too old for one of the calls
        return _UNSETTLED
    finally:
        nvml.nvmlShutdown()
    return _UNSETTLED if devices is None else devices


def _nvml_devices(nvml: Any) -> list[tuple[tuple[int, int], str | None]] | None:
    """Every GPU NVML sees, in PCI bus order, as ``((major, minor), uuid)``; ``None`` when a
    call fails (a failing UUID only leaves it ``None``: it matters only to a
    ``CUDA_VISIBLE_DEVICES`` naming a UUID)."""
    import ctypes

    count = ctypes.c_uint(0)
    # pointer() rather than byref(): the same to NVML, and a test double can write through it
    if nvml.nvmlDeviceGetCount_v2(ctypes.pointer(count)) != _NVML_SUCCESS:
        return None
    devices: list[tuple[tuple[int, int], str | None]] = []
    for index in range(count.value):
        handle = ctypes.c_void_p()
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if (nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.pointer(handle))
                != _NVML_SUCCESS
                or nvml.nvmlDeviceGetCudaComputeCapability(
                    handle, ctypes.pointer(major), ctypes.pointer(minor)) != _NVML_SUCCESS):
            return None
        devices.append(((major.value, minor.value), _nvml_uuid(nvml, handle)))
    return devices


def _nvml_uuid(nvml: Any, handle: Any) -> str | None:
    import ctypes

    buffer = ctypes.create_string_buffer(_NVML_UUID_LENGTH)
    try:
        status = nvml.nvmlDeviceGetUUID(handle, buffer, ctypes.c_uint(_NVML_UUID_LENGTH))
    except AttributeError:
        return None
    return buffer.value.decode("ascii", "replace") if status == _NVML_SUCCESS else None


def _choose(devices: list[tuple[tuple[int, int], str | None]], first: str,
            pci_bus_order: bool) -> Any:
    """The capability of the device CUDA would number 0, given the first visible entry."""
    if not devices:
        return None
    capabilities = {capability for capability, _ in devices}
    if _is_index(first):
        index = int(first)
        if index >= len(devices):
            return None  # an index past the last device: CUDA sees none
        if pci_bus_order:
            return devices[index][0]
    elif first.startswith("GPU-"):
        # CUDA accepts any unambiguous prefix of a UUID
        if any(uuid is None for _, uuid in devices):
            return _UNSETTLED  # NVML would not tell every UUID
        matches = [capability for capability, uuid in devices
                   if uuid is not None and uuid.startswith(first)]
        return matches[0] if len(matches) == 1 else None
    # CUDA's default order puts the fastest GPU first, which NVML does not tell; a MIG
    # instance's parent is not worth the extra calls. Either is certain only when every GPU
    # is of one generation, as on any training node.
    return capabilities.pop() if len(capabilities) == 1 else _UNSETTLED


def local_device_memory(environ: Mapping[str, str]) -> int | None:
    """Bytes of memory of the GPUs a CUDA program started with ``environ`` would use (the
    smallest, where NVML sees several sizes), or ``None`` when it would see none or NVML
    cannot tell. NVML only: a memory estimate without a verdict is better than importing
    torch to get one."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    first = None if visible is None else visible.split(",")[0].strip()
    if first is not None and not _is_device_entry(first):
        return None
    if sys.platform == "darwin" or (sys.platform != "win32" and not any(
            os.path.exists(path) for path in DRIVER_MARKERS)):
        return None
    key = host_key()
    if key is None:
        return _nvml_memory_now()
    from ..cache import _store

    def compute() -> dict[str, Any]:
        found = _nvml_memory_now()
        if found is None:
            raise _NotKept(None)
        return {"key": key, "bytes": found}

    # kept per host beside the capability's answer: NVML's start, dearer than the rest of
    # the lookup, is not paid by every resolve on a GPU node
    host = _store.digest([os.uname().nodename])
    try:
        kept = _store.cached(f"device-memory-{host}", _store.digest([key]), compute,
                             shape={"key": str, "bytes": int}, per_key=True,
                             accept=lambda stored: stored["key"] == key and stored["bytes"] > 0)
    except _NotKept:
        return None
    return int(kept["bytes"])


def _nvml_memory_now() -> int | None:
    """:func:`local_device_memory` from NVML itself."""
    nvml = open_nvml()
    if nvml is None or nvml.nvmlInit_v2() != _NVML_SUCCESS:
        return None
    try:
        return _nvml_smallest_memory(nvml)
    finally:
        nvml.nvmlShutdown()


def _nvml_smallest_memory(nvml: Any) -> int | None:
    import ctypes

    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    count = ctypes.c_uint(0)
    if nvml.nvmlDeviceGetCount_v2(ctypes.pointer(count)) != _NVML_SUCCESS or not count.value:
        return None
    sizes = []
    for index in range(count.value):
        handle, memory = ctypes.c_void_p(), Memory()
        if (nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.pointer(handle))
                != _NVML_SUCCESS
                or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.pointer(memory)) != _NVML_SUCCESS):
            return None
        sizes.append(int(memory.total))
    return min(sizes)


def _torch_capability() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return (int(major), int(minor))
