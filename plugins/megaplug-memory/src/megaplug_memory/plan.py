"""``megaplug plan``: every parallel layout of a model on N GPUs that fits, ranked by a cost model.

Torch-free. The command line (``megaplug.cli._plan``) resolves the model's flags once and
hands this module the resolved values, the job's size and a ``validate`` callable (a full
resolve of a candidate command line, with pre-flight and the memory check, for the target
release); this module enumerates layouts, sizes each with the memory estimator, prices
each with the cost model below and returns the best that the release accepts.

**Enumerated**: tensor parallelism (powers of two up to a node, dividing the heads and query
groups), context parallelism (powers of two, the sequence divisible by twice it), pipeline
parallelism (dividing the layers and the GPUs), virtual stages (dividing a stage's layers),
expert parallelism and expert tensor parallelism (1 or TP) for MoE, data parallelism (the
rest), sequence parallelism (on with TP > 1, as MoE with TP requires), the distributed
optimizer (on with DP > 1), recomputation (none; selective; full block of a quarter, half or
three quarters of each chunk's layers; full uniform) and the micro-batch size (1-8).

**The cost model** (seconds per iteration, each term printed; docs/plan.md has the
calibration and its measured error): ``compute`` = the rank's model FLOPs (forward, twice
for backward, and the recomputed forward) / (peak x efficiency); ``bubble`` = compute x
(PP - 1) / (VPP x micro-batches); ``tp``, ``cp``, ``ep``, ``dp``, ``pp`` = the bytes each
rank moves per iteration in ring collectives / the link's bandwidth (NVLink while the group
fits in a node, the network otherwise). Terms are added: no overlap is assumed.
"""

from __future__ import annotations

from .estimator import GIB, Assumptions, Job, rank_estimate, stage_parameters, usable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping, Sequence

#: The cost model's constants (docs/plan.md): bf16 dense peak of an H100 SXM, the fraction
#: of it Megatron's layers reach (fitted on single-GPU slices, ``--transformer-impl
#: local``), and the bus bandwidths of NCCL's ring collectives in bytes per second.
COST = {
    "peak_flops": 989e12,
    "efficiency": 0.28,
    "nvlink_bandwidth": 360e9,
    "network_bandwidth": 40e9,
}

MICRO_BATCH_SIZES = (1, 2, 4, 8)

#: The cost model's terms, in the order printed.
TERMS = ("compute", "bubble", "tp", "cp", "ep", "dp", "pp")

#: Context parallelism is enumerated while each rank keeps this many tokens of a sequence:
#: below it attention's blocks are too small for the constant efficiency the cost model
#: assumes (context parallelism is for long sequences).
MIN_CP_TOKENS = 1024
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)


