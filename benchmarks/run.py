"""megaplug's performance benchmark.

    python benchmarks/run.py [--repeat N] [--write docs/performance.md]

Every figure is a median over repeated runs with min and max; every comparison is measured
side by side in the same run, interleaved, because these machines are noisy: a ratio
holds where an absolute time does not. Prints PASS/FAIL per target. Nothing here is a unit
test; CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARITY = ROOT.parent / "shared" / "parity" / "cases"
CONFIGS = {
    "dense GPT": PARITY / "gpt__gpt3_mcore_te_tp1_pp4_vp1.json",
    "MoE": PARITY / "mixtral__mixtral_8x7b_tp1pp4ep8vpp8_release.json",
    "hybrid Mamba": PARITY / "hybrid__hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G.json",
}
RESULTS: list[tuple[str, str, bool | None]] = []


def stats(samples: list[float]) -> str:
    return (f"median {statistics.median(samples) * 1e3:7.1f} ms  "
            f"(min {min(samples) * 1e3:.1f}, max {max(samples) * 1e3:.1f}, n={len(samples)})")


def target(name: str, value: str, ok: bool | None) -> None:
    RESULTS.append((name, value, ok))
    verdict = "PASS" if ok else ("FAIL" if ok is not None else "INFO")
    print(f"  [{verdict}] {name}: {value}")


def _with_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """Installed packages run from cached bytecode; a sandbox's PYTHONDONTWRITEBYTECODE
    would make every process recompile every module and measure the compiler instead."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def wall(command: list[str], env: dict[str, str] | None = None) -> float:
    env = _with_bytecode(env)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - started


def interleaved(commands: dict[str, list[str]], repeat: int,
                env: dict[str, str] | None = None) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for name, command in commands.items():  # warm caches (pyc, entry-point cache)
        wall(command, env)
    for _ in range(repeat):
        for name, command in commands.items():
            samples[name].append(wall(command, env))
    return samples


def megaplug_command() -> list[str]:
    """The installed ``megaplug`` console script, as users run it (``python -m megaplug``
    when the script is missing: it adds ``runpy``'s few milliseconds)."""
    script = Path(sys.executable).with_name("megaplug")
    return [str(script)] if script.exists() else [sys.executable, "-m", "megaplug"]


def case(path: Path) -> dict:
    return json.loads(path.read_text())


# -- 1. import ------------------------------------------------------------------------

def bench_import(repeat: int) -> None:
    print("\n1. import time (whole process)")
    python = sys.executable
    samples = interleaved({
        "python -c pass": [python, "-c", "pass"],
        "import argparse, pluggy": [python, "-c", "import argparse, pluggy"],
        "import megaplug": [python, "-c", "import megaplug"],
    }, repeat)
    for name, values in samples.items():
        print(f"  {name:<26} {stats(values)}")
    added = statistics.median(samples["import megaplug"]) - statistics.median(
        samples["import argparse, pluggy"])
    target("import megaplug adds <= 25 ms over import argparse, pluggy",
           f"{added * 1e3:+.1f} ms", added <= 0.025)


# -- 2. whole-process resolve vs the argparse floor -------------------------------------

FLOOR = textwrap.dedent("""
    import argparse, json, sys
    flags = json.load(open(sys.argv[1]))
    parser = argparse.ArgumentParser(allow_abbrev=False)
    for flag in flags:
        kwargs = {"dest": flag["dest"], "action": flag["action"]}
        if flag["action"] in ("store", "append"):
            if flag["nargs"] is not None:
                kwargs["nargs"] = flag["nargs"]
        strings = flag["option_strings"]
        if flag["action"] == "boolean_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
            strings = [s for s in strings if not s.startswith("--no-")]
        parser.add_argument(*strings, **kwargs)
    args = parser.parse_known_args(json.load(open(sys.argv[2])))
    print(json.dumps(sorted(vars(args[0]))))
""")


def _flag_table_file(directory: Path) -> Path:
    from megaplug import load

    kernel, _ = load([])
    rows = [{"dest": s.dest, "action": s.action, "nargs": s.nargs,
             "option_strings": list(s.option_strings)}
            for s in kernel.table if s.kind == "flag"]
    path = directory / "flags.json"
    path.write_text(json.dumps(rows))
    return path


