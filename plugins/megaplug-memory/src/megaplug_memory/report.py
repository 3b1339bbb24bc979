"""What ``megaplug memory`` prints: per-rank estimates as JSON, and a table per rank role."""

from __future__ import annotations

from .estimator import (CALIBRATION, GIB, Assumptions, Job, RankEstimate, estimate, usable,
                        verdict, parse_imbalance)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

def unvalidated(job: Job) -> list[str]:
    """The parts of this job's estimate that were modelled but not measured."""
    notes = []
    if not job.local:
        notes.append("Transformer Engine attention and layers (measured: --transformer-impl "
                     "local only)")
    if job.sp:
        notes.append("sequence parallelism")
    if job.cp > 1:
        notes.append("context parallelism")
    if job.mla:
        notes.append("multi-latent attention")
    if job.mtp:
        notes.append("multi-token prediction")
    if job.ep > 1 and job.etp != job.tp:
        notes.append("expert tensor parallelism")
    return notes


class MemoryReport:
    """The estimate of every rank (or one), with the device's memory and the verdicts."""

    def __init__(self, values: Mapping[str, Any], device_memory_bytes: int | None,
                 rank: int | None = None, assumptions: Assumptions | None = None) -> None:
        self.assumptions = assumptions or Assumptions()
        self.job = Job(values, self.assumptions)
        if not self.job.sizable():
            raise ValueError("no estimate: a size it needs (parallel sizes, layers, hidden "
                             "size, heads, sequence length, micro-batch size) is zero or "
                             "less, or there are fewer layers than pipeline stages")
        oversized = self.job.too_large()
        if oversized:
            raise ValueError(f"no estimate: no GPU holds this model ({', '.join(oversized)}; "
                             "the estimate takes sizes up to 2**40)")
        self.device_memory = device_memory_bytes
        self.rank = rank
        self.stages = sorted(estimate(values, rank, self.assumptions), key=lambda e: -e.needed)

    def fits(self, estimate_: RankEstimate) -> bool | None:
        """Whether the rank's bound plus the allocator's margin fits (see ``verdict``)."""
        return verdict(self.job, estimate_, self.device_memory)

    def ranks_of(self, stage: int) -> range:
        per_stage = max(1, self.job.world // self.job.pp)
        return range(stage * per_stage, min(self.job.world, (stage + 1) * per_stage))

    def as_dict(self) -> dict[str, Any]:
        """``{"device_memory_bytes", "assumptions", "unknown", "ranks": [{"rank",
        "peak_allocated_bytes", "peak_bound_bytes", "allocator_margin_bytes", "fits",
        "parts", "bound_parts"}]}``, ranks in order."""
        rows = []
        for stage in sorted(self.stages, key=lambda estimate_: estimate_.stage):
            ranks = [self.rank] if self.rank is not None else self.ranks_of(stage.stage)
            shared = {"peak_allocated_bytes": stage.peak, "peak_bound_bytes": stage.bound,
                      "allocator_margin_bytes": stage.margin, "fits": self.fits(stage),
                      "parts": dict(stage.parts), "bound_parts": dict(stage.bound_parts)}
            # the ranks of a stage share one mapping of parts: thousands of ranks stay cheap
            rows += [{"rank": rank, **shared} for rank in ranks]
        return {"device_memory_bytes": self.device_memory,
                "assumptions": {**self.assumptions.as_dict(),
                                "moe_bound_factor": self.job.moe_bound_factor()},
                "unknown": [unknown.words for unknown in self.job.unknowns], "ranks": rows}

    def as_text(self) -> str:
        moe = self.job.moe_bound_factor() != 1.0
        header = ("ranks", "stage", "weights", "gradients", "optimizer", "activations",
                  "other", "peak", *(("bound",) if moe else ()), "margin", "fits")
        table = [header]
        for stage in self.stages:
            parts = stage.parts
            ranks = self.ranks_of(stage.stage) if self.rank is None else [self.rank]
            shown = (f"{ranks[0]}" if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}")
            verdict_ = self.fits(stage)
            table.append((
                shown, f"{stage.stage}/{self.job.pp - 1}" if self.job.pp > 1 else "0",
                _gib(parts["weights"]), _gib(parts["gradients"]), _gib(parts["optimizer"]),
                _gib(parts["activations"] + parts["transient"]), _gib(parts["other"]),
                _gib(stage.peak), *((_gib(stage.bound),) if moe else ()), _gib(stage.margin),
                "?" if verdict_ is None else ("yes" if verdict_ else "NO")))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(width) if i < 2 else cell.rjust(width)
                           for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
                 for row in table]
        if self.device_memory is None:
            lines.append("device memory: unknown, no verdict (give --assume-device-memory "
                         "SIZE, e.g. 79.2GiB for an 80 GB H100)")
        else:
            lines.append(f"device memory: {_gib(self.device_memory)} GiB, of which "
                         f"{_gib(usable(self.device_memory))} GiB can be allocated")
        lines.append("GiB; activations include the peak's short-lived buffers (logits, "
                     "attention backward)")
        lines += self._assumption_lines(moe)
        notes = unvalidated(self.job)
        if notes:
            lines.append("modelled, not measured: " + "; ".join(notes))
        return "\n".join(lines) + "\n"

    def _assumption_lines(self, moe: bool) -> list[str]:
        """What the verdict assumes and what the estimate does not know, in words."""
        lines = []
        if moe:
            cause = (f"--moe-expert-capacity-factor {self.job.capacity} drops the rest"
                     if self.job.capacity is not None and float(self.job.capacity) > 0 else
                     "dropless: --assume-moe-imbalance, default 2")
            lines.append(f"peak: balanced routing; bound: an expert rank receiving "
                         f"{self.job.moe_bound_factor():g}x its balanced tokens ({cause}); "
                         "fits is judged on the bound")
        segments = self.assumptions.expandable_segments
        share = CALIBRATION["fragmentation_expandable" if segments else "fragmentation"]
        lines.append(f"margin: the allocator's fragmentation, {share:.0%} of activations "
                     + ("(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)" if segments else
                        "(without expandable segments; PYTORCH_CUDA_ALLOC_CONF="
                        "expandable_segments:True, or --assume-alloc-conf, lowers it)"))
        for unknown in self.job.unknowns:
            lines.append(f"unknown: {unknown.words}; no fit claimed")
        return lines


def _gib(size: int) -> str:
    return f"{size / GIB:.1f}"


def memory_report(values: Mapping[str, Any], device_memory_bytes: int | None,
                  rank: int | None = None, environ: Mapping[str, str] | None = None,
                  moe_imbalance: str | None = None) -> MemoryReport:
    """The ``megaplug.memory`` entry point ``megaplug memory`` calls (see cli/_memory.py):
    the job's environment gives ``PYTORCH_CUDA_ALLOC_CONF`` (and
    ``MEGAPLUG_ASSUME_MOE_IMBALANCE``), ``moe_imbalance`` overrides the latter;
    ``ValueError`` when the values cannot be sized or an assumption is not one."""
    stated = None if moe_imbalance is None else parse_imbalance(moe_imbalance)
    assumptions = Assumptions.from_environment((environ or {}).get, stated)
    return MemoryReport(values, device_memory_bytes, rank, assumptions)


__all__ = ["MemoryReport", "memory_report", "unvalidated"]
