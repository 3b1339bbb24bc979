"""What ``megaplug memory`` prints: per-rank estimates as JSON, and a table per rank role."""

from __future__ import annotations

from .estimator import GIB, Job, RankEstimate, estimate, usable

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
                 rank: int | None = None) -> None:
        self.job = Job(values)
        if not self.job.sizable():
            raise ValueError("no estimate: a size it needs (parallel sizes, layers, hidden "
                             "size, heads, sequence length, micro-batch size) is zero or "
                             "less, or there are fewer layers than pipeline stages")
        self.device_memory = device_memory_bytes
        self.rank = rank
        self.stages = sorted(estimate(values, rank), key=lambda e: -e.peak)

    def fits(self, estimate_: RankEstimate) -> bool | None:
        if self.device_memory is None:
            return None
        return estimate_.peak <= usable(self.device_memory)

    def ranks_of(self, stage: int) -> range:
        per_stage = max(1, self.job.world // self.job.pp)
        return range(stage * per_stage, min(self.job.world, (stage + 1) * per_stage))

    def as_dict(self) -> dict[str, Any]:
        """``{"device_memory_bytes": int|null, "ranks": [{"rank", "peak_allocated_bytes",
        "fits", "parts"}]}``, ranks in order."""
        rows = []
        for stage in sorted(self.stages, key=lambda estimate_: estimate_.stage):
            ranks = [self.rank] if self.rank is not None else self.ranks_of(stage.stage)
            peak, fits, parts = stage.peak, self.fits(stage), dict(stage.parts)
            # the ranks of a stage share one parts mapping: thousands of ranks stay cheap
            rows += [{"rank": rank, "peak_allocated_bytes": peak, "fits": fits, "parts": parts}
                     for rank in ranks]
        return {"device_memory_bytes": self.device_memory, "ranks": rows}

    def as_text(self) -> str:
        header = ("ranks", "stage", "weights", "gradients", "optimizer", "activations",
                  "other", "peak", "fits")
        table = [header]
        for stage in self.stages:
            parts = stage.parts
            ranks = self.ranks_of(stage.stage) if self.rank is None else [self.rank]
            shown = (f"{ranks[0]}" if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}")
            verdict = self.fits(stage)
            table.append((
                shown, f"{stage.stage}/{self.job.pp - 1}" if self.job.pp > 1 else "0",
                _gib(parts["weights"]), _gib(parts["gradients"]), _gib(parts["optimizer"]),
                _gib(parts["activations"] + parts["transient"]), _gib(parts["other"]),
                _gib(stage.peak), "?" if verdict is None else ("yes" if verdict else "NO")))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(width) if i < 2 else cell.rjust(width)
                           for i, (cell, width) in enumerate(zip(row, widths))).rstrip()
                 for row in table]
        if self.device_memory is None:
            lines.append("device memory: unknown, no verdict (give --assume-device-memory "
                         "SIZE, e.g. 80GB)")
        else:
            lines.append(f"device memory: {_gib(self.device_memory)} GiB, of which "
                         f"{_gib(usable(self.device_memory))} GiB can be allocated")
        lines.append("GiB; activations include the peak's short-lived buffers (logits, "
                     "attention backward)")
        notes = unvalidated(self.job)
        if notes:
            lines.append("modelled, not measured: " + "; ".join(notes))
        return "\n".join(lines) + "\n"


def _gib(size: int) -> str:
    return f"{size / GIB:.1f}"


def memory_report(values: Mapping[str, Any], device_memory_bytes: int | None,
                  rank: int | None = None) -> MemoryReport:
    """The ``megaplug.memory`` entry point ``megaplug memory`` calls (see cli/_memory.py);
    ``ValueError`` when the values cannot be sized."""
    return MemoryReport(values, device_memory_bytes, rank)


__all__ = ["MemoryReport", "memory_report", "unvalidated"]
