"""megaplug's performance benchmark.

    python benchmarks/run.py [--repeat N] [--write docs/performance.md] [--only SECTION...]
                             [--with-example]

Every figure is a median over repeated runs with min and max; every comparison is measured
side by side in the same run, interleaved, because these machines are noisy: a ratio
holds where an absolute time does not. Prints PASS/FAIL per target and exits 1 if one
fails. Nothing here is a unit test; CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PARITY = ROOT.parent / "shared" / "parity" / "cases"
CONFIGS = {
    "dense GPT": PARITY / "gpt__gpt3_mcore_te_tp1_pp4_vp1.json",
    "MoE": PARITY / "mixtral__mixtral_8x7b_tp1pp4ep8vpp8_release.json",
    "hybrid Mamba": PARITY / "hybrid__hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G.json",
}
#: A dense GPT with tensor parallelism 4: the configuration whose checks ask for the GPU
#: generation (CUDA_DEVICE_MAX_CONNECTIONS before Blackwell).
TP_CASE = PARITY / "gpt__gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather.json"
#: The issue's bar: every command within this factor of the bare-argparse floor.
FLOOR_FACTOR = 1.5
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


class Run:
    """One command to time: its argv, its environment, and what to do before each run
    (outside the timing: emptying a cache for a cold start)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 before: Callable[[], None] | None = None, exit_codes: tuple[int, ...] = (0,)):
        self.argv = argv
        self.env = _with_bytecode(env)
        self.before = before
        self.exit_codes = exit_codes

    def time(self) -> float:
        if self.before is not None:
            self.before()
        started = time.perf_counter()
        done = subprocess.run(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=self.env)
        elapsed = time.perf_counter() - started
        if done.returncode not in self.exit_codes:
            raise SystemExit(f"{' '.join(self.argv)[:200]} exited {done.returncode}:\n"
                             f"{done.stderr.decode(errors='replace')[-2000:]}")
        return elapsed


def wall(command: list[str], env: dict[str, str] | None = None) -> float:
    return Run(command, env).time()


def interleaved(commands: dict[str, list[str] | Run], repeat: int,
                env: dict[str, str] | None = None) -> dict[str, list[float]]:
    """Each command ``repeat`` times, round by round, after one untimed warm-up round
    (bytecode, caches): a burst of load hits every command alike."""
    runs = {name: command if isinstance(command, Run) else Run(command, env)
            for name, command in commands.items()}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        run.time()
    for _ in range(repeat):
        for name, run in runs.items():
            samples[name].append(run.time())
    return samples


def against_floor(samples: dict[str, list[float]], floor: str = "argparse floor") -> None:
    """Print every command's samples, and a target of ``FLOOR_FACTOR`` x the floor each.

    The target is judged on the median of the per-round ratios: each round times the floor
    and the command back to back, so a ratio compares two runs under the same load and a
    slow stretch of the machine cancels out of it (the ratio of the medians, shown beside
    it, does not pair them: a burst of noise in one command's runs moves it).
    """
    for name, values in samples.items():
        print(f"    {name:<34} {stats(values)}")
    base = statistics.median(samples[floor])
    for name, values in samples.items():
        if name != floor:
            paired = statistics.median(v / f for v, f in zip(values, samples[floor]))
            target(f"{name} <= {FLOOR_FACTOR}x the argparse floor",
                   f"{paired:.2f}x (ratio of medians {statistics.median(values) / base:.2f}x)",
                   paired <= FLOOR_FACTOR)


def megaplug_command() -> list[str]:
    """The installed ``megaplug`` console script, as users run it (``python -m megaplug``
    when the script is missing: it adds ``runpy``'s few milliseconds)."""
    script = Path(sys.executable).with_name("megaplug")
    return [str(script)] if script.exists() else [sys.executable, "-m", "megaplug"]


def case(path: Path) -> dict:
    return json.loads(path.read_text())


def assume_options(data: dict) -> list[str]:
    """``--assume*`` for a parity case's target (the GPU and packages it was run against)."""
    options = [f"--assume={k}={v}" for k, v in data["assume"]["packages"].items()]
    capability = data["assume"]["device_capability"]
    return [*options, "--assume-device-capability",
            ".".join(map(str, capability)) if capability else "none"]


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


_FLAG_TABLE: list[dict] = []