def bench_resolve_process(repeat: int) -> None:
    print("\n2. whole-process `megaplug resolve --format json -- ARGV` vs a plain-argparse floor")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        flags = _flag_table_file(directory)
        floor = directory / "floor.py"
        floor.write_text(FLOOR)
        for label, path in CONFIGS.items():
            data = case(path)
            argv_file = directory / f"{path.stem}.json"
            argv_file.write_text(json.dumps(data["argv"]))
            env = dict(os.environ, **data["env"])
            assume = [f"--assume={k}={v}" for k, v in data["assume"]["packages"].items()]
            capability = ".".join(map(str, data["assume"]["device_capability"]))
            megaplug = [*megaplug_command(), "resolve", "--format", "json",
                        "--defaults", json.dumps(data["args_defaults"]), *assume,
                        "--assume-device-capability", capability, "--", *data["argv"]]
            samples = interleaved({
                "argparse floor": [sys.executable, str(floor), str(flags), str(argv_file)],
                "megaplug resolve": megaplug,
            }, repeat, env)
            print(f"  {label}:")
            for name, values in samples.items():
                print(f"    {name:<18} {stats(values)}")
            ratio = statistics.median(samples["megaplug resolve"]) / statistics.median(
                samples["argparse floor"])
            target(f"resolve {label} <= 2.5x the argparse floor", f"{ratio:.2f}x", ratio <= 2.5)


# -- 3. in-process resolve by phase ------------------------------------------------------

def bench_resolve_in_process(repeat: int) -> None:
    print("\n3. in-process resolve, all plugins, split by phase")
    from megaplug import TargetEnvironment, load
    from megaplug._plugins import PluginSelection, PluginSet

    started = time.perf_counter()
    plugins = PluginSet(PluginSelection.from_environment())
    discovery = time.perf_counter() - started
    from megaplug._kernel import Kernel

    kernel = Kernel(plugins)
    kernel.parser()
    print(f"  once per process: discovery {plugins.discovery_seconds * 1e3:.1f} ms, "
          f"add_args {kernel.timings['add_args'] * 1e3:.1f} ms "
          f"({sum(1 for s in kernel.table if s.kind == 'flag')} flags)")
    del discovery, load
    for label, path in CONFIGS.items():
        data = case(path)
        phases: dict[str, list[float]] = {
            p: [] for p in ("parse", "normalize", "derive", "validate")}
        totals = []
        for _ in range(repeat * 5):
            target_env = TargetEnvironment(packages=dict(data["assume"]["packages"]),
                                           device_capability=tuple(data["assume"]["device_capability"]),
                                           environ=data["env"])
            started = time.perf_counter()
            kernel.resolve(data["argv"], environ=data["env"], defaults=data["args_defaults"],
                           target=target_env)
            totals.append(time.perf_counter() - started)
            for phase in phases:
                phases[phase].append(kernel.timings[phase])
        split = ", ".join(f"{p} {statistics.median(v) * 1e3:.2f}" for p, v in phases.items())
        print(f"  {label:<13} {stats(totals)}   [{split} ms]")
        median = statistics.median(totals)
        target(f"in-process resolve {label} <= 15 ms", f"{median * 1e3:.1f} ms", median <= 0.015)


# -- 4. megaplug list --------------------------------------------------------------------

def bench_list(repeat: int) -> None:
    print("\n4. `megaplug list` wall time")
    samples = interleaved({"megaplug list": [*megaplug_command(), "list"]}, repeat)
    median = statistics.median(samples["megaplug list"])
    print(f"  megaplug list {stats(samples['megaplug list'])}")
    target("megaplug list <= 150 ms", f"{median * 1e3:.1f} ms", median <= 0.150)


