"""The target GPU's memory: --assume-device-memory, and NVML's total through ctypes."""

from __future__ import annotations

import pytest

from megaplug.environment import TargetEnvironment, _devices, parse_assumed_memory

from nvml_support import H100, FakeNVML, devices

GIB = 1 << 30


class MemoryNVML(FakeNVML):
    """The capability double, with each device's total memory."""

    def __init__(self, totals, **kwargs):
        super().__init__(devices(*[H100] * len(totals)), **kwargs)
        self.totals = list(totals)

    def nvmlDeviceGetMemoryInfo(self, handle, memory):
        memory.contents.total = self.totals[handle.value - 0x1000]
        memory.contents.free = memory.contents.total // 2
        return self._status("nvmlDeviceGetMemoryInfo")


@pytest.fixture
def driver(monkeypatch, tmp_path):
    """A machine whose NVIDIA driver is loaded and whose NVML is ``driver.nvml``."""
    marker = tmp_path / "nvidia"
    marker.mkdir()
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(marker),))

    class Driver:
        nvml: object = None

    monkeypatch.setattr(_devices, "open_nvml", lambda: Driver.nvml)
    return Driver


@pytest.mark.parametrize(("text", "size"), [
    ("80GB", 80 * 10**9), ("139.8GiB", int(139.8 * GIB)), ("1024", 1024), ("512MiB", 512 << 20),
    ("2TB", 2 * 10**12), (" none ", None), ("79.18GiB", 7918 * GIB // 100),
    ("0.5KiB", 512)])
def test_sizes_are_read_in_decimal_and_binary_units(text, size):
    assert parse_assumed_memory(text) == size


@pytest.mark.parametrize("text", ["", "GB", "80XB", "-1GB", "1.2.3GB", "0GB", "eighty"])
def test_anything_else_is_refused_with_the_forms_it_takes(text):
    with pytest.raises(ValueError, match="--assume-device-memory"):
        parse_assumed_memory(text)


@pytest.mark.parametrize("text", ["1" * 400, "2048TiB", "9" * 30 + ".5TB"])
def test_more_than_any_gpu_is_refused_not_overflowed(text):
    """Read exactly (no float, which overflowed on 400 digits), and refused past 1 PiB."""
    with pytest.raises(ValueError, match="is more memory than any GPU has"):
        parse_assumed_memory(text)


def test_nvml_gives_the_smallest_device_and_shuts_down(driver):
    driver.nvml = MemoryNVML([141 * GIB, 80 * GIB])
    assert _devices.local_device_memory({}) == 80 * GIB
    assert driver.nvml.calls[-1] == "nvmlShutdown"


def test_no_driver_no_library_or_a_failing_call_is_unknown(driver, monkeypatch):
    assert _devices.local_device_memory({}) is None  # no library
    driver.nvml = MemoryNVML([80 * GIB], init_status=9)
    assert _devices.local_device_memory({}) is None  # driver not loaded
    driver.nvml = MemoryNVML([80 * GIB], failing={"nvmlDeviceGetMemoryInfo": 999})
    assert _devices.local_device_memory({}) is None
    driver.nvml = MemoryNVML([80 * GIB])
    assert _devices.local_device_memory({"CUDA_VISIBLE_DEVICES": ""}) is None  # none visible
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", ("/nonexistent/nvidia",))
    assert _devices.local_device_memory({}) is None


def test_the_target_reads_it_once_unless_stated(driver):
    driver.nvml = MemoryNVML([80 * GIB])
    target = TargetEnvironment(environ={})
    assert target.memory() == 80 * GIB
    driver.nvml = MemoryNVML([40 * GIB])
    assert target.memory() == 80 * GIB  # read once
    stated = TargetEnvironment(environ={})
    stated.device_memory = None
    assert stated.memory() is None  # stated unknown: NVML is not asked
    assert stated.with_environ({"A": "1"}).memory() is None


def test_a_hosts_answer_is_kept_and_read_back_without_nvml(tmp_path, monkeypatch):
    """On a GPU node the answer is kept per host (the capability's key: boot, driver, GPUs,
    cgroup), so a resolve there does not start NVML every time."""
    root = tmp_path / "host"
    for relative, text in (("proc/sys/kernel/random/boot_id", "8c1f6f3e\n"),
                           ("proc/driver/nvidia/version", "NVRM version: 570.124.06\n"),
                           ("proc/driver/nvidia/gpus/0000:18:00.0/information", "H100\n"),
                           ("proc/self/cgroup", "0::/pod\n")):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    monkeypatch.setattr(_devices, "HOST_ROOT", str(root))
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(root / "proc/driver/nvidia"),))
    monkeypatch.setattr(_devices.sys, "platform", "linux")
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    nvml = MemoryNVML([80 * GIB])
    monkeypatch.setattr(_devices, "open_nvml", lambda: nvml)
    assert _devices.local_device_memory({}) == 80 * GIB
    assert nvml.calls.count("nvmlInit_v2") == 1
    assert len(list((tmp_path / "cache").glob("device-memory-*.json"))) == 1
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was started"))
    assert _devices.local_device_memory({}) == 80 * GIB
    # another driver is another host state: asked again
    (root / "proc/driver/nvidia/version").write_text("NVRM version: 575.51.03\n")
    monkeypatch.setattr(_devices, "open_nvml", lambda: MemoryNVML([141 * GIB]))
    assert _devices.local_device_memory({}) == 141 * GIB


def test_a_failed_answer_is_not_kept(tmp_path, monkeypatch):
    root = tmp_path / "host"
    for relative, text in (("proc/sys/kernel/random/boot_id", "8c1f6f3e\n"),
                           ("proc/driver/nvidia/version", "NVRM version: 570.124.06\n"),
                           ("proc/driver/nvidia/gpus/0000:18:00.0/information", "H100\n")):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    monkeypatch.setattr(_devices, "HOST_ROOT", str(root))
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(root / "proc/driver/nvidia"),))
    monkeypatch.setattr(_devices.sys, "platform", "linux")
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    monkeypatch.setattr(_devices, "open_nvml", lambda: MemoryNVML([80 * GIB], init_status=9))
    assert _devices.local_device_memory({}) is None
    assert list((tmp_path / "cache").glob("device-memory-*.json")) == []