def floor_run(directory: Path, argv: list[str], env: dict[str, str]) -> Run:
    """The floor for ``argv``: a process that builds a plain argparse parser with the same
    flags as megaplug (read from a JSON file) and parses ``argv``."""
    if not _FLAG_TABLE:
        from megaplug import load

        kernel, _ = load([])
        _FLAG_TABLE.extend({"dest": s.dest, "action": s.action, "nargs": s.nargs,
                            "option_strings": list(s.option_strings)}
                           for s in kernel.table if s.kind == "flag")
    flags, script = directory / "flags.json", directory / "floor.py"
    if not flags.exists():
        flags.write_text(json.dumps(_FLAG_TABLE))
        script.write_text(FLOOR)
    argv_file = directory / f"argv-{abs(hash(tuple(argv))):x}.json"
    argv_file.write_text(json.dumps(argv))
    return Run([sys.executable, str(script), str(flags), str(argv_file)], env)


def bench_resolve_process(repeat: int) -> None:
    print("\n2. whole-process `megaplug resolve --format json --assume* -- ARGV` vs the floor")
    with tempfile.TemporaryDirectory() as scratch:
        for label, path in CONFIGS.items():
            data = case(path)
            env = dict(os.environ, **data["env"])
            megaplug = [*megaplug_command(), "resolve", "--format", "json",
                        "--defaults", json.dumps(data["args_defaults"]), *assume_options(data),
                        "--", *data["argv"]]
            print(f"  {label}:")
            against_floor(interleaved({
                "argparse floor": floor_run(Path(scratch), data["argv"], env),
                f"resolve {label}": Run(megaplug, env),
            }, repeat))


# -- 3. tensor parallelism > 1: the GPU generation, stated or looked up ------------------

def bench_tensor_parallel(repeat: int) -> None:
    print("\n3. dense GPT at TP 4: resolve and explain with --assume* and without (this "
          "machine's GPU and packages are looked up)")
    from megaplug.environment import _devices

    driver = [path for path in _devices.DRIVER_MARKERS if os.path.exists(path)]
    if driver:
        bench_nvml(driver)
    else:
        probes = []
        for _ in range(2000):
            started = time.perf_counter()
            found = _devices._device_capability(None, None)
            probes.append(time.perf_counter() - started)
        probe = statistics.median(probes)
        target("no NVIDIA driver: 'no GPU' answered in <= 100 us", f"{probe * 1e6:.1f} us",
               found is None and probe <= 100e-6)
    data = case(TP_CASE)
    env = dict(os.environ, **data["env"])
    defaults = ["--defaults", json.dumps(data["args_defaults"])]
    command = megaplug_command()
    with tempfile.TemporaryDirectory() as scratch:
        against_floor(interleaved({
            "argparse floor": floor_run(Path(scratch), data["argv"], env),
            "resolve TP4 --assume*": Run([*command, "resolve", *defaults, *assume_options(data),
                                          "--", *data["argv"]], env),
            "resolve TP4, this machine": Run([*command, "resolve", *defaults, "--",
                                              *data["argv"]], env, exit_codes=(0, 2)),
            "explain TP4 --assume*": Run([*command, "explain", "tensor_model_parallel_size",
                                          *defaults, *assume_options(data), "--",
                                          *data["argv"]], env),
            "explain TP4, this machine": Run([*command, "explain", "tensor_model_parallel_size",
                                              *defaults, "--", *data["argv"]], env,
                                             exit_codes=(0, 2)),
        }, repeat))


def bench_nvml(driver: list[str]) -> None:
    """Where a driver is loaded: NVML's own answer and its time (what a process without
    the host's kept answer pays), and the kept answer read back."""
    from megaplug.environment import _devices

    started = time.perf_counter()
    devices = _devices._nvml_devices_now()
    asked = time.perf_counter() - started
    generations = sorted({capability for capability, _ in devices}) if isinstance(
        devices, list) else devices
    target(f"GPU capability from NVML ({', '.join(driver)} present)",
           f"{generations} in {asked * 1e3:.1f} ms", None)
    if _devices.host_key() is None:
        target("this host's NVML answer kept", "no key (no boot id or driver version)", None)
        return
    _devices.host_devices()  # asks NVML, or finds the answer kept by an earlier process
    probes = []
    for _ in range(200):
        started = time.perf_counter()
        kept = _devices.host_devices()
        probes.append(time.perf_counter() - started)
    probe = statistics.median(probes)
    target("this host's NVML answer read back in <= 1 ms", f"{probe * 1e3:.2f} ms",
           kept == devices and probe <= 1e-3)


