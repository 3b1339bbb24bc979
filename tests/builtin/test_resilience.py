"""The resilience plugin: MSC, in-process restart and fault tolerance."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import messages, problems, resolve, warnings_of  # noqa: E402


def test_active_world_size_defaults_to_world_size():
    assert resolve([], environ={"WORLD_SIZE": "8"}).inprocess_active_world_size == 8
    assert resolve([]).inprocess_active_world_size == 1
    given = resolve(["--inprocess-active-world-size", "6"], environ={"WORLD_SIZE": "8"})
    assert given.inprocess_active_world_size == 6


def test_msc_is_off_by_default():
    resolved = resolve([])
    assert resolved.enable_msc is False and resolved.disable_msc_deprecated is False


def test_enable_msc_needs_the_multistorageclient_package():
    found = problems(["--enable-msc"])
    assert [p.message for p in found] == ["--enable-msc requires multistorageclient, not installed"]
    assert found[0].plugin == "resilience" and "pip install multi-storage-client" in found[0].hint
    resolved = resolve(["--enable-msc"], packages={"multistorageclient": "0.20.0"})
    assert resolved.enable_msc is True
    assert any("multi-storage client (MSC) is enabled" in w for w in warnings_of(resolved))


def test_deprecated_disable_msc_wins_over_enable_msc():
    resolved = resolve(["--enable-msc", "--disable-msc"])
    assert resolved.enable_msc is False and resolved.disable_msc_deprecated is True
    notes = warnings_of(resolved)
    assert any("--disable-msc is deprecated" in w for w in notes)
    assert any("--disable-msc overrides --enable-msc" in w for w in notes)


def test_inprocess_restart_without_resiliency_ext_is_a_warning():
    resolved = resolve(["--inprocess-restart"])
    assert resolved.inprocess_restart is True
    assert any("--inprocess-restart requires nvidia_resiliency_ext, not installed" in w
               for w in warnings_of(resolved))
    quiet = resolve(["--inprocess-restart"], packages={"nvidia_resiliency_ext": "0.4.1"})
    assert not any("nvidia_resiliency_ext" in w for w in warnings_of(quiet))


def test_inprocess_timeouts_that_cannot_work_are_pointed_out():
    resolved = resolve(["--inprocess-restart", "--inprocess-soft-timeout", "120"],
                       packages={"nvidia_resiliency_ext": "0.4.1"})
    assert any("--inprocess-soft-timeout 120.0 is not below --inprocess-hard-timeout 90" in w
               for w in warnings_of(resolved))


def test_ft_timeouts_without_the_package_switch():
    resolved = resolve(["--calc-ft-timeouts"])
    assert any("--calc-ft-timeouts has no effect without --enable-ft-package" in w
               for w in warnings_of(resolved))


def test_malformed_numbers_are_rejected():
    assert any("--inprocess-max-iterations: invalid int value '1e3'" in m
               for m in messages(["--inprocess-max-iterations", "1e3"]))
    assert any("--inprocess-granularity: invalid choice" in m
               for m in messages(["--inprocess-granularity", "gpu"]))


def test_resilience_defaults():
    resolved = resolve([])
    assert resolved.inprocess_heartbeat_interval == 30
    assert resolved.inprocess_granularity == "node"
    assert resolved.straggler_ctrlr_port == 65535
    assert resolved.ft_num_warmup_iters == 5
    assert resolved.fault_injector_ranks is None
