"""examples/train_gpt.py: resolved by megaplug, trains, checkpoints, runs data parallel.

The training runs are subprocesses on the 2-iteration config (plus a few iterations where
the test needs them); the torchrun ones use ``python -m torch.distributed.run`` with gloo.
Every run here is on the CPU, also on a machine with GPUs (subprocesses get
``CUDA_VISIBLE_DEVICES=``, in-process runs see no GPU), except the ``gpu`` tests, which
run only where torch sees a GPU. Tests that need torch are skipped only when torch is not
importable.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import math
import os
import re
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPT = EXAMPLES / "train_gpt.py"
TWO_ITER = EXAMPLES / "configs" / "tiny-gpt-2iter.yaml"
LOG_LINE = re.compile(r"^iteration\s+(\d+)/(\d+) \| loss (\S+) \| lr (\S+) \|", re.M)
RATE = re.compile(r"^iteration\s+(\d+)/\d+ \| loss \S+ \| lr \S+ \| grad norm \S+ \| "
                  r"tokens/s (\d{1,3}(?:,\d{3})*)$", re.M)

try:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch

    HAVE_TORCH = True
    HAVE_GPU = torch.cuda.is_available()
except ImportError:  # pragma: no cover - CI installs torch
    HAVE_TORCH = HAVE_GPU = False
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not importable")
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="torch sees no GPU")


def load_script():
    spec = importlib.util.spec_from_file_location("train_gpt_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


train_gpt = load_script()


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without launcher variables, on the CPU unless ``extra`` says else."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
           and not k.startswith(train_gpt.TEST_EXTRA_ARGS)}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", **extra)
    return env


def train(*args: str, nproc: int = 1, env: dict[str, str] | None = None,
          timeout: int = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT)]
    if nproc > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc-per-node={nproc}", str(SCRIPT)]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env or clean_env(), timeout=timeout)


def losses(output: str) -> dict[int, float]:
    return {int(m.group(1)): float(m.group(3)) for m in LOG_LINE.finditer(output)}


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


# -- the parts, in process -------------------------------------------------------------


def test_config_files_layer_on_the_default_config() -> None:
    default = ["--config", str(train_gpt.DEFAULT_CONFIG)]
    assert train_gpt.command_line([], {}) == default
    assert train_gpt.command_line(["--config=x.yaml"], {}) == [*default, "--config=x.yaml"]
    assert train_gpt.command_line(["--config", "x.yaml", "--config", "y.yaml"], {}) == [
        *default, "--config", "x.yaml", "--config", "y.yaml"]


def test_a_layered_config_keeps_the_default_configs_other_settings(tmp_path) -> None:
    more = tmp_path / "more.yaml"
    more.write_text("hidden_size: 128\n")
    args = train_gpt.resolve_args(["--config", str(more)], {})
    assert (args.hidden_size, args.num_layers, args.train_iters) == (128, 2, 60)


def test_the_safe_loader_allows_a_plugin_enum_not_imported_yet(monkeypatch) -> None:
    # A resolve served from megaplug's cache imports no plugin module; the checkpoint that a
    # cold process wrote must still load (issue 32: --use-checkpoint-args after a warm cache).
    enums = importlib.import_module("megaplug_inference.enums")
    monkeypatch.delitem(sys.modules, "megaplug_inference.enums")
    name = "megaplug_inference.enums.InferenceCudaGraphScope"
    found = train_gpt.allowed_global(name, {"megaplug_inference"})
    assert found is not None and found.__name__ == "InferenceCudaGraphScope"
    assert issubclass(found, enums.enum.Enum)
    assert train_gpt.allowed_global(name, {"megaplug_moe"}) is None  # not that plugin's module
    assert train_gpt.allowed_global("megaplug_inference.nowhere.X", {"megaplug_inference"}) is None
    assert train_gpt.allowed_global("os.system", {"megaplug_inference"}) is None


def test_test_only_extra_arguments_apply_to_their_rank() -> None:
    env = {"RANK": "1", "TRAIN_GPT_EXTRA_ARGS_RANK1": "--seed 7"}
    default = ["--config", str(train_gpt.DEFAULT_CONFIG)]
    assert train_gpt.command_line(["--config", "c"], env) == [
        *default, "--config", "c", "--seed", "7"]
    assert train_gpt.command_line(["--config", "c"], {**env, "RANK": "0"}) == [
        *default, "--config", "c"]


def test_help_documents_the_embedded_config(capsys) -> None:
    assert train_gpt.main(["--help"], {}) == 0
    assert "examples/configs/tiny-gpt.yaml" in capsys.readouterr().out


def test_configuration_errors_exit_2_with_every_problem() -> None:
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = train_gpt.main(["--num-layers", "two", "--no-such-flag"], clean_env())
    assert code == 2
    text = err.getvalue()
    assert "--num-layers: invalid int value 'two'" in text
    assert "--no-such-flag" in text


def test_fingerprint_is_canonical_and_ignores_per_rank_keys() -> None:
    import enum

    class Backend(enum.Enum):
        auto = 1

    a = argparse.Namespace(rank=0, local_rank=0, lr=0.1, layers=[1, 2], backend=Backend.auto,
                           _megaplug_kernel=object())
    b = argparse.Namespace(backend=Backend.auto, layers=(1, 2), lr=0.1, rank=1, local_rank=1)
    values = train_gpt.fingerprint_values(a)
    assert values == {"backend": "Backend.auto", "layers": [1, 2], "lr": 0.1}
    assert train_gpt.fingerprint(values) == train_gpt.fingerprint(train_gpt.fingerprint_values(b))
    c = argparse.Namespace(**{**vars(b), "lr": 0.2})
    assert train_gpt.fingerprint(values) != train_gpt.fingerprint(train_gpt.fingerprint_values(c))


def test_differing_keys_name_each_ranks_value() -> None:
    diff = train_gpt.differing_keys([{"seed": 1, "lr": 0.1}, {"seed": 7, "lr": 0.1, "x": 1}])
    assert diff == {"seed": [1, 7], "x": ["<not set>", 1]}


def test_vocab_padding_follows_megatron() -> None:
    sys.path.insert(0, str(EXAMPLES))
    from tiny_tokenizer import ByteTokenizer, vocab_size_with_padding

    assert ByteTokenizer().vocab_size == 257
    assert vocab_size_with_padding(257, 128) == 384
    assert vocab_size_with_padding(257, 128, tensor_model_parallel_size=2) == 512
    assert vocab_size_with_padding(256, 64) == 256
    text = "héllo"
    assert ByteTokenizer().detokenize(ByteTokenizer().tokenize(text) + [256]) == text


@pytest.mark.parametrize("style, step, expected", [
    ("constant", 1, 0.5), ("linear", 2, 1.0), ("constant", 10, 1.0),
    ("linear", 6, 0.55), ("cosine", 6, 0.55),
    ("cosine", 3, 0.1 + 0.9 * 0.5 * (math.cos(math.pi / 8) + 1)), ("linear", 11, 0.1),
    ("linear", 50, 0.1)])
def test_learning_rate_schedule(style: str, step: int, expected: float) -> None:
    args = argparse.Namespace(lr=1.0, min_lr=0.1, lr_warmup_init=0.0, lr_decay_iters=None,
                              train_iters=10, lr_warmup_fraction=None, lr_warmup_iters=2,
                              lr_decay_style=style)
    assert train_gpt.LRSchedule(args).lr(step) == pytest.approx(expected)


def test_split_weights() -> None:
    assert train_gpt.split_weights(None) == [95.0, 5.0]
    assert train_gpt.split_weights("969, 30, 1") == [969.0, 30.0]
    assert train_gpt.split_weights("100,0,0") == [100.0, 5.0]


def test_tokens_per_second_counts_every_rank() -> None:
    # 3 iterations of a global batch of 8 windows of 32 tokens in 2 s
    assert train_gpt.tokens_per_second(3, 8, 32, 2.0) == 384.0
    assert train_gpt.tokens_per_second(1, 8, 32, 0.0) > 0  # no division by zero


# -- device selection ---------------------------------------------------------------------


@pytest.mark.parametrize("local_rank, gpus, expected", [
    (0, 0, "cpu"), (5, 0, "cpu"), (0, 1, "cuda:0"), (1, 2, "cuda:1"), (7, 8, "cuda:7")])
def test_device_is_the_local_ranks_gpu_else_the_cpu(local_rank: int, gpus: int,
                                                    expected: str) -> None:
    assert train_gpt.pick_device(local_rank, gpus) == expected


def test_a_local_rank_without_a_gpu_of_its_own_stops_the_run() -> None:
    with pytest.raises(train_gpt.TrainingError,
                       match=r"LOCAL_RANK 2 has no GPU of its own: this node shows 2 "
                             r"\(launch at most 2 process\(es\) per node"):
        train_gpt.pick_device(2, 2)


@pytest.mark.parametrize("requested, device, expected", [
    ("nccl", "cuda:0", "nccl"), (None, "cuda:1", "nccl"), ("gloo", "cuda:0", "gloo"),
    ("nccl", "cpu", "gloo"), ("gloo", "cpu", "gloo")])
def test_backend_is_nccl_on_gpus_and_gloo_on_the_cpu(requested: str | None, device: str,
                                                     expected: str) -> None:
    assert train_gpt.pick_backend(requested, device) == expected


def resolved(*flags: str, **environ: str) -> argparse.Namespace:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", **environ}
    return train_gpt.resolve_args(["--config", str(TWO_ITER), *flags], env)


def test_placement_from_the_resolved_arguments() -> None:
    placement = train_gpt.placement_for(resolved("--bf16"), gpu_count=2)
    assert placement == train_gpt.Placement("cuda:1", "nccl", "bfloat16")
    assert placement.on_gpu and placement.collective_device == "cuda:1"

    on_cpu = train_gpt.placement_for(resolved("--bf16"), gpu_count=0)
    assert on_cpu == train_gpt.Placement("cpu", "gloo", None)
    assert not on_cpu.on_gpu and on_cpu.collective_device == "cpu"

    fp32 = train_gpt.placement_for(resolved(), gpu_count=2)
    assert (fp32.device, fp32.autocast_dtype) == ("cuda:1", None)
    # gloo on GPUs: it cannot gather GPU tensors, so the collectives stay on the CPU
    gloo = train_gpt.placement_for(resolved("--distributed-backend", "gloo"), gpu_count=2)
    assert (gloo.device, gloo.backend, gloo.collective_device) == ("cuda:1", "gloo", "cpu")


@needs_torch
def test_autocast_is_bf16_on_the_gpu_and_absent_otherwise() -> None:
    import contextlib

    assert isinstance(train_gpt.Placement("cpu", "gloo").autocast(), contextlib.nullcontext)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available" where it is not
        region = train_gpt.Placement("cuda:0", "nccl", "bfloat16").autocast()
    assert isinstance(region, torch.autocast)
    assert (region.device, region.fast_dtype) == ("cuda", torch.bfloat16)


# -- training runs ------------------------------------------------------------------------


def train_here(*args: str) -> tuple[int, str, str]:
    """Run the script's main() in this process, on the CPU (saves a torch import per run)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), \
            mock.patch.object(train_gpt, "visible_gpu_count", return_value=0):
        code = train_gpt.main(list(args), clean_env())
    return code, out.getvalue(), err.getvalue()