# -- 4. every other command --------------------------------------------------------------

def bench_commands(repeat: int) -> None:
    print("\n4. every other command, and the Megatron facade, vs the floor (dense GPT TP 4 argv)")
    data = case(TP_CASE)
    env = dict(os.environ, **data["env"])
    command = megaplug_command()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        cold_cache = directory / "cold-cache"
        saved = directory / "saved.json"
        saved.write_text(subprocess.run(
            [*command, "resolve", "--defaults", json.dumps(data["args_defaults"]),
             *assume_options(data), "--", *data["argv"]],
            env=env, capture_output=True, text=True, check=True).stdout)
        facade = directory / "facade.py"
        facade.write_text(FACADE)
        case_file = directory / "case.json"
        case_file.write_text(json.dumps(data))
        against_floor(interleaved({
            "argparse floor": floor_run(directory, data["argv"], env),
            "list (warm cache)": Run([*command, "list"], env),
            "list (cold: no cache)": Run(
                [*command, "list"], dict(env, MEGAPLUG_CACHE_DIR=str(cold_cache)),
                before=lambda: shutil.rmtree(cold_cache, ignore_errors=True)),
            "flags": Run([*command, "flags"], env),
            "docs": Run([*command, "docs", "--out", str(directory / "docs")], env),
            "schema": Run([*command, "schema"], env),
            "completion bash": Run([*command, "completion", "bash"], env),
            "diff SAVED -- ARGV": Run([*command, "diff", str(saved), *assume_options(data),
                                       "--", *data["argv"], "--seed", "7"], env),
            "facade parse_and_validate_args": Run(
                [sys.executable, str(facade), str(case_file), "plain"], env),
        }, repeat))


# -- 10. export / import start-up (megaplug-bridge) --------------------------------------

#: A config container as Megatron's to_yaml writes one (cut down to the model and training
#: sections): what `megaplug import mlm-config` reads.
CONTAINER_YAML = textwrap.dedent("""\
    _target_: megatron.training.config.container.PretrainConfigContainer
    model:
      _target_: megatron.training.models.gpt.GPTModelConfig
      seq_length: 4096
      should_pad_vocab: true
      vocab_size: 32000
      transformer:
        _target_: megatron.core.transformer.transformer_config.TransformerConfig
        num_layers: 24
        hidden_size: 2048
        num_attention_heads: 16
        bf16: true
    train:
      _target_: megatron.training.config.training_config.TrainingConfig
      micro_batch_size: 2
      train_iters: 10
    """)
#: The same launch as a Megatron-Bridge ConfigContainer (the flat model provider, the
#: dataset and tokenizer sections): what `megaplug import bridge` reads (no Bridge needed).
BRIDGE_YAML = textwrap.dedent("""\
    _target_: megatron.bridge.training.config.ConfigContainer
    model:
      _target_: megatron.bridge.models.gpt_provider.GPTModelProvider
      num_layers: 24
      hidden_size: 2048
      num_attention_heads: 16
      seq_length: 4096
      vocab_size: 32000
      bf16: true
    dataset:
      _target_: megatron.bridge.training.config.GPTDatasetConfig
      seq_length: 4096
    train:
      _target_: megatron.bridge.training.config.TrainingConfig
      micro_batch_size: 2
      train_iters: 10
    """)
#: The issue's bar for export and import where Megatron-Bridge is not needed.
INTEROP_MARGIN_S = 0.050


def bench_interop(repeat: int) -> None:
    print("\n10. export / import (megaplug-bridge) vs resolve of the same launch")
    command = megaplug_command()
    argv = ["--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
            "--seq-length", "4096", "--max-position-embeddings", "4096", "--micro-batch-size",
            "2", "--vocab-size", "32000", "--bf16", "--train-iters", "10"]
    with tempfile.TemporaryDirectory() as scratch:
        container = Path(scratch) / "run.yaml"
        container.write_text(CONTAINER_YAML)
        bridge = Path(scratch) / "bridge.yaml"
        bridge.write_text(BRIDGE_YAML)
        runs = {"resolve": Run([*command, "resolve", "--", *argv]),
                "import mlm-config": Run([*command, "import", "mlm-config", str(container)]),
                "import bridge": Run([*command, "import", "bridge", str(bridge)]),
                "resolve --config CONTAINER": Run([*command, "resolve", "--config",
                                                   str(container), "--", "--seq-length",
                                                   "4096"])}
        samples = interleaved(runs, repeat)
    for name, values in samples.items():
        print(f"    {name:<34} {stats(values)}")
    base = statistics.median(samples["resolve"])
    for name, values in samples.items():
        if name != "resolve":
            extra = statistics.median(v - b for v, b in zip(values, samples["resolve"]))
            target(f"{name} within {INTEROP_MARGIN_S * 1000:.0f} ms of resolve",
                   f"{extra * 1000:+.0f} ms (resolve {base * 1000:.0f} ms)",
                   extra <= INTEROP_MARGIN_S)


