"""The target environment: installed package versions and the GPU a job will run on.

Checks that depend on Transformer Engine's version or the GPU's compute capability ask
this service instead of importing packages or touching CUDA themselves. By default it
looks at the real machine, lazily (nothing is imported until a check asks); a caller
can state the target instead (``megaplug resolve --assume transformer_engine=2.17.1
--assume-device-capability 9.0``), so a login node or CI can validate a launch for the
cluster it targets.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Mapping

from ._record import MutableRecord

_NOT_ASKED = object()

#: Import names whose distribution is spelled differently on PyPI.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "transformer_engine": ("transformer_engine", "transformer-engine", "transformer_engine_torch"),
    "nvidia_resiliency_ext": ("nvidia-resiliency-ext", "nvidia_resiliency_ext"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "multistorageclient": ("multi-storage-client", "multistorageclient"),
    "mamba_ssm": ("mamba-ssm", "mamba_ssm"),
    "yaml": ("PyYAML",),
}


def parse_version(text: str) -> tuple[int, ...]:
    """A comparable tuple of the leading numeric release parts (``'2.17.1+cu12'`` -> ``(2, 17, 1)``)."""  # noqa: E501
    parts = []
    for piece in re.split(r"[.+-]", text):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
    return tuple(parts)


#: A version as ``--assume`` takes it: PEP 440's public form and an optional local part
#: (``2.17.1``, ``2.7.0.dev0``, ``1.0rc1``, ``2.17.1+cu12``), without epoch or ``v``.
_VERSION = re.compile(
    r"^\d+(?:\.\d+)*"
    r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?\d*)?(?:[-_.]?dev[-_.]?\d*)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$", re.IGNORECASE | re.ASCII)
#: A package's import name, or its distribution name (``-`` is read as ``_``).
_PACKAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
#: Packages megaplug's checks ask about: a stated name close to one of these is a typo.
KNOWN_PACKAGES = ("transformer_engine", "torch", "apex", "flash_attn", "flash_attn_3",
                  "flashinfer", "multistorageclient", "mamba_ssm", "nvidia_resiliency_ext",
                  "megatron", "yaml", "triton", "numpy", "tensorstore", "zarr")
#: A compute capability as ``--assume-device-capability`` takes it (``9.0``, ``10``).
_CAPABILITY = re.compile(r"^(\d{1,3})(?:\.(\d{1,3}))?$", re.ASCII)


def parse_assumed_package(item: str, known: tuple[str, ...] = KNOWN_PACKAGES,
                          ) -> tuple[str, str | None]:
    """``NAME=VERSION`` (``NAME=none``: not installed) as (import name, version or None).

    Raises ``ValueError`` saying what is wrong: no ``=``, a name that is no package name
    (or a near miss of a known one, ``transformer_enigne``), or a version that is not
    one (``2.x``, ``banana``, ``-1``).
    """
    name, sep, version = item.partition("=")
    name, version = name.strip(), version.strip()
    if not sep or not name:
        raise ValueError(f"--assume expects NAME=VERSION (or NAME=none), got {item!r}")
    if not _PACKAGE_NAME.match(name):
        raise ValueError(f"--assume {item!r}: {name!r} is not a package name")
    name = name.replace("-", "_")
    if name not in known and name.lower() in known:
        name = name.lower()  # distribution names are case-insensitive
    if name not in known:
        import difflib  # only an unknown name pays for it

        near = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if near:
            raise ValueError(f"--assume {item!r}: no check asks about a package {name!r}; "
                             f"did you mean {near[0]}?")
    if version.lower() == "none":
        return name, None
    if not _VERSION.match(version):
        raise ValueError(f"--assume {item!r}: {version!r} is not a version (give one such as "
                         "2.17.1, 2.7.0.dev0 or 1.0rc1, or none for not installed)")
    return name, version


def parse_assumed_capability(text: str) -> tuple[int, int] | None:
    """``MAJOR.MINOR`` (``9.0``; ``10`` is ``10.0``) or ``none`` (no GPU) as
    ``--assume-device-capability`` takes it; ``ValueError`` for anything else."""
    if text.strip().lower() == "none":
        return None
    match = _CAPABILITY.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"--assume-device-capability expects MAJOR.MINOR (such as 8.0, 9.0 "
                         f"or 10.0) or none, got {text!r}")
    return int(match.group(1)), int(match.group(2) or 0)


class TargetEnvironment(MutableRecord):
    """Package versions, device capability and environment variables a check may consult.

    ``packages`` maps import names to a version string, or ``None`` for "not installed";
    names not in it are looked up on this machine when first asked. ``device_capability``
    is the GPU's ``(major, minor)``; when not stated it is read from the NVIDIA driver on
    first use (see :func:`local_device_capability`), and is ``None`` on a machine without
    a GPU. ``environ`` is the process environment
    the job will see (defaults to ``os.environ``).
    """

    __slots__ = ("packages", "device_capability", "environ", "_looked_up")
    _hidden = ("_looked_up",)

    def __init__(
        self,
        packages: dict[str, str | None] | None = None,
        device_capability: tuple[int, int] | None | object = _NOT_ASKED,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.packages: dict[str, str | None] = {} if packages is None else packages
        self.device_capability = device_capability
        self.environ = environ
        self._looked_up: dict[str, str | None] = {}

    def with_environ(self, environ: Mapping[str, str]) -> TargetEnvironment:
        """The same target for a process that sees ``environ`` (a fresh lookup cache)."""
        return TargetEnvironment(self.packages, self.device_capability, environ)

    def getenv(self, name: str, default: str | None = None) -> str | None:
        env = os.environ if self.environ is None else self.environ
        return env.get(name, default)

    def package_version(self, import_name: str) -> str | None:
        """The installed version of a package by import name, or ``None`` if absent."""
        if import_name in self.packages:
            return self.packages[import_name]
        if import_name not in self._looked_up:
            self._looked_up[import_name] = _installed_version(import_name)
        return self._looked_up[import_name]

    def version_at_least(self, import_name: str, minimum: str) -> bool:
        found = self.package_version(import_name)
        return found is not None and parse_version(found) >= parse_version(minimum)

    def requirement_problem(self, import_name: str, minimum: str | None = None) -> str | None:
        """``None`` when satisfied, else ``'requires X >= v, found w'`` / ``'... not installed'``."""  # noqa: E501
        found = self.package_version(import_name)
        wanted = f"{import_name} >= {minimum}" if minimum else import_name
        if found is None:
            return f"requires {wanted}, not installed"
        if minimum and parse_version(found) < parse_version(minimum):
            return f"requires {wanted}, found {found}"
        return None

    def capability(self) -> tuple[int, int] | None:
        """The target GPU's compute capability, or ``None`` when there is no GPU."""
        if self.device_capability is _NOT_ASKED:
            self.device_capability = local_device_capability(
                os.environ if self.environ is None else self.environ)
        return self.device_capability  # type: ignore[return-value]


