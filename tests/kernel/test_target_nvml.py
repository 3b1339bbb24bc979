"""The local GPU's compute capability without torch: NVML through ctypes, torch last.

NVML is replaced by a Python double that speaks ctypes (pointers it writes through, a
string buffer for UUIDs) and, where a C compiler exists, by a compiled library loaded
through the real ``ctypes.CDLL``. The real driver path is checked on a GPU node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest

import megaplug
from megaplug.environment import _devices

from nvml_support import A100, A6000, H100, FakeNVML, devices


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch, tmp_path):
    """No memo, and no host whose NVML answer could be kept: these tests ask NVML each time
    (a fake NVML's answer must never land in a real host's cache; test_target_cache.py
    covers keeping it)."""
    monkeypatch.setattr(_devices, "HOST_ROOT", str(tmp_path / "no-host"))
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    _devices.forget_device_capability()
    yield
    _devices.forget_device_capability()


@pytest.fixture
def no_torch_please(monkeypatch):
    """Fail the test if torch is asked."""
    def refuse():
        pytest.fail("torch was asked for the device capability")
    monkeypatch.setattr(_devices, "_torch_capability", refuse)


@pytest.fixture
def driver(monkeypatch, tmp_path):
    """A machine whose NVIDIA driver is present, with the NVML double the test installs."""
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(tmp_path),))
    monkeypatch.setattr(_devices.sys, "platform", "linux")

    def install(nvml):
        monkeypatch.setattr(_devices, "open_nvml", lambda: nvml)
        return nvml
    return install


@pytest.fixture
def fake_torch(monkeypatch):
    def install(capability):
        cuda = types.SimpleNamespace(is_available=lambda: capability is not None,
                                     get_device_capability=lambda: capability)
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return install


# -- no driver, no visible device: answered from a few file checks ---------------------


def test_no_driver_is_no_gpu_without_loading_nvml_or_torch(monkeypatch, tmp_path,
                                                           no_torch_please):
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(tmp_path / "absent"),))
    monkeypatch.setattr(_devices.sys, "platform", "linux")
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    assert _devices.local_device_capability({}) is None


@pytest.mark.parametrize("visible", ["", " ", "-1", "NoDevFiles", "none", "²", ",0"])
def test_cuda_visible_devices_naming_no_device_is_no_gpu(driver, no_torch_please, visible):
    driver(FakeNVML(devices(H100)))
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": visible}) is None


def test_macos_has_no_cuda(monkeypatch, no_torch_please):
    monkeypatch.setattr(_devices.sys, "platform", "darwin")
    monkeypatch.setattr(_devices, "open_nvml", lambda: pytest.fail("NVML was loaded"))
    assert _devices.local_device_capability({}) is None


@pytest.mark.skipif(sys.platform != "linux" or any(os.path.exists(path) for path in
                                                   _devices.DRIVER_MARKERS),
                    reason="needs a Linux machine without an NVIDIA driver")
def test_target_environment_on_this_machine_imports_neither_ctypes_nor_torch():
    code = textwrap.dedent("""
        import sys
        from megaplug import TargetEnvironment
        print(TargetEnvironment().capability(), 'torch' in sys.modules, 'ctypes' in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["None", "False", "False"]


# -- NVML answers ----------------------------------------------------------------------


def test_every_gpu_of_one_generation_answers_without_torch(driver, no_torch_please):
    nvml = driver(FakeNVML(devices(*[H100] * 8)))
    assert _devices.local_device_capability({}) == H100
    assert nvml.calls[0] == "nvmlInit_v2" and nvml.calls[-1] == "nvmlShutdown"
    assert nvml.calls.count("nvmlDeviceGetCudaComputeCapability") == 8
    # each UUID too: the device list is what a host keeps, for any CUDA_VISIBLE_DEVICES
    assert nvml.calls.count("nvmlDeviceGetUUID") == 8


@pytest.mark.parametrize("visible", ["3", "7", "0,1", "MIG-4f1b2c3d-aaaa-bbbb"])
def test_any_visible_device_of_a_uniform_node_has_its_generation(driver, no_torch_please,
                                                                 visible):
    driver(FakeNVML(devices(*[A100] * 8)))
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": visible}) == A100


@pytest.mark.parametrize(("visible", "expected"), [(None, A100), ("0", A100), ("1", H100),
                                                   ("2,0", A6000), ("3", H100)])
def test_pci_bus_order_picks_the_device_by_nvml_index(driver, no_torch_please, visible,
                                                     expected):
    driver(FakeNVML(devices(A100, H100, A6000, H100)))
    environ = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if visible is not None:
        environ["CUDA_VISIBLE_DEVICES"] = visible
    assert _devices.local_device_capability(environ) == expected


def test_an_index_past_the_last_device_is_no_gpu(driver, no_torch_please):
    driver(FakeNVML(devices(H100, H100)))
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "2"}) is None