# -- 5. in-process resolve by phase ------------------------------------------------------

def bench_resolve_in_process(repeat: int) -> None:
    print("\n5. in-process resolve, all plugins, split by phase")
    from megaplug import TargetEnvironment
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
    from megaplug._kernel import Kernel

    plugins = PluginSet(PluginSelection.from_environment())

    kernel = Kernel(plugins)
    kernel.parser()
    print(f"  once per process: discovery {plugins.discovery_seconds * 1e3:.1f} ms, "
          f"add_args {kernel.timings['add_args'] * 1e3:.1f} ms "
          f"({sum(1 for s in kernel.table if s.kind == 'flag')} flags)")
    for label, path in CONFIGS.items():
        data = case(path)
        phases: dict[str, list[float]] = {
            p: [] for p in ("parse", "normalize", "derive", "validate")}
        totals = []
        for _ in range(repeat * 5):
            target_env = TargetEnvironment(
                packages=dict(data["assume"]["packages"]),
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


# -- 6. the entry-point cache ------------------------------------------------------------

def bench_discovery_cache(repeat: int) -> None:
    print("\n6. the on-disk caches (entry points, flag table) against none: a process after an "
          "install, and one with MEGAPLUG_NO_CACHE=1")
    data = case(CONFIGS["dense GPT"])
    command = [*megaplug_command(), "resolve", "--format", "json", *assume_options(data),
               "--", *data["argv"]]
    env = dict(os.environ, **data["env"])
    with tempfile.TemporaryDirectory() as scratch:
        cold = Path(scratch) / "cache"
        samples = interleaved({
            "cached": Run(command, dict(env, MEGAPLUG_NO_CACHE="0")),
            "first after an install": Run(
                command, dict(env, MEGAPLUG_CACHE_DIR=str(cold)),
                before=lambda: shutil.rmtree(cold, ignore_errors=True)),
            "no cache": Run(command, dict(env, MEGAPLUG_NO_CACHE="1")),
        }, repeat)
    for name, values in samples.items():
        print(f"  resolve, {name:<24} {stats(values)}")
    gain = statistics.median(samples["no cache"]) - statistics.median(samples["cached"])
    print(f"  the caches save {gain * 1e3:.1f} ms per process")
    target("the caches save time per process", f"{gain * 1e3:.1f} ms", gain > 0)


# -- 7. scaling with synthetic plugins --------------------------------------------------

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
    print("\n7. scaling: synthetic plugins x 20 flags, each with normalize/derive/validate")
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
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


# -- 8. no torch unless asked for torch types ------------------------------------------

SIDE_EFFECTS = textwrap.dedent("""
    import contextlib, io, json, os, sys
    kind, payload = sys.argv[1], json.loads(sys.argv[2])
    code = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            if kind == "cli":
                from megaplug.cli import main
                code = main(payload)
            elif kind == "import":
                import megaplug
            else:  # the Megatron facade with megaplug's own dtypes, this machine's target
                from megaplug.megatron import parse_and_validate_args
                parse_and_validate_args(argv=payload["argv"], environ=os.environ,
                                        args_defaults=payload["args_defaults"],
                                        torch_types=False)
        except SystemExit as exit:
            code = exit.code
    print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
""")


#: Modules worth naming when a path imports them: slow to import, or not needed to resolve.
HEAVY = ("torch", "numpy", "transformer_engine", "importlib.metadata", "pluggy", "inspect",
         "typing", "dataclasses")


def bench_side_effects() -> None:
    print("\n8. no path imports torch unless asked for torch types (dense GPT TP 4)")
    data = case(TP_CASE)
    defaults = ["--defaults", json.dumps(data["args_defaults"])]
    argv, assume = data["argv"], assume_options(data)
    env = _with_bytecode(dict(os.environ, **data["env"]))
    with tempfile.TemporaryDirectory() as scratch:
        saved = Path(scratch) / "saved.json"
        saved.write_text(subprocess.run(
            [*megaplug_command(), "resolve", *defaults, *assume, "--", *argv],
            env=env, capture_output=True, text=True, check=True).stdout)
        paths: dict[str, tuple[str, object]] = {
            "import megaplug": ("import", None),
            "megaplug --version": ("cli", ["--version"]),
            "megaplug list": ("cli", ["list"]),
            "megaplug list --json": ("cli", ["list", "--json"]),
            "megaplug flags": ("cli", ["flags"]),
            "megaplug resolve --assume*": ("cli", ["resolve", *defaults, *assume, "--", *argv]),
            "megaplug resolve (this machine)": ("cli", ["resolve", *defaults, "--", *argv]),
            "megaplug resolve --format yaml": ("cli", ["resolve", "--format", "yaml",
                                                       *defaults, "--", *argv]),
            "megaplug resolve --provenance": ("cli", ["resolve", "--provenance", *defaults,
                                                      "--", *argv]),
            "megaplug explain --assume*": ("cli", ["explain", "tensor_model_parallel_size",
                                                   *defaults, *assume, "--", *argv]),
            "megaplug explain (this machine)": ("cli", ["explain", "tensor_model_parallel_size",
                                                        *defaults, "--", *argv]),
            "megaplug diff": ("cli", ["diff", str(saved), "--", *argv, "--seed", "7"]),
            "megaplug schema": ("cli", ["schema"]),
            "megaplug completion bash": ("cli", ["completion", "bash"]),
            "megaplug docs": ("cli", ["docs", "--out", str(Path(scratch) / "docs")]),
            "facade, plain dtypes (this machine)": ("facade", data),
        }
        # what the interpreter's own start-up imports here (a site's .pth files may bring
        # inspect, say) is no path's doing
        bare = set(json.loads(subprocess.run(
            [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
            capture_output=True, text=True, env=env, check=True).stdout))
        started = [m for m in HEAVY if m in bare]
        if started:
            print(f"  (this interpreter imports {', '.join(started)} at start-up, before any path)")
        for name, (kind, payload) in paths.items():
            done = subprocess.run([sys.executable, "-c", SIDE_EFFECTS, kind, json.dumps(payload)],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                target(f"{name} does not import torch", f"crashed: {done.stderr[-300:]}", False)
                continue
            facts = json.loads(done.stdout)
            heavy = [m for m in HEAVY if m in facts["modules"] and m not in bare]
            target(f"{name} does not import torch",
                   f"exit {facts['code']}, {len(facts['modules'])} modules; "
                   f"heavy: {', '.join(heavy) or 'none'}",
                   "torch" not in facts["modules"] and facts["code"] in (0, None))


# -- 9. the torch-types path, measured separately ----------------------------------------

FACADE = textwrap.dedent("""
    import json, os, sys, time
    started = time.perf_counter()
    data = json.load(open(sys.argv[1]))
    os.environ.update(data["env"])
    from megaplug import TargetEnvironment
    from megaplug.megatron import parse_and_validate_args
    target = TargetEnvironment(packages=data["assume"]["packages"],
                               device_capability=tuple(data["assume"]["device_capability"]))
    args = parse_and_validate_args(argv=data["argv"], environ=os.environ,
                                   args_defaults=data["args_defaults"], target=target,
                                   torch_types=sys.argv[2] == "torch")
    print(json.dumps({"seconds": time.perf_counter() - started,
                      "torch_imported": "torch" in sys.modules,
                      "megatron_core_imported": "megatron.core" in sys.modules,
                      "params_dtype_type": type(args.params_dtype).__module__ + "."
                                           + type(args.params_dtype).__name__}))
""")
#: The facade with torch dtypes in a process that imported torch first: what the dtypes
#: cost once torch is there (megaplug's conversion, and megatron.core's enums and
#: registration where Megatron is installed), apart from torch's own import.
TORCH_FIRST = "import torch\n" + FACADE


def bench_torch_types(repeat: int) -> None:
    print("\n9. the Megatron facade with torch dtypes (the only path that imports torch)")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        facade = directory / "facade.py"
        facade.write_text(FACADE)
        data_file = directory / "case.json"
        data_file.write_text(json.dumps(case(CONFIGS["dense GPT"])))
        torch_first = directory / "torch_first.py"
        torch_first.write_text(TORCH_FIRST)
        runs = {
            "import torch": [sys.executable, "-c", "import torch"],
            "facade, plain dtypes": [sys.executable, str(facade), str(data_file), "plain"],
            "facade, torch dtypes": [sys.executable, str(facade), str(data_file), "torch"],
            "import torch; facade, plain": [sys.executable, str(torch_first), str(data_file),
                                            "plain"],
            "import torch; facade, torch": [sys.executable, str(torch_first), str(data_file),
                                            "torch"],
        }
        for mode in ("plain", "torch"):
            out = subprocess.run(runs[f"facade, {mode} dtypes"], capture_output=True, text=True,
                                 env=_with_bytecode(None), check=True).stdout
            # the last line: with torch dtypes the facade prints Megatron's argument table first,
            # as Megatron's own parse_and_validate_args does
            facts = json.loads(out.strip().splitlines()[-1])
            print(f"  {mode} dtypes: torch imported {facts['torch_imported']}, "
                  f"megatron.core imported {facts['megatron_core_imported']}, "
                  f"params_dtype is {facts['params_dtype_type']}")
            target(f"facade with {mode} dtypes imports torch only if asked",
                   f"torch imported: {facts['torch_imported']}",
                   facts["torch_imported"] is (mode == "torch"))
        samples = interleaved(runs, repeat)
        inside: dict[str, list[float]] = {mode: [] for mode in ("plain", "torch")}
        for _ in range(repeat):
            for mode in inside:
                out = subprocess.run(runs[f"import torch; facade, {mode}"], text=True,
                                     capture_output=True, env=_with_bytecode(None),
                                     check=True).stdout
                inside[mode].append(json.loads(out.strip().splitlines()[-1])["seconds"])
    for name, values in samples.items():
        print(f"    {name:<28} {stats(values)}")
    # The verdict: in processes that imported torch first, the facade's own time (from after
    # ``import torch`` to the namespace), with torch dtypes against plain ones. Whole-process
    # times carry torch's import, which varies by hundreds of ms between runs of the same
    # process even on a quiet node; they are shown for context.
    for mode, values in inside.items():
        print(f"    facade after import torch, {mode:<5} {stats(values)}")
    own = statistics.median(inside["torch"]) - statistics.median(inside["plain"])
    target("torch dtypes add <= 25 ms to the facade (torch imported first)",
           f"{own * 1e3:+.1f} ms (megatron.core imported: {facts['megatron_core_imported']})",
           own <= 0.025)
    after_torch = (statistics.median(samples["import torch; facade, torch"])
                   - statistics.median(samples["import torch; facade, plain"]))
    target("whole processes that imported torch first: torch dtypes beyond plain",
           f"{after_torch * 1e3:+.1f} ms", None)
    extra = (statistics.median(samples["facade, torch dtypes"])
             - statistics.median(samples["facade, plain dtypes"])
             - statistics.median(samples["import torch"]))
    target("torch dtypes beyond a separate bare import torch process",
           f"{extra * 1e3:+.1f} ms", None)


# -- 11. megaplug plan ------------------------------------------------------------------

#: The issue's plan case: a 70B dense model (Llama-3-70B-like) on 1,024 GPUs.
PLAN_70B = ["--num-layers", "80", "--hidden-size", "8192", "--ffn-hidden-size", "28672",
            "--num-attention-heads", "64", "--group-query-attention", "--num-query-groups", "8",
            "--swiglu", "--normalization", "RMSNorm", "--position-embedding-type", "rope",
            "--untie-embeddings-and-output-weights", "--disable-bias-linear",
            "--vocab-size", "128256", "--seq-length", "4096", "--max-position-embeddings",
            "4096", "--bf16", "--attention-dropout", "0", "--hidden-dropout", "0"]


def bench_plan(repeat: int) -> None:
    print("\n11. megaplug plan: a 70B dense model on 1,024 GPUs, the whole command")
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1")
    command = [*megaplug_command(), "plan", "--gpus", "1024", "--device-memory", "79.2GiB",
               "--global-batch-size", "1024", "--top", "10", "--", *PLAN_70B]
    samples = [wall(command, env) for _ in range(max(3, repeat // 3))]
    print(f"  {stats(samples)}")
    target("plan 70B on 1,024 GPUs under 2 s", f"{statistics.median(samples) * 1e3:.0f} ms",
           statistics.median(samples) < 2.0)


# -- 12. megaplug memory's own work ----------------------------------------------------------

def bench_memory_report(repeat: int) -> None:
    print("\n12. megaplug memory beyond resolving: estimate, table and JSON of 1,024 ranks;"
          " estimating 16 stages of a 4,096-rank job")
    from megaplug.cli._memory import _one_rank_a_line
    from megaplug_memory.estimator import estimate
    from megaplug_memory.report import memory_report

    values = {"world_size": 1024, "num_layers": 32, "hidden_size": 4096,
              "num_attention_heads": 32, "seq_length": 4096, "micro_batch_size": 1,
              "vocab_size": 32000, "bf16": True, "tensor_model_parallel_size": 4,
              "pipeline_model_parallel_size": 4, "data_parallel_size": 64}

    def report() -> None:
        answer = memory_report(values, 80 * 10**9)
        answer.as_text(), _one_rank_a_line(answer.as_dict())

    large = {**values, "world_size": 4096, "num_layers": 128, "pipeline_model_parallel_size": 16,
             "tensor_model_parallel_size": 1, "data_parallel_size": 256,
             "global_batch_size": 4096}
    for label, work in (("report of 1,024 ranks", report),
                        ("estimate of 16 stages", lambda: estimate(large))):
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            work()
            samples.append(time.perf_counter() - started)
        median = statistics.median(samples)
        print(f"  {label}: {stats(samples)}")
        target(f"{label} under 50 ms", f"{median * 1e3:.1f} ms", median < 0.05)


#: The example plugin (examples/megaplug-example-plugin): a development checkout installs it,
#: a deployment never does.
EXAMPLE_PLUGIN = "lora"


def block_the_example() -> None:
    """Block the example plugin in this process and every process it measures (they inherit
    ``MEGAPLUG_DISABLE``), as a deployment has no example plugin to import."""
    blocked = [name.strip() for name in os.environ.get("MEGAPLUG_DISABLE", "").split(",")
               if name.strip()]
    os.environ["MEGAPLUG_DISABLE"] = ",".join(dict.fromkeys([*blocked, EXAMPLE_PLUGIN]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--write", metavar="FILE", help="also write the results as Markdown")
    parser.add_argument("--only", nargs="*", help="run only these sections (1-12)")
    parser.add_argument("--with-example", action="store_true",
                        help=f"keep the example plugin ({EXAMPLE_PLUGIN}) where it is "
                             "installed (by default it is blocked: a deployment has none)")
    options = parser.parse_args()
    if not options.with_example:
        block_the_example()
    sections = {"1": bench_import, "2": bench_resolve_process, "3": bench_tensor_parallel,
                "4": bench_commands, "5": bench_resolve_in_process, "6": bench_discovery_cache,
                "7": bench_scaling, "8": bench_side_effects, "9": bench_torch_types,
                "10": bench_interop, "11": bench_plan, "12": bench_memory_report}
    load_before = os.getloadavg()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, repeat={options.repeat}, "
          f"load average {load_before[0]:.1f}, example plugin "
          f"{'kept' if options.with_example else 'blocked'}")
    for key, function in sections.items():
        if options.only and key not in options.only:
            continue
        if key == "8":
            function()
        else:
            function(options.repeat)
    failed = [name for name, _, ok in RESULTS if ok is False]
    load = f"load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    print(f"\n{len(RESULTS) - len(failed)}/{len(RESULTS)} targets met ({load})")
    if options.write:
        lines = [f"Python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
                 f"`--repeat {options.repeat}`, example plugin "
                 f"{'kept' if options.with_example else 'blocked'}, {load}.", "",
                 "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {name} | {value} | {'INFO' if ok is None else 'PASS' if ok else 'FAIL'} |"
                  for name, value, ok in RESULTS]
        table = "\n".join(lines) + "\n"
        path = Path(options.write)
        text = path.read_text() if path.exists() else ""
        # between the markers: what follows the end marker (other machines' runs) stays
        head, _, rest = text.partition("<!-- results -->")
        tail = rest.partition("<!-- /results -->")[2] if "<!-- /results -->" in rest else ""
        path.write_text(f"{head}<!-- results -->\n{table}<!-- /results -->{tail}")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