class Layout:
    """One candidate: its parallel sizes and options, as Megatron's flags."""

    __slots__ = ("tp", "cp", "pp", "vpp", "ep", "etp", "dp", "mbs", "recompute",
                 "recompute_layers")

    def __init__(self, tp: int, cp: int, pp: int, vpp: int, ep: int, etp: int, dp: int,
                 mbs: int, recompute: str, recompute_layers: int = 0) -> None:
        self.tp, self.cp, self.pp, self.vpp, self.ep, self.etp, self.dp = (
            tp, cp, pp, vpp, ep, etp, dp)
        self.mbs, self.recompute, self.recompute_layers = mbs, recompute, recompute_layers

    def family(self) -> str:
        """The parallel sizes without micro-batch and recomputation (what --explain groups)."""
        words = f"TP{self.tp} PP{self.pp}"
        words += f" VPP{self.vpp}" if self.vpp > 1 else ""
        words += f" CP{self.cp}" if self.cp > 1 else ""
        words += f" EP{self.ep}" + (f" ETP{self.etp}" if self.etp != self.tp else "") if (
            self.ep > 1) else ""
        return words + f" DP{self.dp}"

    def flags(self) -> list[str]:
        """The layout as command-line flags ``megaplug resolve`` (and Megatron) takes."""
        flags = ["--tensor-model-parallel-size", str(self.tp),
                 "--pipeline-model-parallel-size", str(self.pp),
                 "--micro-batch-size", str(self.mbs)]
        if self.vpp > 1:
            flags += ["--num-virtual-stages-per-pipeline-rank", str(self.vpp)]
        if self.cp > 1:
            flags += ["--context-parallel-size", str(self.cp)]
        if self.ep > 1:
            flags += ["--expert-model-parallel-size", str(self.ep)]
            if self.etp != self.tp:
                flags += ["--expert-tensor-parallel-size", str(self.etp)]
        if self.tp > 1:
            flags.append("--sequence-parallel")
        if self.dp > 1:
            flags.append("--use-distributed-optimizer")
        if self.recompute == "selective":
            flags += ["--recompute-granularity", "selective"]
        elif self.recompute == "block":
            flags += ["--recompute-granularity", "full", "--recompute-method", "block",
                      "--recompute-num-layers", str(self.recompute_layers)]
        elif self.recompute == "uniform":
            flags += ["--recompute-granularity", "full", "--recompute-method", "uniform",
                      "--recompute-num-layers", "1"]
        return flags

    def values(self, base: Mapping[str, Any], world: int) -> dict[str, Any]:
        """The base model's resolved values with this layout's, for the estimator."""
        full = self.recompute in ("block", "uniform")
        return {**base, "world_size": world, "tensor_model_parallel_size": self.tp,
                "pipeline_model_parallel_size": self.pp, "context_parallel_size": self.cp,
                "virtual_pipeline_model_parallel_size": self.vpp if self.vpp > 1 else None,
                "expert_model_parallel_size": self.ep, "expert_tensor_parallel_size": self.etp,
                "data_parallel_size": self.dp, "micro_batch_size": self.mbs,
                "sequence_parallel": self.tp > 1, "use_distributed_optimizer": self.dp > 1,
                "recompute_granularity": "full" if full else (
                    "selective" if self.recompute == "selective" else None),
                "recompute_method": self.recompute if full else None,
                "recompute_num_layers": self.recompute_layers if self.recompute == "block"
                else 1, "recompute_modules": None,
                "pipeline_model_parallel_layout": None,
                "decoder_first_pipeline_num_layers": None,
                "decoder_last_pipeline_num_layers": None}


class Priced:
    """A layout that fits, its memory and its cost terms (seconds per iteration)."""

    __slots__ = ("layout", "needed", "terms")

    def __init__(self, layout: Layout, needed: int, terms: dict[str, float]) -> None:
        self.layout, self.needed, self.terms = layout, needed, terms

    @property
    def seconds(self) -> float:
        return sum(self.terms.values())


# -- enumeration -------------------------------------------------------------------------

def _divisors(number: int, limit: int) -> list[int]:
    return [size for size in range(1, min(number, limit) + 1) if number % size == 0]


def families(job: Job, gpus: int, gpus_per_node: int, global_batch: int,
             rejected: dict[str, str]) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    """(tp, cp, pp, vpp, ep, etp, dp) that Megatron's divisibility rules allow; what they
    rule out goes to ``rejected`` (family pattern -> reason)."""
    for tp in POWERS_OF_TWO:
        if tp > gpus_per_node or gpus % tp:
            continue
        if job.heads % tp or job.groups % tp:
            rejected[f"TP{tp}"] = (f"{job.heads} attention heads / {job.groups} query groups "
                                   f"do not divide over {tp} tensor-parallel ranks")
            continue
        for cp in POWERS_OF_TWO:
            if gpus % (tp * cp):
                continue
            if job.seq % (2 * cp):
                rejected[f"CP{cp}"] = (f"--seq-length {job.seq} is not a multiple of "
                                       f"2 x {cp} (context parallelism splits it in 2 x CP)")
                continue
            if cp > 1 and job.seq // cp < MIN_CP_TOKENS:
                rejected[f"CP{cp}"] = (f"--seq-length {job.seq} over {cp} context-parallel "
                                       f"ranks leaves under {MIN_CP_TOKENS} tokens a rank, "
                                       "where the cost model's constant efficiency fails")
                continue
            yield from _pipelines(job, gpus, global_batch, tp, cp, rejected)