def ok_here(*args: str) -> str:
    code, out, err = train_here(*args)
    assert code == 0, f"stdout:\n{out}\nstderr:\n{err}"
    return out


@pytest.fixture(scope="module")
def twelve_iterations() -> str:
    """One command-line run of 12 iterations, shared by the tests that compare with it."""
    if not HAVE_TORCH:
        pytest.skip("torch is not importable")
    return ok(train("--config", str(TWO_ITER), "--train-iters", "12", "--lr-decay-iters", "12"))


@needs_torch
def test_loss_goes_down_on_the_shipped_corpus(twelve_iterations: str) -> None:
    found = losses(twelve_iterations)
    assert sorted(found) == list(range(1, 13))
    assert all(math.isfinite(v) for v in found.values())
    assert found[12] < found[1] - 0.5, found
    assert "done: 12 iterations" in twelve_iterations
    assert "data parallel size 1" in twelve_iterations
    assert "device: cpu | 1 process | no autocast" in twelve_iterations


@needs_torch
def test_every_log_line_and_the_summary_give_tokens_per_second(twelve_iterations: str) -> None:
    rates = {int(m.group(1)): int(m.group(2).replace(",", ""))
             for m in RATE.finditer(twelve_iterations)}
    assert sorted(rates) == list(range(1, 13))
    assert all(rate > 0 for rate in rates.values())
    done = re.search(r"^done: .* \| tokens/s ([\d,]+) \| last iteration 12 ",
                     twelve_iterations, re.M)
    assert done and int(done.group(1).replace(",", "")) > 0
    assert "GPU memory" not in twelve_iterations  # a CPU run has none to report