def test_a_gpu_uuid_or_its_unique_prefix_picks_that_device(driver, no_torch_please):
    nvml = driver(FakeNVML([(A100, "GPU-0a1b-first"), (H100, "GPU-0a2c-second")]))
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "GPU-0a2c-second"}) == H100
    assert "nvmlDeviceGetUUID" in nvml.calls
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "GPU-0a1b"}) == A100
    # ambiguous or unknown: CUDA sees no device
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "GPU-0a"}) is None
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "GPU-ffff"}) is None


def test_no_devices_is_no_gpu(driver, no_torch_please):
    driver(FakeNVML([]))
    assert _devices.local_device_capability({}) is None


def test_driver_not_loaded_is_no_gpu(driver, no_torch_please):
    nvml = driver(FakeNVML(devices(H100), init_status=9))
    assert _devices.local_device_capability({}) is None
    assert "nvmlShutdown" not in nvml.calls  # never initialised


# -- where NVML cannot settle it, torch is asked ---------------------------------------


def test_mixed_generations_in_cuda_default_order_ask_torch(driver, fake_torch):
    driver(FakeNVML(devices(A100, H100)))
    fake_torch(A6000)  # the answer is torch's, whatever NVML's first device is
    assert _devices.local_device_capability({}) == A6000
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "1"}) == A6000


ONE_H100 = [(H100, "GPU-1")]


@pytest.mark.parametrize("nvml", [
    FakeNVML(ONE_H100, init_status=18),  # driver/library version mismatch
    FakeNVML(ONE_H100, failing={"nvmlDeviceGetCount_v2": 999}),
    FakeNVML(ONE_H100, failing={"nvmlDeviceGetHandleByIndex_v2": 4}),  # no permission
    FakeNVML(ONE_H100, failing={"nvmlDeviceGetCudaComputeCapability": 3}),
    FakeNVML(ONE_H100, failing={"nvmlDeviceGetUUID": 999}),
    FakeNVML(ONE_H100, missing={"nvmlDeviceGetCudaComputeCapability"}),  # old driver
    FakeNVML(ONE_H100, missing={"nvmlInit_v2"}),
], ids=["init-error", "count-error", "handle-error", "capability-error", "uuid-error",
        "old-driver", "no-init-v2"])
def test_an_nvml_failure_falls_back_to_torch(driver, fake_torch, nvml):
    driver(nvml)
    fake_torch((8, 9))
    assert _devices.local_device_capability({"CUDA_VISIBLE_DEVICES": "GPU-1"}) == (8, 9)
    if nvml.init_status == 0 and "nvmlInit_v2" not in nvml.missing:
        assert nvml.calls[-1] == "nvmlShutdown"  # initialised, so shut down
    else:
        assert "nvmlShutdown" not in nvml.calls


def test_a_missing_library_falls_back_to_torch(driver, fake_torch, monkeypatch):
    driver(None)
    fake_torch((10, 0))
    assert _devices.local_device_capability({}) == (10, 0)
    _devices.forget_device_capability()
    fake_torch(None)  # torch without CUDA
    assert _devices.local_device_capability({}) is None
    _devices.forget_device_capability()
    monkeypatch.setitem(sys.modules, "torch", None)  # torch not installed
    assert _devices.local_device_capability({}) is None


