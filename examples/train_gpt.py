"""Train a small GPT, on a GPU or the CPU, with a configuration resolved by megaplug.

Usage::

    python examples/train_gpt.py                       # the embedded tiny-gpt config
    python examples/train_gpt.py --config my.yaml --train-iters 200 --lr 1e-3   # my.yaml over it
    torchrun --nproc-per-node 2 examples/train_gpt.py  # data parallel over 2 processes

Device: ``cuda:LOCAL_RANK`` when torch sees a GPU, else the CPU; no flag picks it
(``CUDA_VISIBLE_DEVICES=`` keeps a GPU machine on the CPU). Ranks talk over NCCL on GPUs
and gloo on the CPU (``--distributed-backend gloo`` keeps gloo on GPUs too); data
parallelism is torch's DistributedDataParallel. ``--bf16`` keeps bf16 parameters with fp32
main parameters as Megatron does, and on a GPU also runs the forward pass under bf16
autocast. Checkpoints load on either device whichever one wrote them.

The configuration is resolved exactly as a Megatron-style ``pretrain`` does it, through
``megaplug.megatron.parse_args`` / ``validate_args`` with ``args_defaults`` naming the
tokenizer: Megatron flags on the command line, ``--config FILE`` (YAML or JSON keyed by
dest, e.g. ``num_layers: 2``; repeatable, later files win, the command line wins over all
files) and ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` from the environment (torchrun
sets them). ``examples/configs/tiny-gpt.yaml`` comes first, and ``--config`` files layer on
it; alone, it trains in well under a minute on two CPU cores. ``-p NAME`` / ``-p no:NAME`` select
megaplug plugins as usual. ``megaplug flags`` lists every accepted flag.

What the run uses from the resolved arguments: the architecture (num_layers,
hidden_size, num_attention_heads, kv_channels, ffn_hidden_size, swiglu / squared_relu /
gelu, normalization, position_embedding_type, group_query_attention, dropouts, tied or
untied output), the vocabulary padded to make_vocab_size_divisible_by x
tensor_model_parallel_size, seq_length, micro / global batch size and data_parallel_size
(gradient accumulation = global / (micro x data parallel)), the learning-rate schedule
(lr, min_lr, lr_warmup_iters / lr_warmup_fraction, lr_decay_iters, lr_decay_style
constant / linear / cosine), optimizer adam / sgd, weight_decay, clip_grad, seed,
params_dtype (fp32, or bf16 with fp32 main parameters), train_iters, log_interval,
eval_interval / eval_iters, save / save_interval / load / finetune / no_load_optim /
no_load_rng / use_checkpoint_args, and ``--lora-*`` when the LoRA example plugin is
installed.

Checkpoints use Megatron's layout: ``<save>/latest_checkpointed_iteration.txt`` and
``<save>/iter_0000010/mp_rank_00/model_optim_rng.pt`` holding ``model``, ``optimizer``,
``opt_param_scheduler``, ``rng_state``, ``iteration`` and ``args`` (the resolved
namespace, plain values only), read back with ``torch.load(weights_only=True)``.

Data: ``--data-path FILE`` (a text file), else the shipped ``examples/data/corpus.txt``,
tokenized byte by byte (``examples/tiny_tokenizer.py``); ``--split`` divides it into
train / validation (default 95,5).

Torch runs one intra-op thread per process unless ``OMP_NUM_THREADS`` is set (torchrun
sets it to 1). Before training, every rank compares a fingerprint of its resolved configuration; if
they differ, every rank stops with an error naming the differing settings.
For tests only: ``TRAIN_GPT_EXTRA_ARGS_RANK<N>`` appends arguments on rank N.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import enum
import hashlib
import importlib
import json
import math
import os
import random
import shlex
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

HERE = Path(__file__).resolve().parent
DEFAULT_CONFIG = HERE / "configs" / "tiny-gpt.yaml"
DEFAULT_CORPUS = HERE / "data" / "corpus.txt"
TOKENIZER_TYPE = "NullTokenizer"
ARGS_DEFAULTS = {"tokenizer_type": TOKENIZER_TYPE, "vocab_size": 256}
#: Settings that legitimately differ between ranks; left out of the fingerprint.
PER_RANK_KEYS = frozenset({"rank", "local_rank"})
TEST_EXTRA_ARGS = "TRAIN_GPT_EXTRA_ARGS_RANK"

# torch warns at import when numpy is absent; this example never converts to numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


class TrainingError(Exception):
    """A problem that stops the run with a message instead of a traceback."""


# -- configuration -----------------------------------------------------------------------


def command_line(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The command line to resolve: the default config first, then ``argv``, then test extras.

    ``--config`` files given on the command line layer on the default one (later files win),
    as a user adding ``--config more.yaml`` to the documented command expects.
    """
    tokens = ["--config", str(DEFAULT_CONFIG), *argv]
    extra = environ.get(f"{TEST_EXTRA_ARGS}{environ.get('RANK', '0')}")
    if extra:
        tokens += shlex.split(extra)
    return tokens


def resolve_args(argv: Sequence[str], environ: Mapping[str, str]) -> argparse.Namespace:
    """Parse, apply checkpoint arguments if asked, then validate, as Megatron's initialize does."""
    from megaplug.megatron import parse_args, validate_args

    args = parse_args(argv=command_line(argv, environ), environ=environ)
    if getattr(args, "use_checkpoint_args", False):
        load_args_from_checkpoint(args)
    return validate_args(args, ARGS_DEFAULTS, environ=environ)


