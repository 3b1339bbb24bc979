"""pluggy is the one judge of hook implementations, and a declarative plugin never needs it.

A plugin that implements a hook is registered with pluggy's ``PluginManager`` as it loads
(``register`` and ``check_pending``: pluggy's own checks, not a copy of them); the kernel then
calls the implementations pluggy recorded. A module that marks no hook -- every shipped
plugin: its ``PluginInfo`` declares its options and rules -- has nothing for pluggy to look
at, so a resolve with the shipped plugins never imports pluggy.
"""

from __future__ import annotations

import types

import pytest

from megaplug import PluginInfo, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection


def _module(name: str, **hooks: object) -> types.ModuleType:
    module = types.ModuleType(f"plugin_{name}")
    module.megaplug_plugin = PluginInfo(name=name)  # type: ignore[attr-defined]
    for attribute, function in hooks.items():
        setattr(module, attribute, function)
    return module


@hookimpl
def add_args(flags):
    flags.add_argument("--plain-width", type=int, default=1)


@hookimpl
def derive(config):
    config.set("plain_width", config["plain_width"] * 2)


@hookimpl
def validate():  # a hook may take fewer arguments than its spec
    return None


@hookimpl
def normalize(config, extra=1):  # a defaulted argument is not passed
    return None


class ObjectPlugin:
    megaplug_plugin = PluginInfo(name="object")

    @hookimpl
    def derive(self, config):
        return None

    @hookimpl
    def validate(self, config, unused=None):
        return None


@hookimpl(tryfirst=True)
def derive_tryfirst(config):
    return None


PLUGINS = {
    "module": _module("plain", add_args=add_args, derive=derive, validate=validate,
                      normalize=normalize),
    "object": ObjectPlugin(),
}
REFUSED = {
    "misspelt": (_module("misspelt", validat=validate), "unknown hook 'validat'"),
    "option": (_module("option", derive=derive_tryfirst), "uses tryfirst=True"),
}


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_the_kernel_calls_what_pluggy_registered(name):
    plugin = PLUGINS[name]
    plugins = PluginSet(PluginSelection(autoload=False), builtins=[plugin])
    record_name = plugin.megaplug_plugin.name
    assert plugins.records[record_name].status == "active"
    registered = {hook: (impl.function, tuple(impl.argnames))
                  for hook in ("add_args", "normalize", "derive", "validate")
                  for impl in getattr(plugins.manager.hook, hook).get_hookimpls()}
    assert registered and registered == plugins.implementations[record_name]
    assert plugins.manager.get_plugin(record_name) is plugin


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_pluggy_or_the_declared_order_refuses_a_hook(name):
    plugin, reason = REFUSED[name]
    record = PluginSet(PluginSelection(autoload=False), builtins=[plugin]).records[name]
    assert record.status == "broken"
    assert reason in record.reason


def _declare_width(flags):
    flags.add_argument("--plain-width", type=int, default=1)


def test_a_declarative_plugin_never_reaches_pluggy():
    module = _module("declared")
    module.megaplug_plugin = PluginInfo(name="declared", options=_declare_width)
    plugins = PluginSet(PluginSelection(autoload=False), builtins=[module])
    assert plugins._manager is None and plugins.implementations["declared"] == {}
    assert Kernel(plugins).resolve(["--plain-width", "3"], environ={})["plain_width"] == 3
    assert plugins.records["declared"].hooks == ("add_args",)


def test_a_resolve_runs_the_hooks_pluggy_registered():
    plugins = PluginSet(PluginSelection(autoload=False), builtins=[PLUGINS["module"]])
    assert Kernel(plugins).resolve(["--plain-width", "3"], environ={})["plain_width"] == 6


# -- the markers are pluggy's, without importing pluggy ------------------------------------

@pytest.mark.parametrize("options", [{}, {"tryfirst": True}, {"trylast": True},
                                     {"hookwrapper": True}, {"wrapper": True},
                                     {"optionalhook": True}, {"specname": "derive"}])