def _installed_version(import_name: str) -> str | None:
    from importlib import util

    # find_spec first: it is cheap, and a missing package then never pays for
    # importing importlib.metadata (tens of milliseconds) on the start-up path.
    try:
        spec = util.find_spec(import_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    candidates = _DISTRIBUTIONS.get(import_name, (import_name, import_name.replace("_", "-")))
    version = _version_beside(spec, candidates)
    if version is not None:
        return version
    from importlib import metadata

    for dist in candidates:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "0"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _version_beside(spec: object, distributions: tuple[str, ...]) -> str | None:
    """The version in a ``NAME-VERSION.dist-info`` directory next to the package, if any.

    That is where pip puts it; reading the directory name avoids importlib.metadata.
    """
    origin = getattr(spec, "origin", None)
    if not origin or origin in ("built-in", "frozen"):
        return None
    package_dir = os.path.dirname(origin)
    site = os.path.dirname(package_dir) if origin.endswith("__init__.py") else package_dir
    wanted = {_normalized(name) for name in distributions}
    try:
        entries = os.listdir(site)
    except OSError:
        return None
    for entry in entries:
        if entry.endswith(".dist-info"):
            name, _, version = entry[: -len(".dist-info")].partition("-")
            if version and _normalized(name) in wanted:
                return version
    return None


# -- the local GPU's compute capability, without torch ------------------------------------
#
# Asking torch costs 1.5-8 s per process (importing it, then initialising CUDA), paid by
# every rank of every launch for one pair of integers. The driver's management library
# (NVML, what nvidia-smi uses) answers in milliseconds, and a machine without an NVIDIA
# driver is recognised by a few missing files, in microseconds. torch is asked only where
# NVML cannot give a certain answer.

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
    loading NVML, whose initialisation (~25 ms) every rank of every launch paid before.
    """
    key = host_key()
    if key is None:
        return _nvml_devices_now()
    from . import _discovery

    def compute() -> dict[str, Any]:
        found = _nvml_devices_now()
        if not isinstance(found, list):
            raise _NotKept(found)
        return {"key": key, "devices": [{"major": major, "minor": minor, "uuid": uuid}
                                        for (major, minor), uuid in found]}

    # a file per key, the last few kept per host: nodes sharing a home directory, and the
    # cgroups of one node, do not overwrite one another's answer
    host = _discovery.digest([os.uname().nodename])
    try:
        kept = _discovery.cached(f"device-capability-{host}", _discovery.digest([key]), compute,
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


def _torch_capability() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return (int(major), int(minor))