def canonical(value: Any) -> Any:
    """A JSON-stable form: enums as Class.member, dtypes and unknown objects as text."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    return str(value)


def fingerprint_values(args: argparse.Namespace) -> dict[str, Any]:
    """The resolved values every rank must agree on."""
    return {k: canonical(v) for k, v in sorted(vars(args).items())
            if not k.startswith("_") and k not in PER_RANK_KEYS}


def fingerprint(values: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``values``."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def differing_keys(per_rank: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Settings whose value is not the same on every rank, with each rank's value."""
    missing = "<not set>"
    keys = sorted(set().union(*per_rank))
    return {k: [values.get(k, missing) for values in per_rank] for k in keys
            if len({json.dumps(values.get(k, missing), sort_keys=True) for values in per_rank}) > 1}


def gather_json(value: Any, device: str = "cpu") -> list[Any]:
    """Every rank's ``value`` (JSON-serializable), in rank order.

    Like ``all_gather_object``, but as JSON bytes: nothing from another rank is unpickled,
    and it needs no numpy (``all_gather_object`` does, on CPU). ``device`` is where the
    backend takes its tensors: the rank's GPU for NCCL, the CPU for gloo.
    """
    import torch
    import torch.distributed as dist

    data = torch.tensor(list(json.dumps(value, sort_keys=True).encode("utf-8")),
                        dtype=torch.uint8, device=device)
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.long, device=device))
    longest = max(int(s) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[:data.numel()] = data
    buffers = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(buffers, padded)
    return [json.loads(bytes(b[:int(n)].tolist()).decode("utf-8")) for b, n in zip(buffers, sizes)]


def check_same_config(args: argparse.Namespace, device: str = "cpu") -> str:
    """Stop every rank if the ranks resolved different configurations; return the fingerprint.

    ``device`` holds the tensors of the exchange (see :func:`gather_json`).
    """
    import torch.distributed as dist

    values = fingerprint_values(args)
    mine = fingerprint(values)
    if not (dist.is_available() and dist.is_initialized()):
        return mine
    if len(set(gather_json(mine, device))) == 1:
        return mine
    diff = differing_keys(gather_json(values, device))
    shown = "; ".join(
        f"{key} ({', '.join(f'rank {r}: {json.dumps(v)}' for r, v in enumerate(vals))})"
        for key, vals in diff.items())
    raise TrainingError(f"ranks resolved different configurations; differing settings: {shown}")


def check_supported(args: argparse.Namespace) -> None:
    """Refuse settings this small example does not implement, all at once."""
    problems = []
    for dest in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                 "context_parallel_size", "expert_model_parallel_size"):
        if (getattr(args, dest, 1) or 1) > 1:
            problems.append(f"--{dest.replace('_', '-')} {getattr(args, dest)}: this example "
                            "only implements data parallelism; use 1")
    if args.tokenizer_type != TOKENIZER_TYPE:
        problems.append(f"--tokenizer-type {args.tokenizer_type}: this example tokenizes bytes; "
                        f"use {TOKENIZER_TYPE}")
    if args.optimizer not in ("adam", "sgd"):
        problems.append(f"--optimizer {args.optimizer}: this example supports adam and sgd")
    if args.lr_decay_style not in ("constant", "linear", "cosine"):
        problems.append(f"--lr-decay-style {args.lr_decay_style}: this example supports "
                        "constant, linear and cosine")
    if args.position_embedding_type not in ("learned_absolute", "rope"):
        problems.append(f"--position-embedding-type {args.position_embedding_type}: this "
                        "example supports learned_absolute and rope")
    if not args.train_iters:
        problems.append("--train-iters is required (sample-based training is not implemented)")
    if getattr(args, "fp16", False):
        problems.append("--fp16 needs loss scaling, which this example does not implement; "
                        "use --bf16 or fp32")
    if problems:
        raise TrainingError("unsupported settings:\n  - " + "\n  - ".join(problems))


# -- device ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """Where this process trains: its device, its ranks' backend, its autocast dtype."""

    device: str  # "cpu" or "cuda:N"
    backend: str  # "nccl" or "gloo"; unused by a single process
    autocast_dtype: str | None = None  # a torch dtype name, e.g. "bfloat16"

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def collective_device(self) -> str:
        """Where tensors handed to collectives live: NCCL takes GPU tensors, gloo CPU ones.

        (gloo reduces GPU tensors too, but does not gather them.)
        """
        return self.device if self.backend == "nccl" else "cpu"

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The forward pass's autocast region, or nothing when there is none."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self.device.partition(":")[0],
                              dtype=getattr(torch, self.autocast_dtype))


def pick_device(local_rank: int, gpu_count: int) -> str:
    """``cuda:LOCAL_RANK`` when this node has GPUs, else ``cpu``."""
    if gpu_count <= 0:
        return "cpu"
    if not 0 <= local_rank < gpu_count:
        raise TrainingError(
            f"LOCAL_RANK {local_rank} has no GPU of its own: this node shows {gpu_count} "
            f"(launch at most {gpu_count} process(es) per node, or train on the CPU with "
            "CUDA_VISIBLE_DEVICES=)")
    return f"cuda:{local_rank}"