@needs_torch
def test_checkpoint_round_trip_resumes_at_the_saved_iteration(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    first = ok_here("--config", str(TWO_ITER), "--train-iters", "4", "--save", str(save),
                    "--save-interval", "2")
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    for iteration in (2, 4):
        assert (save / f"iter_{iteration:07d}" / "mp_rank_00" / "model_optim_rng.pt").is_file()

    state = train_gpt.safe_load(save / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt")
    assert state["iteration"] == 2
    assert {"model", "optimizer", "opt_param_scheduler", "rng_state", "args"} <= set(state)
    args = state["args"]
    assert isinstance(args, argparse.Namespace)
    assert (args.num_layers, args.hidden_size, args.iteration) == (2, 32, 2)
    assert args.consumed_train_samples == 16
    assert args.normalization == "RMSNorm" and args.swiglu is True
    assert str(args.params_dtype) == "torch.float32"
    assert not any(k.startswith("_") for k in vars(args))

    # resume from iteration 2: the same iterations 3 and 4, with the same losses
    (save / "latest_checkpointed_iteration.txt").write_text("2\n")
    resumed = ok_here("--config", str(TWO_ITER), "--train-iters", "4", "--load", str(save))
    assert f"loaded {save / 'iter_0000002' / 'mp_rank_00' / 'model_optim_rng.pt'} (iteration 2)" \
        in resumed
    before, after = losses(first), losses(resumed)
    assert sorted(after) == [3, 4]
    assert after[3] == pytest.approx(before[3], rel=1e-5)
    assert after[4] == pytest.approx(before[4], rel=1e-5)

    # a different architecture does not fit the checkpoint ...
    code, _, err = train_here("--config", str(TWO_ITER), "--load", str(save), "--train-iters",
                              "5", "--normalization", "LayerNorm")
    assert code == 1
    assert "does not fit the configured model" in err and "--use-checkpoint-args" in err
    # ... unless the architecture comes from the checkpoint (normalization is forced)
    with_args = ok_here("--config", str(TWO_ITER), "--load", str(save), "--train-iters", "3",
                        "--normalization", "LayerNorm", "--use-checkpoint-args")
    assert sorted(losses(with_args)) == [3]


def save_as_if_on_a_gpu(state: dict, path: Path) -> None:
    """torch.save ``state`` with every tensor tagged ``cuda:0``, as a GPU run writes it,
    and a GPU generator state beside the CPU one."""
    state["rng_state"][0]["cuda_rng_state"] = torch.zeros(16, dtype=torch.uint8)
    with mock.patch.object(torch.serialization, "location_tag", return_value="cuda:0"):
        torch.save(state, path)


@needs_torch
def test_a_checkpoint_written_on_a_gpu_resumes_on_the_cpu(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    first = ok_here("--config", str(TWO_ITER), "--train-iters", "4", "--save", str(save),
                    "--save-interval", "2")
    path = save / "iter_0000002" / "mp_rank_00" / "model_optim_rng.pt"
    save_as_if_on_a_gpu(train_gpt.safe_load(path), path)
    if not HAVE_GPU:  # the file really asks for a GPU: torch.load without map_location fails
        with pytest.raises(RuntimeError, match="deserialize object on a CUDA device"):
            torch.load(path, weights_only=False)
    state = train_gpt.safe_load(path)  # maps every tensor to the CPU
    assert state["model"]["word_embeddings.weight"].device.type == "cpu"

    (save / "latest_checkpointed_iteration.txt").write_text("2\n")
    resumed = ok_here("--config", str(TWO_ITER), "--train-iters", "4", "--load", str(save))
    assert f"loaded {path} (iteration 2)" in resumed
    before, after = losses(first), losses(resumed)
    assert sorted(after) == [3, 4]
    assert after[3] == pytest.approx(before[3], rel=1e-5)
    assert after[4] == pytest.approx(before[4], rel=1e-5)

    # what scripts/gpu-check-example.sh makes of such a resumed run
    parser = gpu_check_parser(tmp_path)
    seen = run_parser(parser, "resume", resumed, "cpu", "2")
    assert (seen.returncode, seen.stdout) == (0, f"on cpu, loaded iteration 2, final loss "
                                                 f"{after[4]:.4f}\n")
    assert run_parser(parser, "resume", resumed, "cuda", "2").returncode == 1


@needs_torch
def test_safe_loader_refuses_other_globals(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "evil.pt"
    torch.save({"args": argparse.Namespace(x=1), "payload": Path("/tmp")}, path)
    with pytest.raises(train_gpt.TrainingError, match="does not construct"):
        train_gpt.safe_load(path)


@needs_torch
def test_bf16_params_with_fp32_main_params() -> None:
    out = ok_here("--config", str(TWO_ITER), "--bf16")
    assert "31,456 parameters, bfloat16" in out
    assert all(math.isfinite(v) for v in losses(out).values())


@needs_torch
def test_two_ranks_agree_and_match_the_single_process_run(twelve_iterations: str) -> None:
    out = ok(train("--config", str(TWO_ITER), nproc=2, timeout=180))
    assert re.search(r"configuration [0-9a-f]{64} agreed by 2 rank\(s\); data parallel size 2",
                     out)
    # the config asks for no backend, so Megatron's nccl, which the CPU cannot run
    assert "device: cpu | 2 processes over gloo | no autocast" in out
    assert "micro 4 x 1 micro-batches x data parallel 2" in out
    assert out.count("done: 2 iterations") == 1  # only rank 0 prints
    parallel = losses(out)
    assert sorted(parallel) == [1, 2] and all(math.isfinite(v) for v in parallel.values())
    # The global batches are the same windows either way, and the first two steps use the
    # same learning rate: data parallelism changes nothing.
    single = losses(twelve_iterations)
    for iteration in (1, 2):
        assert parallel[iteration] == pytest.approx(single[iteration], rel=1e-4)


@needs_torch
def test_the_ddp_hook_averages_bf16_gradients_in_fp32() -> None:
    import torch.distributed as dist

    grads = torch.tensor([1.0, 3.0, 1 / 3], dtype=torch.bfloat16)
    expected = grads.clone()
    bucket = mock.Mock()
    bucket.buffer.return_value = grads
    reduced_dtypes = []

    def all_reduce(tensor, group, async_op):  # three ranks holding the same gradients
        reduced_dtypes.append(tensor.dtype)
        tensor.mul_(3)
        future = torch.futures.Future()
        future.set_result([tensor])
        return mock.Mock(get_future=lambda: future)

    with mock.patch.object(dist, "all_reduce", all_reduce), \
            mock.patch.object(dist, "get_world_size", return_value=3):
        result = train_gpt.average_in_fp32(object(), bucket).wait()
    assert reduced_dtypes == [torch.float32]
    assert result is grads and result.dtype == torch.bfloat16  # written back into the bucket
    assert torch.equal(result, expected)


@needs_torch
def test_bf16_data_parallel_with_accumulation_matches_one_process() -> None:
    # 2 ranks x 2 micro-batches: DDP reduces once per step (no_sync before the last
    # micro-batch), the bf16 gradients averaged in fp32 by the communication hook.
    flags = ("--config", str(TWO_ITER), "--bf16", "--global-batch-size", "16",
             "--train-iters", "3")
    out = ok(train(*flags, nproc=2, timeout=180))
    assert "device: cpu | 2 processes over gloo | no autocast" in out
    assert "micro 4 x 2 micro-batches x data parallel 2" in out
    single = losses(ok_here(*flags))
    parallel = losses(out)
    assert sorted(parallel) == [1, 2, 3]
    for iteration in (1, 2, 3):
        assert parallel[iteration] == pytest.approx(single[iteration], rel=1e-3)


@needs_torch
def test_ranks_with_different_configurations_stop_naming_the_key(tmp_path: Path) -> None:
    env = clean_env(TRAIN_GPT_EXTRA_ARGS_RANK1="--seed 7")
    result = train("--config", str(TWO_ITER), nproc=2, env=env, timeout=180)
    assert result.returncode != 0
    expected = ("ranks resolved different configurations; differing settings: "
                "seed (rank 0: 1234, rank 1: 7)")
    for rank in (0, 1):
        assert f"[rank {rank}] error: {expected}" in result.stderr, result.stderr
    assert "done:" not in result.stdout
    seen = run_parser(gpu_check_parser(tmp_path), "mismatch", result.stderr)
    assert (seen.returncode, seen.stdout) == (0, "stopped naming seed (rank 0: 1234, rank 1: 7)\n")


@needs_torch
def test_lora_adapters_train_when_the_example_plugin_is_installed() -> None:
    from importlib import metadata

    # scripts/setup.sh installs it: a missing plugin is a failure, not a skip
    assert metadata.distribution("megaplug-example-plugin")
    out = ok_here("--config", str(TWO_ITER), "--lora-rank", "4", "--lora-alpha", "8",
                  "--train-iters", "3")
    assert "LoRA: rank 4, scaling 2, 4 adapted layers (linear_qkv, linear_proj)" in out
    assert sorted(losses(out)) == [1, 2, 3]
    code, _, err = train_here("-p", "no:lora", "--config", str(TWO_ITER), "--lora-rank", "4")
    assert code == 2
    assert "--lora-rank belongs to plugin 'lora', which is blocked" in err


# -- scripts/gpu-check-example.sh ----------------------------------------------------------

GPU_CHECK = ROOT / "scripts" / "gpu-check-example.sh"


def gpu_check_parser(tmp_path: Path) -> Path:
    """The script's embedded log parser, as the script writes it out."""
    found = re.search(r"^cat >\"\$CHECK\" <<'PY'\n(.*?)^PY$", GPU_CHECK.read_text(), re.M | re.S)
    assert found, "the script no longer embeds check.py"
    path = tmp_path / "check.py"
    path.write_text(found.group(1))
    return path


def run_parser(parser: Path, kind: str, log_text: str, *extra: str) -> subprocess.CompletedProcess:
    log = parser.with_name(f"{kind}.log")
    log.write_text(log_text)
    return subprocess.run([sys.executable, str(parser), kind, str(log), *extra],
                          capture_output=True, text=True, timeout=60)


def test_gpu_check_script_is_valid_bash() -> None:
    result = subprocess.run(["bash", "-n", str(GPU_CHECK)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_torch
def test_gpu_check_script_reads_the_training_log(twelve_iterations: str,
                                                 tmp_path: Path) -> None:
    parser = gpu_check_parser(tmp_path)
    on_cpu = run_parser(parser, "train", twelve_iterations)
    assert on_cpu.returncode == 1  # a CPU run is not what the step wants
    assert re.fullmatch(r"device cpu \| 1 process \| no autocast; 31,456 parameters in float32; "
                        r"tokens/s [\d,]+ at iteration 12; 12 iterations in [\d.]+ s, tokens/s "
                        r"[\d,]+ after the first; no GPU memory reported\n", on_cpu.stdout)

    # the same log with the lines a GPU run prints instead, made by the script's own code
    with mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0)), \
            mock.patch.object(torch.cuda, "get_device_name", return_value="NVIDIA H200"):
        device = train_gpt.describe(train_gpt.Placement("cuda:0", "nccl", "bfloat16"), 1)
    summary = {"iterations": 30, "last_iteration": 30, "first_loss": 5.5, "final_loss": 3.25,
               "seconds": 9.5, "tokens_per_second": 123456.0, "max_gpu_memory_mib": 2345.4}
    done = io.StringIO()
    with redirect_stdout(done):
        train_gpt.print_summary(summary, "f" * 64,
                                train_gpt.Dist(argparse.Namespace(rank=0, world_size=1)))
    gpu_log = re.sub(r"^device: .*$", device, twelve_iterations, flags=re.M)
    gpu_log = re.sub(r"^done: .*$", done.getvalue().strip(), gpu_log, flags=re.M)
    on_gpu = run_parser(parser, "train", gpu_log)
    assert on_gpu.returncode == 0, on_gpu.stdout
    assert re.fullmatch(r"device cuda:0 \(NVIDIA H200, compute capability 9\.0\) \| 1 process \| "
                        r"bfloat16 autocast; 31,456 parameters in float32; tokens/s [\d,]+ at "
                        r"iteration 12; 30 iterations in 9\.5 s, tokens/s 123,456 after the "
                        r"first; max GPU memory allocated 2,345 MiB\n", on_gpu.stdout)


# -- on a GPU (skipped where torch sees none) -----------------------------------------------


def train_on_gpu(*args: str) -> str:
    """A subprocess run that sees this machine's GPUs."""
    env = clean_env()
    env.pop("CUDA_VISIBLE_DEVICES")
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return ok(train(*args, env=env))


@needs_gpu
def test_gpu_bf16_run_on_cuda_0_with_autocast() -> None:
    out = train_on_gpu("--config", str(TWO_ITER), "--bf16", "--train-iters", "4")
    assert re.search(r"^device: cuda:0 \(.+, compute capability \d+\.\d+\) \| 1 process \| "
                     r"bfloat16 autocast$", out, re.M), out
    assert "parameters, bfloat16" in out
    assert sorted(losses(out)) == [1, 2, 3, 4]
    assert re.search(r"\| max GPU memory allocated [\d,]+ MiB \|", out)


@needs_gpu
def test_gpu_checkpoints_resume_on_the_cpu_and_back(tmp_path: Path) -> None:
    flags = ("--config", str(TWO_ITER), "--save-interval", "2")
    gpu_dir, cpu_dir = tmp_path / "gpu", tmp_path / "cpu"
    train_on_gpu(*flags, "--train-iters", "2", "--save", str(gpu_dir))
    on_cpu = ok(train(*flags, "--train-iters", "4", "--load", str(gpu_dir),
                      "--save", str(cpu_dir)))
    assert "device: cpu" in on_cpu and "(iteration 2)" in on_cpu
    assert sorted(losses(on_cpu)) == [3, 4]
    back = train_on_gpu(*flags, "--train-iters", "6", "--load", str(cpu_dir))
    assert "device: cuda:0" in back and "(iteration 4)" in back
    assert sorted(losses(back)) == [5, 6]
