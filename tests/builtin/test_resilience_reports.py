"""What each resilience rule reports, whole (message, flags, hint), and each derivation's
value, why and from what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import problems, resolve  # noqa: E402

NVRX = {"nvidia_resiliency_ext": "0.4.1"}


def warned(resolved) -> list[tuple]:
    """(message, flags) of every warning but the kernel's deprecation notes."""
    return [(w.message, tuple(w.flags)) for w in resolved.warnings
            if "deprecated" not in w.message]


def provenance(resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("world, expected", [
    ("8", (8, "normalized", "defaults to WORLD_SIZE", ())),
    ("2", (2, "normalized", "defaults to WORLD_SIZE", ())),
])
def test_the_active_world_defaults_to_world_size(world, expected):
    assert provenance(resolve([], environ={"WORLD_SIZE": world}),
                      "inprocess_active_world_size") == expected


@pytest.mark.parametrize("environ", [{}, {"WORLD_SIZE": "1"}])
def test_the_active_world_keeps_its_default_of_one(environ):
    resolved = resolve([], environ=environ)
    assert resolved.inprocess_active_world_size == 1
    assert resolved.source("inprocess_active_world_size").source == "default"


def test_a_malformed_world_size_is_left_to_the_plugin_that_owns_it():
    found = problems([], environ={"WORLD_SIZE": "eight"})
    assert [p.plugin for p in found] == ["parallel"]


def test_a_given_active_world_is_kept_even_at_the_flag_default():
    resolved = resolve(["--inprocess-active-world-size", "1"], environ={"WORLD_SIZE": "8"})
    assert provenance(resolved, "inprocess_active_world_size")[:2] == (1, "command-line")


@pytest.mark.parametrize("argv, expected", [
    (["--inprocess-restart"],
     [("--inprocess-restart requires nvidia_resiliency_ext, not installed; the job will fail "
       "when it starts (pip install nvidia-resiliency-ext)", ("--inprocess-restart",))]),
    (["--enable-ft-package"],
     [("--enable-ft-package requires nvidia_resiliency_ext, not installed; the job will fail "
       "when it starts (pip install nvidia-resiliency-ext)", ("--enable-ft-package",))]),
    (["--inprocess-restart", "--enable-ft-package"],
     [("--inprocess-restart and --enable-ft-package requires nvidia_resiliency_ext, not "
       "installed; the job will fail when it starts (pip install nvidia-resiliency-ext)",
       ("--inprocess-restart", "--enable-ft-package"))]),
])
def test_a_missing_resiliency_package_is_one_warning(argv, expected):
    assert warned(resolve(argv)) == expected


@pytest.mark.parametrize("soft, hard, warns", [("89", "90", False), ("90", "90", True),
                                               ("91", "90", True)])
def test_the_soft_timeout_must_be_below_the_hard_one(soft, hard, warns):
    resolved = resolve(["--inprocess-restart", "--inprocess-soft-timeout", soft,
                        "--inprocess-hard-timeout", hard], packages=NVRX)
    expected = [(f"--inprocess-soft-timeout {float(soft)} is not below "
                 f"--inprocess-hard-timeout {float(hard)}: ranks are killed before the soft "
                 "timeout can act", ("--inprocess-soft-timeout", "--inprocess-hard-timeout"))]
    assert warned(resolved) == (expected if warns else [])


@pytest.mark.parametrize("active, warns", [("1", False), ("2", False), ("3", True)])
def test_the_active_world_fits_in_the_world(active, warns):
    resolved = resolve(["--inprocess-restart", "--inprocess-active-world-size", active],
                       environ={"WORLD_SIZE": "2"}, packages=NVRX)
    expected = [(f"--inprocess-active-world-size {active} is larger than the world size 2",
                 ("--inprocess-active-world-size",))]
    assert warned(resolved) == (expected if warns else [])


def test_inprocess_settings_are_not_checked_without_inprocess_restart():
    assert warned(resolve(["--inprocess-soft-timeout", "120",
                           "--inprocess-active-world-size", "3"])) == []


@pytest.mark.parametrize("argv, expected", [
    (["--calc-ft-timeouts"], [("--calc-ft-timeouts has no effect without --enable-ft-package",
                               ("--calc-ft-timeouts", "--enable-ft-package"))]),
    (["--calc-ft-timeouts", "--enable-ft-package"], []),
])
def test_ft_timeouts_need_the_package_switch(argv, expected):
    assert warned(resolve(argv, packages=NVRX)) == expected


def test_enable_msc_without_the_package_whole():
    assert [(p.message, tuple(p.flags), p.hint) for p in problems(["--enable-msc"])] == [
        ("--enable-msc requires multistorageclient, not installed", ("--enable-msc",),
         "pip install multi-storage-client, or drop --enable-msc")]


def test_enable_msc_with_the_package_is_noted():
    resolved = resolve(["--enable-msc"], packages={"multistorageclient": "0.20.0"})
    assert warned(resolved) == [("the multi-storage client (MSC) is enabled", ("--enable-msc",))]


def test_disable_msc_overrides_enable_msc_whole():
    resolved = resolve(["--enable-msc", "--disable-msc"])
    assert provenance(resolved, "enable_msc") == (
        False, "normalized", "--disable-msc overrides --enable-msc", ("disable_msc_deprecated",))
    assert warned(resolved) == [
        ("--disable-msc overrides --enable-msc: the multi-storage client stays off",
         ("--disable-msc", "--enable-msc"))]


def test_disable_msc_alone_changes_nothing():
    resolved = resolve(["--disable-msc"])
    assert resolved.enable_msc is False
    assert resolved.source("enable_msc").source == "default"
    assert warned(resolved) == []