def pick_backend(requested: str | None, device: str) -> str:
    """NCCL on GPUs unless gloo is asked for; gloo on the CPU, where NCCL cannot run."""
    if device.startswith("cuda") and requested != "gloo":
        return "nccl"
    return "gloo"


def placement_for(args: argparse.Namespace, gpu_count: int) -> Placement:
    """The device from ``local_rank`` and the GPUs present, the backend, the autocast.

    bf16 autocast only on a GPU: there it keeps norms and softmax in fp32 around bf16
    tensor-core matmuls; on the CPU the bf16 parameters already make every matmul bf16,
    and the run stays what it has always been.
    """
    device = pick_device(int(getattr(args, "local_rank", 0) or 0), gpu_count)
    autocast = "bfloat16" if device != "cpu" and getattr(args, "bf16", False) else None
    return Placement(device, pick_backend(getattr(args, "distributed_backend", None), device),
                     autocast)


def visible_gpu_count() -> int:
    """GPUs torch can use here (0 on a machine or torch build without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def use_device(placement: Placement) -> None:
    """Make the placement's GPU this process's current one (plain ``cuda`` means it)."""
    if placement.on_gpu:
        import torch

        torch.cuda.set_device(placement.device)


def describe(placement: Placement, world_size: int) -> str:
    """One line for the log: the device, and how the ranks talk."""
    device = placement.device
    if placement.on_gpu:
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        device += f" ({torch.cuda.get_device_name(device)}, compute capability {major}.{minor})"
    ranks = ("1 process" if world_size <= 1
             else f"{world_size} processes over {placement.backend}")
    autocast = f"{placement.autocast_dtype} autocast" if placement.autocast_dtype else "no autocast"
    return f"device: {device} | {ranks} | {autocast}"


# -- distributed -------------------------------------------------------------------------


class Dist:
    """The rank, world and data-parallel facts of this process, from the resolved arguments."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rank = int(args.rank or 0)
        self.world_size = int(args.world_size or 1)
        self.dp_size = int(getattr(args, "data_parallel_size", None) or self.world_size)
        self.dp_rank = self.rank % self.dp_size
        self.initialized = False
        self.collective_device = "cpu"

    def init(self, placement: Placement, timeout_minutes: int | None) -> None:
        """Join the process group over the placement's backend (nothing for one process)."""
        import torch
        import torch.distributed as dist

        if self.world_size <= 1:
            return
        options: dict[str, Any] = {}
        if placement.backend == "nccl":
            # bound to its GPU up front, the communicator is created there and now
            options["device_id"] = torch.device(placement.device)
        dist.init_process_group(placement.backend, rank=self.rank, world_size=self.world_size,
                                timeout=datetime.timedelta(minutes=timeout_minutes or 10),
                                **options)
        self.initialized = True
        self.collective_device = placement.collective_device

    def close(self, finished: bool = False) -> None:
        """Leave the process group; after a ``finished`` run, once every rank is done.

        The barrier lets the backend's threads finish all work before the group goes
        (gloo's may otherwise still be releasing tensors while the interpreter exits); a
        failed run skips it, since a rank that failed differently may never arrive.
        """
        import torch.distributed as dist

        if self.initialized and dist.is_initialized():
            if finished:
                dist.barrier()
            dist.destroy_process_group()

    def print(self, *parts: Any) -> None:
        if self.rank == 0:
            print(*parts, flush=True)

    def average(self, tensors: Sequence[Any]) -> None:
        """All-reduce ``tensors`` in place to their mean over data-parallel ranks."""
        if not self.initialized or not tensors:
            return
        import torch
        import torch.distributed as dist

        flat = torch.cat([t.reshape(-1) for t in tensors]).to(self.collective_device)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= self.dp_size
        offset = 0
        for tensor in tensors:
            tensor.copy_(flat[offset:offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()

    def barrier(self) -> None:
        if self.initialized:
            import torch.distributed as dist

            dist.barrier()


# -- data --------------------------------------------------------------------------------


def load_tokens(args: argparse.Namespace, device: str = "cpu") -> tuple[Any, Any]:
    """Train and validation token tensors on ``device``, split per ``--split``."""
    import torch
    from tiny_tokenizer import ByteTokenizer

    path = corpus_path(args)
    text = path.read_text(encoding="utf-8")
    tokens = torch.tensor(ByteTokenizer().tokenize(text), dtype=torch.long)
    weights = split_weights(getattr(args, "split", None))
    cut = int(len(tokens) * weights[0] / sum(weights))
    need = args.seq_length + 2
    if cut < need or len(tokens) - cut < need:
        raise TrainingError(f"{path} is too short for --seq-length {args.seq_length} with "
                            f"--split {getattr(args, 'split', None) or '95,5'}")
    tokens = tokens.to(device)
    return tokens[:cut], tokens[cut:]


def corpus_path(args: argparse.Namespace) -> Path:
    data_path = getattr(args, "data_path", None)
    if not data_path:
        return DEFAULT_CORPUS
    paths = [p for p in data_path if not p.replace(".", "", 1).isdigit()] \
        if isinstance(data_path, list) else [data_path]
    if len(paths) != 1:
        raise TrainingError("--data-path: this example reads one text file")
    path = Path(paths[0])
    if not path.is_file():
        raise TrainingError(f"--data-path {path}: no such text file")
    return path


def split_weights(split: str | None) -> list[float]:
    """Train and validation weights from Megatron's ``--split`` ("95,5" or "969, 30, 1")."""
    if not split:
        return [95.0, 5.0]
    parts = [float(p) for p in split.replace("/", ",").split(",") if p.strip()]
    train, valid = (parts + [0.0, 0.0])[:2]
    if train <= 0:
        raise TrainingError(f"--split {split}: the training share must be positive")
    return [train, valid if valid > 0 else 5.0]


def batch(tokens: Any, starts: Any, seq_length: int) -> tuple[Any, Any]:
    """Inputs and next-token labels for windows starting at ``starts``, on ``tokens``' device."""
    import torch

    offsets = torch.arange(seq_length + 1, device=tokens.device)
    rows = tokens[starts.to(tokens.device).unsqueeze(1) + offsets]  # one gather, not B slices
    return rows[:, :-1], rows[:, 1:]


def global_batch_starts(tokens: Any, seed: int, step: int, size: int, seq_length: int) -> Any:
    """Window starts of one global batch; a pure function of (seed, step), the same on every rank."""  # noqa: E501
    import torch

    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, len(tokens) - seq_length - 1, (size,), generator=generator)


# -- optimization ------------------------------------------------------------------------


class LRSchedule:
    """Megatron's learning-rate schedule in iterations: linear warmup, then decay to min_lr."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.max_lr = float(args.lr)
        self.min_lr = float(args.min_lr or 0.0)
        self.init_lr = float(getattr(args, "lr_warmup_init", 0.0) or 0.0)
        self.decay_iters = int(args.lr_decay_iters or args.train_iters)
        fraction = getattr(args, "lr_warmup_fraction", None)
        self.warmup_iters = (int(fraction * self.decay_iters) if fraction is not None
                             else int(args.lr_warmup_iters or 0))
        self.style = args.lr_decay_style
        self.num_steps = 0

    def lr(self, step: int) -> float:
        """The learning rate for the ``step``-th optimizer step (1-based)."""
        if self.warmup_iters > 0 and step <= self.warmup_iters:
            return self.init_lr + (self.max_lr - self.init_lr) * step / self.warmup_iters
        if self.style == "constant":
            return self.max_lr
        if step > self.decay_iters:
            return self.min_lr
        span = max(1, self.decay_iters - self.warmup_iters)
        ratio = (step - self.warmup_iters) / span
        coeff = 1.0 - ratio if self.style == "linear" else 0.5 * (math.cos(math.pi * ratio) + 1.0)
        return self.min_lr + coeff * (self.max_lr - self.min_lr)

    def step(self, optimizer: Any) -> float:
        self.num_steps += 1
        lr = self.lr(self.num_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    def state_dict(self) -> dict[str, Any]:
        return {"max_lr": self.max_lr, "min_lr": self.min_lr, "warmup_steps": self.warmup_iters,
                "decay_steps": self.decay_iters, "decay_style": self.style,
                "num_steps": self.num_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.num_steps = int(state["num_steps"])


class MainParams:
    """fp32 main copies of low-precision model parameters, as Megatron's mixed precision keeps.

    For fp32 models the main parameters are the model parameters themselves.
    """

    def __init__(self, params: Sequence[Any]) -> None:
        import torch

        self.model = list(params)
        self.separate = any(p.dtype != torch.float32 for p in self.model)
        self.main = ([p.detach().float().clone().requires_grad_(True) for p in self.model]
                     if self.separate else self.model)

    def grads_to_main(self) -> list[Any]:
        """Main-parameter gradients (fp32), zero where a parameter got no gradient."""
        import torch

        grads = []
        for model, main in zip(self.model, self.main):
            if model.grad is None:
                model.grad = torch.zeros_like(model)
            if self.separate:
                main.grad = model.grad.float()
            grads.append(main.grad)
        return grads

    def main_to_model(self) -> None:
        if self.separate:
            import torch

            with torch.no_grad():
                for model, main in zip(self.model, self.main):
                    model.copy_(main)


def build_optimizer(args: argparse.Namespace, names: Sequence[str], main: Sequence[Any]) -> Any:
    """adam (decoupled weight decay, as Megatron) or sgd; no decay on biases and norms."""
    import torch

    decay = [p for n, p in zip(names, main) if p.ndim > 1]
    no_decay = [p for n, p in zip(names, main) if p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if args.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=args.lr, momentum=args.sgd_momentum)
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_eps)


# -- checkpoints -------------------------------------------------------------------------

#: Architecture settings Megatron's --use-checkpoint-args takes from a checkpoint, and
#: whether the checkpoint overrides a value given on the command line (force).
CHECKPOINT_ARGS: tuple[tuple[str, bool], ...] = (
    ("num_layers", False), ("hidden_size", False), ("ffn_hidden_size", False),
    ("seq_length", False), ("num_attention_heads", False), ("num_query_groups", True),
    ("group_query_attention", True), ("kv_channels", False),
    ("max_position_embeddings", False), ("position_embedding_type", True),
    ("rotary_base", True), ("rotary_percent", True), ("add_bias_linear", True),
    ("squared_relu", True), ("swiglu", True), ("untie_embeddings_and_output_weights", True),
    ("normalization", True), ("tokenizer_type", False), ("vocab_size", False),
    ("padded_vocab_size", False), ("make_vocab_size_divisible_by", False),
    ("tensor_model_parallel_size", True), ("pipeline_model_parallel_size", True),
)


def checkpoint_dir(root: str | Path, iteration: int) -> Path:
    return Path(root) / f"iter_{iteration:07d}" / "mp_rank_00"


def checkpoint_file(root: str | Path, iteration: int) -> Path:
    return checkpoint_dir(root, iteration) / "model_optim_rng.pt"


def latest_iteration(root: str | Path) -> int | None:
    """The iteration in ``latest_checkpointed_iteration.txt``, or None when there is none."""
    tracker = Path(root) / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        return None
    text = tracker.read_text().strip()
    if not text.isdigit():
        raise TrainingError(f"{tracker} holds {text!r}, not an iteration number")
    return int(text)


def plain(value: Any) -> Any:
    """A value a weights-only loader can read: plain types, dtypes and enums as they are."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str, enum.Enum, torch.dtype)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def checkpoint_args(args: argparse.Namespace, **updates: Any) -> argparse.Namespace:
    """The resolved namespace with plain values only (no provenance or kernel objects)."""
    values = {k: plain(v) for k, v in vars(args).items() if not k.startswith("_")}
    values.update(updates)
    return argparse.Namespace(**values)


def plugin_module_names() -> set[str]:
    """Modules of the loaded megaplug plugins: the only places enum classes may come from."""
    import megaplug

    kernel, _ = megaplug.load([])
    return {record.module.__name__ for record in kernel.plugins.records.values()
            if getattr(record.module, "__name__", None)}


def allowed_global(name: str, modules: set[str]) -> Any:
    """The class for a global named in a checkpoint, if the safe loader may construct it."""
    if name == "argparse.Namespace":
        return argparse.Namespace
    if name == "signal.Signals":  # exit_signal's type, as in Megatron
        return signal.Signals
    module_name, _, attribute = name.rpartition(".")
    owned = any(module_name == m or module_name.startswith(m + ".") for m in modules)
    if not owned:
        return None
    # Imported here if need be: a resolve served from megaplug's cache imports no plugin
    # module, so "already imported" would refuse a checkpoint a cold process reads.
    try:
        candidate = getattr(importlib.import_module(module_name), attribute, None)
    except ImportError:
        return None
    if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
        return candidate
    return None


def safe_load(path: Path) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` allowing only Namespace and megaplug plugin enums."""
    import torch

    modules = plugin_module_names()
    names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    allowed = {name: allowed_global(name, modules) for name in names}
    refused = sorted(name for name, obj in allowed.items() if obj is None)
    if refused:
        raise TrainingError(f"{path} refers to {', '.join(refused)}, which the safe loader "
                            "does not construct (only argparse.Namespace and plugin enums)")
    with torch.serialization.safe_globals(list(allowed.values())):
        return torch.load(str(path), map_location="cpu", weights_only=True)


def load_args_from_checkpoint(args: argparse.Namespace) -> None:
    """Megatron's ``--use-checkpoint-args``: take the architecture from ``--load``."""
    from megaplug import Provenance

    if not args.load:
        raise TrainingError("--use-checkpoint-args needs --load DIR")
    iteration = latest_iteration(args.load)
    if iteration is None:
        raise TrainingError(f"--use-checkpoint-args: no checkpoint in {args.load} "
                            "(latest_checkpointed_iteration.txt is missing)")
    path = checkpoint_file(args.load, iteration)
    saved = vars(safe_load(path)["args"])
    from megaplug.megatron import provenance as provenance_of

    provenance = provenance_of(args)
    for key, force in CHECKPOINT_ARGS:
        value = saved.get(key)
        if value is None or not hasattr(args, key):
            continue
        if not force and getattr(args, key) is not None:
            continue
        setattr(args, key, value)
        if isinstance(provenance, dict):
            owner = provenance.get(key)
            provenance[key] = Provenance("checkpoint", str(path),
                                         owner.plugin if owner else None, previous=owner)


@dataclass
class TrainState:
    """What a run trains: the model, how the training pass calls it, the optimizer side."""

    model: Any  # the bare model: checkpoints and evaluation use it
    placement: Placement
    optimizer: Any
    main: MainParams
    schedule: LRSchedule
    #: What the training forward pass calls: the model in DistributedDataParallel across
    #: ranks, else the model itself.
    parallel_model: Any = None


def rng_state(placement: Placement) -> dict[str, Any]:
    """Python's and torch's generator states, and the GPU's when training on one."""
    import torch

    state = {"random_rng_state": random.getstate(), "torch_rng_state": torch.get_rng_state()}
    if placement.on_gpu:
        state["cuda_rng_state"] = torch.cuda.get_rng_state(placement.device)
    return state


def restore_rng(state: Mapping[str, Any], placement: Placement) -> None:
    """Undo :func:`rng_state`; a GPU state is used only on a GPU (and is absent from a CPU run)."""
    import torch

    random.setstate(state["random_rng_state"])
    torch.set_rng_state(state["torch_rng_state"])
    if placement.on_gpu and state.get("cuda_rng_state") is not None:
        torch.cuda.set_rng_state(state["cuda_rng_state"], placement.device)


def save_checkpoint(root: str, iteration: int, train: TrainState, args: argparse.Namespace,
                    consumed: int) -> Path:
    """Write Megatron's layout and point the tracker file at it (caller: rank 0 only)."""
    import torch

    path = checkpoint_file(root, iteration)
    path.parent.mkdir(parents=True, exist_ok=True)
    optimizer_state: dict[str, Any] = {"optimizer": train.optimizer.state_dict()}
    if train.main.separate:
        optimizer_state["fp32_from_fp16_params"] = [p.detach().clone() for p in train.main.main]
    state = {
        "args": checkpoint_args(args, iteration=iteration, consumed_train_samples=consumed),
        "checkpoint_version": 3.0,
        "iteration": iteration,
        "model": train.model.state_dict(),
        "optimizer": optimizer_state,
        "opt_param_scheduler": train.schedule.state_dict(),
        "rng_state": [rng_state(train.placement)],
    }
    tmp = path.with_suffix(".pt.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    (Path(root) / "latest_checkpointed_iteration.txt").write_text(f"{iteration}\n")
    return path


def load_checkpoint(args: argparse.Namespace, train: TrainState) -> tuple[int, Path | None]:
    """Restore from ``--load``; returns (iteration to continue from, checkpoint file).

    Whichever device wrote it: :func:`safe_load` maps every tensor to the CPU, then
    ``load_state_dict`` copies the weights onto the model's device and the optimizer moves
    its state to its parameters' device.
    """
    import torch

    iteration = latest_iteration(args.load)
    if iteration is None:
        return 0, None
    path = checkpoint_file(args.load, iteration)
    state = safe_load(path)
    try:
        train.model.load_state_dict(state["model"])
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise TrainingError(f"{path} does not fit the configured model ({first}); resolve the "
                            "same architecture, or pass --use-checkpoint-args") from None
    if args.finetune:
        return 0, path
    if not args.no_load_optim:
        train.optimizer.load_state_dict(state["optimizer"]["optimizer"])
        saved_main = state["optimizer"].get("fp32_from_fp16_params")
        if train.main.separate and saved_main is not None:
            with torch.no_grad():
                for target, source in zip(train.main.main, saved_main):
                    target.copy_(source)
        train.schedule.load_state_dict(state["opt_param_scheduler"])
    if not args.no_load_rng:
        restore_rng(state["rng_state"][0], train.placement)
    return int(state["iteration"]), path


# -- training ----------------------------------------------------------------------------


def padded_vocab_size(args: argparse.Namespace, vocab_size: int) -> int:
    """``--padded-vocab-size`` if given, else Megatron's padding of the tokenizer's size."""
    from tiny_tokenizer import vocab_size_with_padding

    if getattr(args, "padded_vocab_size", None):
        return int(args.padded_vocab_size)
    return vocab_size_with_padding(vocab_size, args.make_vocab_size_divisible_by,
                                   args.tensor_model_parallel_size)


def build_model(args: argparse.Namespace, vocab: int, log: Dist, device: str = "cpu") -> Any:
    """The GPT the arguments describe, in ``params_dtype`` on ``device``.

    Initialized on the CPU first, so that a seed gives the same weights on every device.
    """
    import torch
    from gpt_model import GPTModel, apply_lora, gpt_config_from_args

    config = gpt_config_from_args(args, vocab)
    model = GPTModel(config)
    rank = getattr(args, "lora_rank", None)
    if rank:
        scaling = getattr(args, "lora_scaling", None) or args.lora_alpha / rank
        wrapped = apply_lora(model, args.lora_target_modules, rank, scaling,
                             args.lora_dropout or 0.0)
        log.print(f"LoRA: rank {rank}, scaling {scaling:g}, {wrapped} adapted layers "
                  f"({', '.join(args.lora_target_modules)})")
    dtype = getattr(args, "params_dtype", None) or torch.float32
    return model.to(device=device,
                    dtype=dtype if isinstance(dtype, torch.dtype) else torch.float32)


def wrap_data_parallel(model: Any, dist: Dist, placement: Placement) -> Any:
    """``model`` in DistributedDataParallel on its device across ranks; alone, itself."""
    if not dist.initialized:
        return model
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [torch.device(placement.device).index] if placement.on_gpu else None
    wrapped = DistributedDataParallel(model, device_ids=device_ids)
    if any(p.dtype != torch.float32 for p in model.parameters() if p.requires_grad):
        wrapped.register_comm_hook(None, average_in_fp32)
    return wrapped


def average_in_fp32(group, bucket):  # type: ignore[no-untyped-def]
    """DDP communication hook: average a bucket of low-precision gradients in fp32.

    As Megatron does for bf16: a bf16 sum rounds at every hop between ranks. (No
    annotations: DDP checks them against its own classes, and here they are strings.)
    """
    import torch.distributed as dist

    group = group if group is not None else dist.group.WORLD
    grads = bucket.buffer()
    wide = grads.float().div_(dist.get_world_size(group))

    def narrow(future: Any) -> Any:
        grads.copy_(future.value()[0])
        return grads

    return dist.all_reduce(wide, group=group, async_op=True).get_future().then(narrow)


def gradient_sync(model: Any, now: bool) -> contextlib.AbstractContextManager[Any]:
    """DDP's ``no_sync`` unless ``now``: micro-batches accumulate, the last one reduces."""
    if now or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()


def micro_batches_per_step(args: argparse.Namespace, dp_size: int) -> int:
    """Gradient accumulation steps: global / (micro x data parallel), which must divide."""
    gbs = args.global_batch_size or args.micro_batch_size * dp_size
    per_step = args.micro_batch_size * dp_size
    if gbs % per_step:
        raise TrainingError(f"--global-batch-size {gbs} is not a multiple of --micro-batch-size "
                            f"{args.micro_batch_size} x data parallel size {dp_size}")
    return gbs // per_step


def forward_loss(model: Any, tokens: Any, labels: Any, placement: Placement) -> Any:
    import torch.nn.functional as F

    with placement.autocast():
        logits = model(tokens)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))


def my_micro_batches(tokens: Any, args: argparse.Namespace, step: int, dist: Dist,
                     num_micro: int) -> list[tuple[Any, Any]]:
    """This rank's share of the global batch of ``step``: ``num_micro`` micro-batches."""
    mbs = args.micro_batch_size
    gbs = mbs * num_micro * dist.dp_size
    starts = global_batch_starts(tokens, args.seed, step, gbs, args.seq_length)
    mine = starts[dist.dp_rank * mbs * num_micro:(dist.dp_rank + 1) * mbs * num_micro]
    return [batch(tokens, mine[i * mbs:(i + 1) * mbs], args.seq_length) for i in range(num_micro)]


def evaluate(train: TrainState, valid: Any, args: argparse.Namespace, dist: Dist,
             num_micro: int) -> float:
    """Mean validation loss over ``eval_iters`` global batches (a fixed set of windows)."""
    import torch

    model = train.model
    model.eval()
    total = torch.zeros(1, device=valid.device)
    with torch.no_grad():
        for k in range(args.eval_iters):
            for tokens, labels in my_micro_batches(valid, args, 10**9 + k, dist, num_micro):
                total += forward_loss(model, tokens, labels, train.placement).float()
    model.train()
    total /= max(1, args.eval_iters * num_micro)
    dist.average([total])
    return float(total)


def train_step(train: TrainState, batches: list[tuple[Any, Any]], args: argparse.Namespace,
               dist: Dist) -> tuple[float, float, float]:
    """One optimizer step over this rank's micro-batches; returns (loss, lr, grad norm).

    Gradients are averaged over the ranks by DistributedDataParallel in the last
    micro-batch's backward pass.
    """
    import torch

    main, model = train.main, train.parallel_model
    for parameter in main.model:
        parameter.grad = None
    total = torch.zeros(1, device=batches[0][0].device)
    for index, (tokens, labels) in enumerate(batches):
        with gradient_sync(model, now=index == len(batches) - 1):
            loss = forward_loss(model, tokens, labels, train.placement) / len(batches)
            loss.backward()
        total += loss.detach().float()
    main.grads_to_main()
    dist.average([total])
    clip = args.clip_grad or 0.0
    norm = torch.nn.utils.clip_grad_norm_(main.main, clip if clip > 0 else float("inf"))
    lr = train.schedule.step(train.optimizer)
    train.optimizer.step()
    main.main_to_model()
    return float(total), lr, float(norm)


def tokens_per_second(iterations: int, global_batch: int, seq_length: int,
                      seconds: float) -> float:
    """Training throughput of all ranks together."""
    return iterations * global_batch * seq_length / max(seconds, 1e-9)


def set_seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def set_threads(environ: Mapping[str, str]) -> None:
    """One intra-op thread unless OMP_NUM_THREADS says otherwise.

    A model this small gains nothing from more, and on a busy machine OpenMP threads
    spinning against each other make a step many times slower.
    """
    import torch

    if not environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(1)


def run(args: argparse.Namespace, dist: Dist, placement: Placement) -> dict[str, Any]:
    """Train per ``args`` on ``placement``; returns a summary (iterations, losses, speed)."""
    from tiny_tokenizer import ByteTokenizer

    set_seed(args.seed)
    train_tokens, valid_tokens = load_tokens(args, placement.device)
    vocab = padded_vocab_size(args, ByteTokenizer().vocab_size)
    model = build_model(args, vocab, dist, placement.device)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    main = MainParams([p for p in model.parameters() if p.requires_grad])
    train = TrainState(model, placement, build_optimizer(args, names, main.main), main,
                       LRSchedule(args))
    num_micro = micro_batches_per_step(args, dist.dp_size)
    gbs = args.micro_batch_size * num_micro * dist.dp_size
    start = 0
    if args.load:
        start, path = load_checkpoint(args, train)
        dist.print(f"loaded {path} (iteration {start})" if path
                   else f"no checkpoint in {args.load}; starting from scratch")
    train.parallel_model = wrap_data_parallel(model, dist, placement)
    params = sum(p.numel() for p in model.parameters())
    dist.print(
        f"model: {args.num_layers} layers, hidden {args.hidden_size}, "
        f"{args.num_attention_heads} heads, vocab {vocab} (padded), {params:,} parameters, "
        f"{str(next(model.parameters()).dtype).removeprefix('torch.')}")
    dist.print(f"batch: global {gbs} = micro {args.micro_batch_size} x {num_micro} "
               f"micro-batches x data parallel {dist.dp_size}; seq length {args.seq_length}")
    return train_loop(args, dist, train, train_tokens, valid_tokens, start, num_micro, gbs)


def train_loop(args: argparse.Namespace, dist: Dist, train: TrainState, train_tokens: Any,
               valid_tokens: Any, start: int, num_micro: int, gbs: int) -> dict[str, Any]:
    import torch

    train.model.train()
    if train.placement.on_gpu:
        torch.cuda.reset_peak_memory_stats(train.placement.device)
    began = window = time.perf_counter()
    first_done = began
    window_iters = 0
    losses: list[float] = []
    iteration = start
    for iteration in range(start + 1, args.train_iters + 1):
        batches = my_micro_batches(train_tokens, args, iteration, dist, num_micro)
        loss, lr, norm = train_step(train, batches, args, dist)
        if not math.isfinite(loss):
            raise TrainingError(f"loss is {loss} at iteration {iteration}; lower --lr")
        if not losses:
            first_done = time.perf_counter()
        losses.append(loss)
        window_iters += 1
        if iteration % args.log_interval == 0 or iteration == args.train_iters:
            rate = tokens_per_second(window_iters, gbs, args.seq_length,
                                     time.perf_counter() - window)
            dist.print(f"iteration {iteration:>6}/{args.train_iters} | loss {loss:.4f} | "
                       f"lr {lr:.3e} | grad norm {norm:.3f} | tokens/s {rate:,.0f}")
            window, window_iters = time.perf_counter(), 0
        if args.eval_interval and args.eval_iters and iteration % args.eval_interval == 0:
            dist.print(f"validation at iteration {iteration} | loss "
                       f"{evaluate(train, valid_tokens, args, dist, num_micro):.4f}")
        if args.save and args.save_interval and iteration % args.save_interval == 0:
            save(args, dist, iteration, train, gbs)
    ended = time.perf_counter()
    if (args.save and iteration > start
            and not (args.save_interval and iteration % args.save_interval == 0)):
        save(args, dist, iteration, train, gbs)
    done = iteration - start
    # the first iteration pays for warming up (CUDA kernels, allocator): leave it out
    timed, seconds = (done - 1, ended - first_done) if done > 1 else (done, ended - began)
    summary = {"iterations": done, "last_iteration": iteration,
               "first_loss": losses[0] if losses else None,
               "final_loss": losses[-1] if losses else None,
               "seconds": ended - began,
               "tokens_per_second": tokens_per_second(timed, gbs, args.seq_length, seconds),
               "max_gpu_memory_mib": (torch.cuda.max_memory_allocated(train.placement.device)
                                      / 2**20 if train.placement.on_gpu else None)}
    if args.eval_iters and iteration > start:
        summary["valid_loss"] = evaluate(train, valid_tokens, args, dist, num_micro)
    return summary


def save(args: argparse.Namespace, dist: Dist, iteration: int, train: TrainState,
         gbs: int) -> None:
    if dist.rank == 0:
        path = save_checkpoint(args.save, iteration, train, args, consumed=iteration * gbs)
        dist.print(f"saved {path}")
    dist.barrier()


def print_summary(summary: Mapping[str, Any], fp: str, dist: Dist) -> None:
    if summary["final_loss"] is None:
        dist.print(f"done: nothing to train (already at iteration {summary['last_iteration']})")
        return
    valid = summary.get("valid_loss")
    memory = summary.get("max_gpu_memory_mib")
    dist.print(f"done: {summary['iterations']} iterations in {summary['seconds']:.1f} s | "
               f"first loss {summary['first_loss']:.4f} | final loss {summary['final_loss']:.4f}"
               + (f" | validation loss {valid:.4f}" if valid is not None else "")
               + f" | tokens/s {summary['tokens_per_second']:,.0f}"
               + (f" | max GPU memory allocated {memory:,.0f} MiB" if memory is not None else "")
               + f" | last iteration {summary['last_iteration']} | config {fp[:12]}")


def report(message: str) -> None:
    """``message`` on stderr in one write: the ranks share the launcher's stderr, and
    unbuffered (PYTHONUNBUFFERED), print's separate newline lets another rank's line in."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Resolve, check, train; returns the process exit code."""
    import megaplug

    tokens = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    if "-h" in tokens or "--help" in tokens:
        print(__doc__)
        return 0
    rank = env.get("RANK", "0")
    try:
        args = resolve_args(tokens, env)
    except megaplug.ConfigError as exc:
        report(f"[rank {rank}] {exc}")
        return 2
    except TrainingError as exc:
        report(f"[rank {rank}] error: {exc}")
        return 2
    dist = Dist(args)
    set_threads(env)
    try:
        placement = placement_for(args, visible_gpu_count())
        use_device(placement)
        dist.init(placement, getattr(args, "distributed_timeout_minutes", None))
        fp = check_same_config(args, dist.collective_device)
        check_supported(args)
        dist.print(f"configuration {fp} agreed by {dist.world_size} rank(s); "
                   f"data parallel size {dist.dp_size}")
        dist.print(describe(placement, dist.world_size))
        summary = run(args, dist, placement)
        print_summary(summary, fp, dist)
        dist.close(finished=True)
        return 0
    except TrainingError as exc:
        report(f"[rank {dist.rank}] error: {exc}")
        return 1
    finally:
        dist.close()


if __name__ == "__main__":
    sys.exit(main())
