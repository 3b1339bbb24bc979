"""The committed flag reference (docs/flags/) is what `megaplug docs` generates now."""

from __future__ import annotations

import sys
from pathlib import Path

import megaplug
from megaplug.cli._docs import write_reference

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "parity"))

from parity import third_party_blocks  # noqa: E402


def test_committed_reference_is_up_to_date(tmp_path):
    kernel, _ = megaplug.load(third_party_blocks())
    written = write_reference(kernel, tmp_path)
    committed = ROOT / "docs" / "flags"
    stale = [p.name for p in written
             if not (committed / p.name).is_file()
             or (committed / p.name).read_text() != p.read_text()]
    extra = sorted({p.name for p in committed.glob("*.md")} - {p.name for p in written})
    assert not stale and not extra, (
        f"docs/flags is out of date (stale: {stale}, extra: {extra}); "
        "regenerate with: megaplug docs --out docs/flags -p no:lora -p no:memory")