def _pipelines(job: Job, gpus: int, global_batch: int, tp: int, cp: int,
               rejected: dict[str, str]) -> Iterator[tuple[int, int, int, int, int, int, int]]:
    for pp in _divisors(job.layers, 64):
        if gpus % (tp * cp * pp):
            continue
        dp = gpus // (tp * cp * pp)
        if global_batch % dp:
            rejected[f"TP{tp} CP{cp} PP{pp} DP{dp}"] = (
                f"--global-batch-size {global_batch} is not a multiple of data "
                f"parallelism {dp}")
            continue
        per_stage = job.layers // pp
        for vpp in ([1] + [v for v in _divisors(per_stage, 8) if v > 1] if pp > 1 else [1]):
            for ep, etp in _experts(job, tp, cp, dp):
                yield tp, cp, pp, vpp, ep, etp, dp


def _experts(job: Job, tp: int, cp: int, dp: int) -> list[tuple[int, int]]:
    """(EP, expert TP) pairs: the expert grid must tile the TP x CP x DP ranks."""
    if not job.experts:
        return [(1, tp)]
    pairs = []
    for etp in sorted({1, tp}):
        for ep in POWERS_OF_TWO:
            if job.experts % ep == 0 and (tp * cp * dp) % (ep * etp) == 0:
                pairs.append((ep, etp))
    return pairs