def bench_discovery_cache(repeat: int) -> None:
    print("\n4b. entry-point discovery: the on-disk cache against a scan per process")
    data = case(CONFIGS["dense GPT"])
    command = [*megaplug_command(), "resolve", "--format", "json", "--", *data["argv"]]
    # both through env(1), so the only difference is the variable
    samples = interleaved({
        "cached": ["env", "MEGAPLUG_NO_CACHE=0", *command],
        "scanned": ["env", "MEGAPLUG_NO_CACHE=1", *command],
    }, repeat, dict(os.environ, **data["env"]))
    for name, values in samples.items():
        print(f"  resolve, entry points {name:<8} {stats(values)}")
    gain = statistics.median(samples["scanned"]) - statistics.median(samples["cached"])
    print(f"  the cache saves {gain * 1e3:.1f} ms per process")
    target("entry-point cache saves time per process", f"{gain * 1e3:.1f} ms", gain > 0)


# -- 5. scaling with synthetic plugins --------------------------------------------------

def synthetic_plugins(count: int, flags_per_plugin: int = 20) -> list[object]:
    from dataclasses import make_dataclass

    from typing_extensions import Annotated

    from megaplug import Flag, PluginInfo, hookimpl

    plugins = []
    for index in range(count):
        name = f"synthetic{index:04d}"
        fields = [(f"{name}_f{j}", Annotated[int, Flag(help="synthetic")], j)
                  for j in range(flags_per_plugin)]
        options = make_dataclass(f"Options{index}", fields)
        first = f"{name}_f0"

        class Plugin:
            megaplug_plugin = PluginInfo(name=name,
                                         after=(f"synthetic{index - 1:04d}",) if index else ())

            @hookimpl
            def add_args(self, flags, options=options):
                flags.add_options(options)

            @hookimpl
            def normalize(self, config, first=first):
                config.get(first)

            @hookimpl
            def derive(self, config, first=first):
                config.set(first, config[first] + 0)

            @hookimpl
            def validate(self, config, first=first):
                if config[first] < 0:
                    config.error("negative", flags=(first,))

        plugins.append(Plugin())
    return plugins