def test_hookimpl_marks_a_function_as_pluggys_marker_does(options):
    import pluggy

    def ours(config):
        return None

    def theirs(config):
        return None

    marker = pluggy.HookimplMarker("megaplug")
    (hookimpl(**options)(ours) if options else hookimpl(ours))
    (marker(**options)(theirs) if options else marker(theirs))
    assert ours.megaplug_impl == theirs.megaplug_impl


def test_hookspec_marks_a_function_as_pluggys_marker_does():
    import pluggy

    from megaplug.hookspecs import hookspec

    def ours(config):
        return None

    def theirs(config):
        return None

    hookspec(ours)
    pluggy.HookspecMarker("megaplug")(theirs)
    assert ours.megaplug_spec == theirs.megaplug_spec


def test_a_resolve_imports_no_pluggy_inspect_or_dataclasses_and_no_options_once_stored(tmp_path):
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys, megaplug\n"
            "try:\n"
            "    megaplug.resolve(['--num-layers', '2', '--hidden-size', '64',"
            " '--num-attention-heads', '4'], environ={'RANK': '0', 'WORLD_SIZE': '1'})\n"
            "except megaplug.ConfigError:\n"
            "    pass\n"
            "print(json.dumps(sorted(m for m in ('pluggy', 'inspect', 'dataclasses', 'ast',"
            " 'megaplug.builtin.model.options') if m in sys.modules)))\n")
    env = {**os.environ, "MEGAPLUG_CACHE_DIR": str(tmp_path)}
    env.pop("MEGAPLUG_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=tmp_path, check=True) for _ in range(2)]
    # declared: the options classes are imported, and made dataclasses only when asked
    assert json.loads(runs[0].stdout) == ["megaplug.builtin.model.options"]
    assert json.loads(runs[1].stdout) == []  # read back from the cache


#: Standard modules a resolve does without: each was imported by megaplug's own modules
#: before, for a millisecond or more of every process (see docs/performance.md).
NOT_ON_THE_RESOLVE_PATH = ("typing", "copy", "weakref", "heapq", "contextlib", "importlib.util",
                           "collections.abc", "inspect", "dataclasses")


def test_the_resolve_command_imports_none_of_the_standard_modules_it_does_without(tmp_path):
    import json
    import os
    import subprocess
    import sys

    argv = ["resolve", "--assume=transformer_engine=2.17.1", "--assume-device-capability",
            "9.0", "--", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads",
            "4", "--tensor-model-parallel-size", "2", "--micro-batch-size", "1", "--seq-length",
            "128", "--max-position-embeddings", "128"]
    code = ("import atexit, json, sys\n"
            f"names = {NOT_ON_THE_RESOLVE_PATH!r}\n"
            "before = sorted(m for m in names if m in sys.modules)\n"
            "atexit.register(lambda: print(json.dumps([before, sorted(m for m in names"
            " if m in sys.modules)]), file=sys.stderr))\n"
            "from megaplug.cli import run\n"
            f"sys.argv = ['megaplug', *{argv!r}]\n"
            "run()\n")
    # megaplug and its shipped plugins: the example third-party plugin (examples/, installed
    # in the development environment) imports typing in its rules, as any author may
    env = {**os.environ, "MEGAPLUG_CACHE_DIR": str(tmp_path), "RANK": "0", "WORLD_SIZE": "2",
           "CUDA_DEVICE_MAX_CONNECTIONS": "1", "MEGAPLUG_DISABLE": "lora"}
    env.pop("MEGAPLUG_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=tmp_path) for _ in range(2)]
    assert runs[1].returncode == 0, runs[1].stderr
    before, after = json.loads(runs[1].stderr.strip().splitlines()[-1])
    assert after == before  # the flag table read back: nothing beyond the interpreter's own