def options(per_chunk: int) -> list[tuple[str, int]]:
    """Recomputation choices, cheapest in compute first."""
    blocks = sorted({max(1, per_chunk * share // 4) for share in (1, 2, 3)} - {per_chunk})
    return ([("none", 0), ("selective", 0)] + [("block", n) for n in blocks]
            + [("uniform", 0)])


# -- the cost model ----------------------------------------------------------------------

def forward_flops_per_token(job: Job) -> tuple[float, float]:
    """(a layer's matrix-multiply FLOPs, its attention-score FLOPs) per token, forward,
    for the whole model's layer (unsharded); the logits' FLOPs are added by the caller."""
    h = job.hidden
    attention = (2 * h * (job.heads + 2 * job.groups) * job.head_dim
                 + 2 * job.heads * job.head_dim * h)
    mlp = 2 * h * job.ffn * (3 if job.swiglu else 2)
    if job.experts:
        mlp = job.topk * 2 * h * job.expert_ffn * (3 if job.swiglu else 2)
        mlp += 2 * h * job.shared_ffn * (3 if job.swiglu else 2) + 2 * h * job.experts
    scores = 2 * 2 * job.seq * job.heads * job.head_dim  # QK^T and the weighted sum
    return attention + mlp, scores


def cost_terms(job: Job, layout: Layout, gpus: int, gpus_per_node: int, global_batch: int,
               cost: Mapping[str, float]) -> dict[str, float]:
    """Seconds per iteration of one rank, by term (see the module docstring)."""
    microbatches = global_batch // (layout.mbs * layout.dp)
    compute = _compute_seconds(job, layout, gpus, global_batch, cost)
    bubble = compute * (layout.pp - 1) / (layout.vpp * microbatches)
    return {"compute": compute, "bubble": bubble,
            **_communication_seconds(job, layout, gpus_per_node, microbatches, cost)}


def _compute_seconds(job: Job, layout: Layout, gpus: int, global_batch: int,
                     cost: Mapping[str, float]) -> float:
    """The model's FLOPs of an iteration (forward, backward twice, the recomputed forward)
    over the GPUs, at the peak times the calibrated efficiency."""
    tokens = global_batch * job.seq
    matmul, scores = forward_flops_per_token(job)
    layers = job.layers
    forward = tokens * (layers * (matmul + scores) + 2 * job.hidden * job.vocab)
    recomputed = 0.0
    per_chunk = layers // (layout.pp * layout.vpp)
    if layout.recompute == "uniform":
        recomputed = tokens * layers * (matmul + scores)
    elif layout.recompute == "block":
        recomputed = tokens * layers * (matmul + scores) * layout.recompute_layers / per_chunk
    elif layout.recompute == "selective":
        recomputed = tokens * layers * scores
    return (3 * forward + recomputed) / gpus / (cost["peak_flops"] * cost["efficiency"])


def _communication_seconds(job: Job, layout: Layout, gpus_per_node: int, microbatches: int,
                           cost: Mapping[str, float]) -> dict[str, float]:
    """The tp, cp, ep, dp and pp terms: each group's bytes per rank over its link."""

    def seconds(volume: float, group: int, span: int) -> float:
        """A ring collective's bytes per rank over a group of ``group`` whose ranks lie
        ``span`` apart: NVLink while it fits in a node."""
        if group <= 1:
            return 0.0
        inside = span * group <= gpus_per_node
        bandwidth = cost["nvlink_bandwidth"] if inside else cost["network_bandwidth"]
        return volume * (group - 1) / group / bandwidth

    a = job.param_bytes
    stage_layers = job.layers // layout.pp
    activation = layout.mbs * job.seq // layout.cp * job.hidden * a
    passes = 3 if layout.recompute in ("block", "uniform") else 2  # forward, backward (+again)
    # two all-reduces (or reduce-scatter + all-gather pairs) a layer each pass, of the whole
    # activation; a ring all-reduce moves twice what an all-gather does
    tp = seconds(2 * 2 * passes * activation * stage_layers * microbatches, layout.tp, 1)
    # the ring passes every other rank's K and V: an all-gather of the whole sequence's,
    # forward, and its gradients' reduce-scatter backward
    kv = layout.mbs * job.seq * job.groups * job.head_dim * a * 2
    cp = seconds(2 * kv * stage_layers * microbatches, layout.cp, layout.tp)
    moe_layers = sum(job.moe_pattern[: stage_layers]) if job.experts else 0
    routed = layout.mbs * job.seq // layout.cp * job.topk * job.hidden * a
    ep = seconds(4 * routed * moe_layers * microbatches, layout.ep, layout.etp)
    dp = seconds(_rank_parameters(job) * (job.grad_bytes + a), layout.dp,
                 layout.tp * layout.cp)
    pp = 0.0
    if layout.pp > 1:  # the activation (sharded by sequence parallelism) and its gradient
        boundary = 2 * microbatches * layout.vpp * activation / layout.tp
        inside = layout.tp * layout.cp * layout.dp * 2 <= gpus_per_node
        pp = boundary / cost["nvlink_bandwidth" if inside else "network_bandwidth"]
    return {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}


def _rank_parameters(job: Job) -> int:
    """Parameters a rank of the first stage holds (what its data-parallel group reduces)."""
    dense, expert = stage_parameters(job, 0)
    return dense + expert


# -- the search ----------------------------------------------------------------------------

class PlanResult:
    """What ``megaplug plan`` prints: the accepted layouts, best first, and what was dropped."""

    def __init__(self, rows: list[tuple[Priced, list[str]]], rejected: dict[str, str],
                 considered: int, fitting: int, cost: Mapping[str, float],
                 assumptions: Assumptions, gpus: int, device_memory: int,
                 resolve_options: Sequence[str] = ()) -> None:
        self.rows, self.rejected, self.considered, self.fitting = (
            rows, rejected, considered, fitting)
        self.cost, self.assumptions = dict(cost), assumptions
        self.gpus, self.device_memory = gpus, device_memory
        self.resolve_options = list(resolve_options)

    def command(self, argv: list[str]) -> str:
        """A row as the command line that resolves it for this job."""
        options = [*self.resolve_options, "--assume-device-memory", str(self.device_memory)]
        return (f"WORLD_SIZE={self.gpus} megaplug resolve "
                + " ".join(_quoted(token) for token in [*options, "--", *argv]))

    def as_dict(self) -> dict[str, Any]:
        """``{"cost_model": {...}, "assumptions": {...}, "considered", "fitting", "layouts":
        [{"rank", "seconds_per_iteration", "terms": {...}, "needed_bytes", "layout": {...},
        "argv": [...]}], "rejected": {family: reason}}``."""
        layouts = []
        for index, (row, argv) in enumerate(self.rows, start=1):
            layout = row.layout
            layouts.append({
                "rank": index, "seconds_per_iteration": row.seconds, "terms": dict(row.terms),
                "needed_bytes": row.needed,
                "layout": {name: getattr(layout, name) for name in Layout.__slots__},
                "argv": argv})
        return {"cost_model": self.cost, "assumptions": self.assumptions.as_dict(),
                "considered": self.considered, "fitting": self.fitting, "layouts": layouts,
                "rejected": dict(self.rejected)}


    def as_text(self, explain: bool = False) -> str:
        header = ("#", "layout", "mbs", "recompute", "s/iter", *TERMS, "GiB")
        table = [header]
        for index, (row, _argv) in enumerate(self.rows, start=1):
            layout = row.layout
            recompute = layout.recompute + (f" {layout.recompute_layers}"
                                            if layout.recompute == "block" else "")
            table.append((str(index), layout.family(), str(layout.mbs), recompute,
                          f"{row.seconds:.3f}", *(f"{row.terms[t]:.3f}" for t in TERMS),
                          f"{row.needed / GIB:.1f}"))
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(width) if i < 4 else cell.rjust(width)
                           for i, (cell, width) in enumerate(zip(line, widths))).rstrip()
                 for line in table]
        lines.append(f"{self.considered} layouts sized, {self.fitting} fit; seconds per "
                     f"iteration by term (compute at {self.cost['peak_flops'] / 1e12:g} TFLOP/s x "
                     f"{self.cost['efficiency']:g}; NVLink {self.cost['nvlink_bandwidth'] / 1e9:g} "
                     f"GB/s, network {self.cost['network_bandwidth'] / 1e9:g} GB/s; docs/plan.md); "
                     "GiB: the worst stage's need (bound + allocator margin)")
        for index, (_row, argv) in enumerate(self.rows, start=1):
            lines.append(f"{index}: {self.command(argv)}")
        if not self.rows:
            lines.append("no layout fits and is accepted" + (
                "" if explain else " (--explain says why each family was dropped)"))
        if explain:
            lines.append("dropped:")
            lines += [f"  {family}: {reason}" for family, reason in sorted(self.rejected.items())]
        return "\n".join(lines) + "\n"


def plan(base: Mapping[str, Any], gpus: int, *, gpus_per_node: int = 8,
         device_memory: int, global_batch: int | None = None, top: int = 10,
         validate: Callable[[list[str]], str | None] | None = None,
         model_argv: Sequence[str] = (), assumptions: Assumptions | None = None,
         cost: Mapping[str, float] | None = None,
         resolve_options: Sequence[str] = ()) -> PlanResult:
    """The ``top`` cheapest layouts of the model ``base`` (resolved values) on ``gpus`` GPUs
    that fit ``device_memory`` with the margin on every pipeline stage and that ``validate``
    (a full resolve of ``model_argv`` plus the layout's flags; it returns the first problem's
    words, or None) accepts. ``resolve_options`` (the target's ``--assume ...``) go into each
    row's command line."""
    assumptions = assumptions or Assumptions()
    cost = {**COST, **(cost or {})}
    job = Job(base, assumptions)
    _check_plannable(job)
    batch = global_batch or int(base.get("global_batch_size") or 0) or gpus
    search = _Search(base, gpus, gpus_per_node, batch, usable(device_memory), cost,
                     assumptions)
    priced = [row for sizes in families(job, gpus, gpus_per_node, batch, search.rejected)
              for row in search.fitting(*sizes)]
    priced.sort(key=lambda row: row.seconds)
    rows = search.accepted(priced, top, validate, list(model_argv))
    return PlanResult(rows, search.rejected, search.considered, len(priced), cost,
                      assumptions, gpus, device_memory, resolve_options)


def _check_plannable(job: Job) -> None:
    """``ValueError`` for a model the estimate cannot size or judge."""
    if not job.sizable():
        raise ValueError("no plan: a size of the model (layers, hidden size, heads, sequence "
                         "length) is zero or less")
    oversized = job.too_large()
    if oversized:
        raise ValueError(f"no plan: no GPU holds this model ({', '.join(oversized)})")
    if job.unknowns:
        raise ValueError("no plan: the memory estimate cannot judge this model: "
                         + "; ".join(unknown.words for unknown in job.unknowns))


class _Search:
    """One plan's search: sizes and prices each family's layouts, keeps what was dropped."""

    def __init__(self, base: Mapping[str, Any], gpus: int, gpus_per_node: int, batch: int,
                 limit: int, cost: Mapping[str, float], assumptions: Assumptions) -> None:
        self.base, self.gpus, self.gpus_per_node, self.batch = base, gpus, gpus_per_node, batch
        self.limit, self.cost, self.assumptions = limit, cost, assumptions
        self.rejected: dict[str, str] = {}
        self.considered = 0

    def fitting(self, tp: int, cp: int, pp: int, vpp: int, ep: int, etp: int,
                dp: int) -> list[Priced]:
        """For each micro-batch, the cheapest recomputation that fits, priced; a family
        with none is recorded as dropped, with the least it needs."""
        found, smallest = [], None
        for mbs in MICRO_BATCH_SIZES:
            microbatches = self.batch // (mbs * dp) if self.batch % (mbs * dp) == 0 else 0
            if not microbatches or (vpp > 1 and microbatches % pp):
                continue  # the interleaved schedule needs micro-batches in multiples of PP
            for recompute, count in options(int(self.base["num_layers"]) // (pp * vpp)):
                self.considered += 1
                layout = Layout(tp, cp, pp, vpp, ep, etp, dp, mbs, recompute, count)
                sized = Job(layout.values(self.base, self.gpus), self.assumptions)
                needed = _worst_needed(sized)
                if needed <= self.limit:
                    terms = cost_terms(sized, layout, self.gpus, self.gpus_per_node,
                                       self.batch, self.cost)
                    found.append(Priced(layout, needed, terms))
                    break  # more recomputation of this micro-batch only costs more
                smallest = needed if smallest is None else min(smallest, needed)
        if not found:
            family = Layout(tp, cp, pp, vpp, ep, etp, dp, 1, "none").family()
            self.rejected[family] = ("does not fit with any micro-batch and recomputation" + (
                f": the least it needs is {smallest / GIB:.1f} GiB of {self.limit / GIB:.1f}"
                if smallest is not None else ": no micro-batch size divides the batch"))
        return found

    def accepted(self, priced: list[Priced], top: int,
                 validate: Callable[[list[str]], str | None] | None,
                 model_argv: list[str]) -> list[tuple[Priced, list[str]]]:
        """The first ``top`` of ``priced`` that ``validate`` accepts, with their argv."""
        rows: list[tuple[Priced, list[str]]] = []
        for row in priced:
            if len(rows) >= top:
                break
            argv = [*model_argv, *row.layout.flags()]
            problem = validate(argv) if validate is not None else None
            if problem is None:
                rows.append((row, argv))
                continue
            self.rejected[f"{row.layout.family()} mbs{row.layout.mbs} {row.layout.recompute}"] = (
                "refused by the release's validation or pre-flight: " + problem)
        return rows


def _worst_needed(job: Job) -> int:
    """The most any pipeline stage needs (first, middle and last stand for the rest)."""
    stages = sorted({0, job.pp // 2, job.pp - 1})
    worst = 0
    for stage in stages:
        worst = max(worst, rank_estimate(job, stage * max(1, job.world // job.pp), stage).needed)
    return worst


# -- the entry point -------------------------------------------------------------------

def plan_report(values: Mapping[str, Any], gpus: int, *, environ: Mapping[str, str],
                moe_imbalance: str | None = None, **options: Any) -> PlanResult:
    """The ``megaplug.plan`` entry point ``megaplug plan`` calls (cli/_plan.py): the job's
    environment gives ``PYTORCH_CUDA_ALLOC_CONF``; ``moe_imbalance`` as given."""
    from .estimator import parse_imbalance

    stated = None if moe_imbalance is None else parse_imbalance(moe_imbalance)
    assumptions = Assumptions.from_environment(environ.get, stated)
    return plan(values, gpus, assumptions=assumptions, **options)


def _quoted(token: str) -> str:
    import shlex

    return shlex.quote(token)