def bench_scaling(repeat: int) -> None:
    print("\n5. scaling: synthetic plugins x 20 flags, each with normalize/derive/validate")
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSelection, PluginSet

    medians = {}
    for count in (10, 100, 1000):
        plugins = synthetic_plugins(count)
        started = time.perf_counter()
        kernel = Kernel(PluginSet(PluginSelection(autoload=False), builtins=plugins))
        kernel.parser()
        setup = time.perf_counter() - started
        argv = [f"--synthetic{i:04d}-f1" for i in range(0, count, max(1, count // 10))]
        argv = [token for flag in argv for token in (flag, "5")]
        samples = []
        for _ in range(max(3, repeat)):
            started = time.perf_counter()
            kernel.resolve(argv, environ={})
            samples.append(time.perf_counter() - started)
        medians[count] = statistics.median(samples) + setup
        print(f"  {count:>5} plugins ({count * 20:>6} flags): set-up {setup * 1e3:8.1f} ms, "
              f"resolve {stats(samples)}")
    total = medians[1000]
    target("1,000 plugins x 20 flags: set-up + resolve <= 1.5 s", f"{total:.2f} s", total <= 1.5)
    per_flag_small = (medians[100] - medians[10]) / (90 * 20)
    per_flag_large = (medians[1000] - medians[100]) / (900 * 20)
    ratio = per_flag_large / per_flag_small if per_flag_small > 0 else float("inf")
    target("100->1,000 step per flag <= 12x the 10->100 step per flag", f"{ratio:.2f}x",
           ratio <= 12)


# -- 6. import side effects --------------------------------------------------------------

SIDE_EFFECTS = textwrap.dedent("""
    import contextlib, io, json, sys
    from megaplug._cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(json.loads(sys.argv[1]))
    print(json.dumps(sorted(sys.modules)))
""")


def bench_side_effects() -> None:
    print("\n6. import side effects (is torch imported?)")
    data = case(CONFIGS["dense GPT"])
    commands = {
        "list": ["list"],
        "flags": ["flags"],
        "resolve (dense GPT, json)": ["resolve", "--format", "json", "--", *data["argv"]],
        "explain": ["explain", "num_layers", "--", *data["argv"]],
    }
    env = dict(os.environ, **data["env"])
    for name, argv in commands.items():
        out = subprocess.run([sys.executable, "-c", SIDE_EFFECTS, json.dumps(argv)],
                             capture_output=True, text=True, env=_with_bytecode(env),
                             check=True).stdout
        modules = json.loads(out)
        heavy = [m for m in ("torch", "numpy", "transformer_engine", "importlib.metadata")
                 if m in modules]
        target(f"`megaplug {name}` does not import torch",
               f"{len(modules)} modules; heavy: {', '.join(heavy) or 'none'}",
               "torch" not in modules)


# -- 7. the torch-types path, measured separately ----------------------------------------

FACADE = textwrap.dedent("""
    import json, os, sys
    data = json.load(open(sys.argv[1]))
    os.environ.update(data["env"])
    from megaplug import TargetEnvironment
    from megaplug.megatron import parse_and_validate_args
    target = TargetEnvironment(packages=data["assume"]["packages"],
                               device_capability=tuple(data["assume"]["device_capability"]))
    args = parse_and_validate_args(argv=data["argv"], environ=os.environ,
                                   args_defaults=data["args_defaults"], target=target,
                                   torch_types=sys.argv[2] == "torch")
    print(json.dumps({"torch_imported": "torch" in sys.modules,
                      "params_dtype_type": type(args.params_dtype).__module__ + "."
                                           + type(args.params_dtype).__name__}))
""")


def bench_torch_types(repeat: int) -> None:
    print("\n7. the Megatron facade with torch dtypes (the only path that imports torch)")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        facade = directory / "facade.py"
        facade.write_text(FACADE)
        data_file = directory / "case.json"
        data_file.write_text(json.dumps(case(CONFIGS["dense GPT"])))
        runs = {
            "import torch": [sys.executable, "-c", "import torch"],
            "facade, plain dtypes": [sys.executable, str(facade), str(data_file), "plain"],
            "facade, torch dtypes": [sys.executable, str(facade), str(data_file), "torch"],
        }
        for mode in ("plain", "torch"):
            out = subprocess.run(runs[f"facade, {mode} dtypes"], capture_output=True, text=True,
                                 env=_with_bytecode(None), check=True).stdout
            facts = json.loads(out)
            print(f"  {mode} dtypes: torch imported {facts['torch_imported']}, "
                  f"params_dtype is {facts['params_dtype_type']}")
            target(f"facade with {mode} dtypes imports torch only if asked",
                   f"torch imported: {facts['torch_imported']}",
                   facts["torch_imported"] is (mode == "torch"))
        samples = interleaved(runs, repeat)
    for name, values in samples.items():
        print(f"    {name:<22} {stats(values)}")
    extra = (statistics.median(samples["facade, torch dtypes"])
             - statistics.median(samples["facade, plain dtypes"])
             - statistics.median(samples["import torch"]))
    target("torch dtypes add <= 25 ms beyond importing torch", f"{extra * 1e3:+.1f} ms",
           extra <= 0.025)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--write", metavar="FILE", help="also write the results as Markdown")
    parser.add_argument("--only", nargs="*", help="run only these sections (1-7, 4b)")
    options = parser.parse_args()
    sections = {"1": bench_import, "2": bench_resolve_process, "3": bench_resolve_in_process,
                "4": bench_list, "4b": bench_discovery_cache, "5": bench_scaling,
                "6": bench_side_effects,
                "7": bench_torch_types}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, repeat={options.repeat}")
    for key, function in sections.items():
        if options.only and key not in options.only:
            continue
        if key == "6":
            function()
        else:
            function(options.repeat)
    failed = [name for name, _, ok in RESULTS if ok is False]
    print(f"\n{len(RESULTS) - len(failed)}/{len(RESULTS)} targets met")
    if options.write:
        lines = ["| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {name} | {value} | {'PASS' if ok else 'FAIL'} |"
                  for name, value, ok in RESULTS]
        Path(options.write).write_text(Path(options.write).read_text().split("<!-- results -->")[0]
                                       + "<!-- results -->\n" + "\n".join(lines) + "\n"
                                       if Path(options.write).exists() else "\n".join(lines) + "\n")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
