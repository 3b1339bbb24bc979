"""The host's NVML answer, kept in megaplug's cache directory and read back without NVML.

The host is a fake tree (``HOST_ROOT``: its boot id, driver version, GPU list and cgroup
files) and NVML a double (nvml_support.FakeNVML); every test counts how often NVML was
initialised, which is what a kept answer saves (~25 ms per process on an H200 node).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from megaplug.environment import _devices

from nvml_support import A100, H100, FakeNVML, devices

BOOT = "8c1f6f3e-3f0b-4a57-9d7e-1b2c3d4e5f60\n"
DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Sat Feb  8 2025\n"
GPUS = ("0000:18:00.0", "0000:2a:00.0")
CGROUP = "0::/kubepods.slice/pod-1234/container-abcd\n"


class Host:
    """A fake ``/proc`` and ``/sys`` tree, the NVML double in use, and the cache directory."""

    def __init__(self, root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.cache, self.monkeypatch = root, cache, monkeypatch
        self.nvml = FakeNVML(devices(H100, H100))
        self.write("proc/sys/kernel/random/boot_id", BOOT)
        self.write("proc/driver/nvidia/version", DRIVER)
        for gpu in GPUS:
            self.write(f"proc/driver/nvidia/gpus/{gpu}/information", "Model: NVIDIA H100\n")
        self.write("proc/self/cgroup", CGROUP)
        monkeypatch.setattr(_devices, "HOST_ROOT", str(root))
        monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(root / "proc/driver/nvidia"),))
        monkeypatch.setattr(_devices.sys, "platform", "linux")
        monkeypatch.setattr(_devices, "open_nvml", lambda: self.nvml)
        monkeypatch.setattr(_devices, "_torch_capability",
                            lambda: pytest.fail("torch was asked for the device capability"))
        monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(cache))
        monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
        monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def capability(self, environ: dict[str, str] | None = None):
        """What a fresh process asks (no per-process memo)."""
        _devices.forget_device_capability()
        return _devices.local_device_capability(environ or {})

    @property
    def nvml_inits(self) -> int:
        return self.nvml.calls.count("nvmlInit_v2")

    def kept(self) -> list[Path]:
        return sorted(self.cache.glob("device-capability-*.json"))


@pytest.fixture
def host(tmp_path, monkeypatch):
    _devices.forget_device_capability()
    yield Host(tmp_path / "host", tmp_path / "cache", monkeypatch)
    _devices.forget_device_capability()


# -- hit ---------------------------------------------------------------------------------


def test_the_second_process_reads_the_kept_answer_without_nvml(host, monkeypatch):
    assert host.capability() == H100
    assert host.nvml_inits == 1
    [kept] = host.kept()
    assert json.loads(kept.read_text())["value"]["devices"][0] == {
        "major": 9, "minor": 0, "uuid": "GPU-000c1e5f-0"}
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    assert host.capability() == H100
    assert host.capability() == H100


def test_the_kept_device_list_answers_for_any_visible_devices(host, monkeypatch):
    host.nvml = FakeNVML(devices(A100, H100))
    # CUDA's fastest-first order over mixed generations: NVML cannot settle it, torch is
    # asked and nothing is kept for that question -- but the device list is
    monkeypatch.setattr(_devices, "_torch_capability", lambda: H100)
    assert host.capability() == H100
    assert host.nvml_inits == 1 and len(host.kept()) == 1
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    pci = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert host.capability({**pci, "CUDA_VISIBLE_DEVICES": "0"}) == A100
    assert host.capability({**pci, "CUDA_VISIBLE_DEVICES": "1,0"}) == H100
    assert host.capability({"CUDA_VISIBLE_DEVICES": "GPU-110c1e5f-1"}) == H100
    assert host.capability({"CUDA_VISIBLE_DEVICES": "2"}) is None  # past the last device
    assert host.capability({"CUDA_VISIBLE_DEVICES": ""}) is None


# -- a miss on each part of the key ------------------------------------------------------


def _change_boot(host):
    host.write("proc/sys/kernel/random/boot_id", "0f2e4d6c-0000-4000-8000-000000000001\n")


def _change_driver(host):
    host.write("proc/driver/nvidia/version", DRIVER.replace("570.124.06", "575.51.03"))


def _driver_version_only_in_sys(host):
    (host.root / "proc/driver/nvidia/version").unlink()
    host.write("sys/module/nvidia/version", "570.124.06\n")


def _add_gpu(host):
    host.write("proc/driver/nvidia/gpus/0000:3b:00.0/information", "Model: NVIDIA A100\n")


def _remove_gpu(host):
    (host.root / f"proc/driver/nvidia/gpus/{GPUS[1]}/information").unlink()
    (host.root / f"proc/driver/nvidia/gpus/{GPUS[1]}").rmdir()


def _container_devices(host):
    host.monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "0")


def _other_user(host):
    uid = os.getuid()
    host.monkeypatch.setattr(_devices.os, "getuid", lambda: uid + 1)


def _other_cgroup(host):
    host.write("proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_77/step_0\n")


@pytest.mark.parametrize("change", [_change_boot, _change_driver, _driver_version_only_in_sys,
                                    _add_gpu, _remove_gpu, _container_devices, _other_user,
                                    _other_cgroup])
def test_a_change_to_any_part_of_the_key_asks_nvml_again(host, change):
    assert host.capability() == H100
    change(host)
    host.nvml = FakeNVML(devices(A100))  # what NVML says after the change
    assert host.capability() == A100
    assert host.nvml_inits == 1  # the new NVML double, asked once
    assert host.capability() == A100  # and that answer is kept in turn
    assert host.nvml_inits == 1
    assert len(host.kept()) == 2  # side by side: changing back finds the first again


# -- what is not kept, or not used -------------------------------------------------------


def _with_rows(*rows):
    return lambda good: {**good, "value": {**good["value"], "devices": list(rows)}}


@pytest.mark.parametrize("tamper", [
    lambda good: "not json",
    lambda good: "",
    lambda good: [],
    lambda good: {**good, "fingerprint": "0000beef"},
    lambda good: {**good, "value": None},
    lambda good: {**good, "value": {**good["value"], "key": "another host"}},
    lambda good: {**good, "value": {"devices": good["value"]["devices"]}},
    _with_rows({"major": "9", "minor": 0, "uuid": None}),
    _with_rows({"major": True, "minor": 0, "uuid": None}),
    _with_rows({"major": 0, "minor": 0, "uuid": None}),
    _with_rows({"major": 9, "minor": -1, "uuid": None}),
    _with_rows({"major": 1000, "minor": 0, "uuid": None}),
    _with_rows({"major": 9, "minor": 0}),
    _with_rows({"major": 9, "minor": 0, "uuid": 7}),
], ids=["garbage", "empty", "list", "other-fingerprint", "no-value", "foreign-key", "no-key",
        "string-major", "bool-major", "zero-major", "negative-minor", "huge-major",
        "no-uuid", "number-uuid"])
def test_a_corrupt_or_foreign_entry_is_ignored_and_replaced(host, tamper):
    assert host.capability() == H100
    [kept] = host.kept()
    tampered = tamper(json.loads(kept.read_text()))
    kept.write_text(tampered if isinstance(tampered, str) else json.dumps(tampered))
    host.nvml = FakeNVML(devices(A100))
    assert host.capability() == A100  # NVML's answer, not the file's
    assert host.nvml_inits == 1
    assert json.loads(kept.read_text())["value"]["devices"][0]["major"] == 8  # rewritten


def test_no_driver_answers_no_gpu_without_nvml_or_the_cache(host, monkeypatch):
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(host.root / "absent"),))
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    monkeypatch.setattr(_devices, "host_key", lambda: pytest.fail("the key was read"))
    assert host.capability() is None
    assert not host.cache.exists()


@pytest.mark.parametrize("missing", ["proc/sys/kernel/random/boot_id",
                                     "proc/driver/nvidia/version"])
def test_a_host_whose_key_cannot_be_read_asks_nvml_every_time(host, missing):
    (host.root / missing).unlink()
    assert host.capability() == H100
    assert host.capability() == H100
    assert host.nvml_inits == 2
    assert host.kept() == []


def test_no_gpu_list_means_no_key(host):
    for gpu in GPUS:
        (host.root / f"proc/driver/nvidia/gpus/{gpu}/information").unlink()
        (host.root / f"proc/driver/nvidia/gpus/{gpu}").rmdir()
    (host.root / "proc/driver/nvidia/gpus").rmdir()
    assert _devices.host_key() is None


@pytest.mark.parametrize("nvml", [FakeNVML(devices(H100), init_status=9),
                                  FakeNVML(devices(H100), init_status=18),
                                  FakeNVML(devices(H100), failing={"nvmlDeviceGetCount_v2": 3})],
                         ids=["driver-not-loaded", "init-error", "count-error"])
def test_no_device_list_is_not_kept(host, monkeypatch, nvml):
    host.nvml = nvml
    monkeypatch.setattr(_devices, "_torch_capability", lambda: (8, 9))
    expected = None if nvml.init_status == 9 else (8, 9)
    assert host.capability() == expected
    assert host.capability() == expected
    assert host.nvml_inits == 2
    assert host.kept() == []


def test_no_devices_is_kept_as_no_gpu(host, monkeypatch):
    host.nvml = FakeNVML([])
    assert host.capability() is None
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    assert host.capability() is None


def test_megaplug_no_cache_asks_nvml_every_time(host, monkeypatch):
    monkeypatch.setenv("MEGAPLUG_NO_CACHE", "1")
    assert host.capability() == H100
    assert host.capability() == H100
    assert host.nvml_inits == 2
    assert not host.cache.exists()


def test_an_unwritable_cache_still_answers(host):
    host.cache.parent.mkdir(parents=True, exist_ok=True)
    host.cache.write_text("a file where the directory should be")
    assert host.capability() == H100
    assert host.capability() == H100
    assert host.nvml_inits == 2


def test_the_answer_is_written_atomically_and_other_hosts_answers_are_kept(host, monkeypatch):
    host.cache.mkdir()
    others = [host.cache / f"device-capability-0badc0de-0000000{i}-{i:08x}.json"
              for i in range(10)]
    for other in others:
        other.write_text("{}")
    assert host.capability() == H100
    assert all(other.exists() for other in others)  # another node's, in a shared home
    assert [p.name for p in host.cache.iterdir() if p.name.endswith(".tmp")] == []
    # one node's answers are pruned to the last few (a reboot or driver update each)
    for boot in range(12):
        host.write("proc/sys/kernel/random/boot_id", f"boot-{boot}\n")
        assert host.capability() == H100
    assert len(host.kept()) - len(others) == 8
