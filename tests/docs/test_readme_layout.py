"""README's layout table names every plugin distribution under plugins/."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_layout_table_names_every_plugin_distribution() -> None:
    row = next(line for line in (REPO / "README.md").read_text().splitlines()
               if line.startswith("| `plugins/megaplug-*/` |"))
    named = set(re.findall(r"[a-z]+", row.split("|")[2]))
    distributions = sorted(path.parent.name.removeprefix("megaplug-")
                           for path in REPO.glob("plugins/megaplug-*/pyproject.toml"))
    assert distributions, "no plugin distributions found under plugins/"
    missing = [name for name in distributions if name not in named]
    assert not missing, f"README.md's layout table does not name plugins/megaplug-{missing}"