def test_a_missing_library_on_windows_is_no_driver(monkeypatch, no_torch_please):
    monkeypatch.setattr(_devices.sys, "platform", "win32")
    monkeypatch.setattr(_devices, "open_nvml", lambda: None)
    assert _devices.local_device_capability({}) is None


# -- memo and the TargetEnvironment ----------------------------------------------------


def test_the_answer_is_memoised_per_visible_devices(driver, no_torch_please):
    nvml = driver(FakeNVML(devices(A100, H100)))
    environ = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert _devices.local_device_capability(environ) == A100
    assert _devices.local_device_capability(dict(environ)) == A100
    assert nvml.calls.count("nvmlInit_v2") == 1
    assert _devices.local_device_capability({**environ, "CUDA_VISIBLE_DEVICES": "1"}) == H100
    assert nvml.calls.count("nvmlInit_v2") == 2


def test_target_environment_reads_the_jobs_environment(driver, no_torch_please):
    driver(FakeNVML(devices(A100, H100)))
    job = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    assert megaplug.TargetEnvironment(environ=job).capability() == H100
    assert megaplug.TargetEnvironment(environ={"CUDA_VISIBLE_DEVICES": ""}).capability() is None
    stated = megaplug.TargetEnvironment(device_capability=(8, 0), environ=job)
    assert stated.capability() == (8, 0)


# -- the real ctypes path, against a compiled stand-in for libnvidia-ml -----------------

FAKE_LIBRARY = r"""
#include <stdlib.h>
#include <string.h>
/* Devices from FAKE_NVML_DEVICES: "9.0,8.0" (major.minor per GPU, in PCI bus order). */
static int caps[64][2]; static unsigned count;
int nvmlInit_v2(void) {
    const char *spec = getenv("FAKE_NVML_DEVICES"); count = 0;
    while (spec && *spec && count < 64) {
        char *end; caps[count][0] = (int)strtol(spec, &end, 10);
        caps[count][1] = (int)strtol(end + 1, &end, 10); count++;
        spec = *end ? end + 1 : end;
    }
    return 0;
}
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = count; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) {
    if (i >= count) return 2; *h = (void *)(caps + i); return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
    *major = ((int *)h)[0]; *minor = ((int *)h)[1]; return 0;
}
int nvmlDeviceGetUUID(void *h, char *uuid, unsigned length) {
    unsigned i = (unsigned)(((int (*)[2])h) - caps);
    const char *names[] = {"GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2", "GPU-dddd-3"};
    if (i >= 4 || length < 11) return 7; strcpy(uuid, names[i]); return 0;
}
"""


@pytest.fixture(scope="module")
def compiled_nvml(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or sys.platform != "linux":
        pytest.skip("needs a C compiler on Linux")
    directory = tmp_path_factory.mktemp("nvml")
    source = directory / "fake_nvml.c"
    source.write_text(FAKE_LIBRARY)
    library = directory / "libnvidia-ml.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return str(library)


@pytest.mark.parametrize(("spec", "environ", "expected"), [
    ("9.0,9.0,9.0,9.0", {}, (9, 0)),
    ("8.0,9.0,8.6", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2"}, (8, 6)),
    ("8.0,10.3", {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, (10, 3)),
    ("9.0", {"CUDA_VISIBLE_DEVICES": "1"}, None),
    ("", {}, None),
])
def test_a_compiled_library_through_ctypes(compiled_nvml, monkeypatch, tmp_path,
                                           no_torch_please, spec, environ, expected):
    monkeypatch.setattr(_devices, "DRIVER_MARKERS", (str(tmp_path),))
    monkeypatch.setattr(_devices, "NVML_LIBRARIES", ("libnvidia-ml-absent.so", compiled_nvml))
    monkeypatch.setenv("FAKE_NVML_DEVICES", spec)
    assert _devices.local_device_capability(environ) == expected
