"""The committed flag reference (docs/flags/) is what `megaplug docs` generates now."""

from __future__ import annotations

import sys
from pathlib import Path

import megaplug
from megaplug.cli._docs import write_reference

ROOT = Path(__file__).resolve().parents[1]


#: What generated docs/flags (its index says so): the shipped plugins at megaplug's own line.
COMMAND = "megaplug docs --shipped --assume megatron_core=seed --out docs/flags"


def test_committed_reference_is_up_to_date(tmp_path):
    seed = megaplug.TargetEnvironment(packages={"megatron_core": "seed"})
    kernel, _ = megaplug.load(shipped_only(), target=seed)
    written = write_reference(kernel, tmp_path, COMMAND)
    committed = ROOT / "docs" / "flags"
    stale = [p.name for p in written
             if not (committed / p.name).is_file()
             or (committed / p.name).read_text() != p.read_text()]
    extra = sorted({p.name for p in committed.glob("*.md")} - {p.name for p in written})
    assert not stale and not extra, (
        f"docs/flags is out of date (stale: {stale}, extra: {extra}); "
        f"regenerate with: {COMMAND}")


def shipped_only() -> list[str]:
    """``-p no:NAME`` for every installed plugin no shipped distribution provides (the LoRA
    example, a tutorial's plugin), as ``megaplug docs --shipped`` blocks them."""
    from megaplug.cache._entry_points import entry_points
    from megaplug.sources._selection import SHIPPED_DISTRIBUTIONS

    return [word for entry in entry_points() if entry.distribution not in SHIPPED_DISTRIBUTIONS
            for word in ("-p", f"no:{entry.name}")]


def test_docs_shipped_regenerates_the_committed_reference(tmp_path):
    from megaplug.cli import main

    out = tmp_path / "flags"
    assert main(["docs", "--shipped", "--assume", "megatron_core=seed", "--out", str(out)]) == 0
    committed = ROOT / "docs" / "flags"
    assert sorted(p.name for p in out.glob("*.md")) == sorted(p.name for p in
                                                               committed.glob("*.md"))
    index = (out / "index.md").read_text().replace(str(out), "docs/flags")
    assert index == (committed / "index.md").read_text()
