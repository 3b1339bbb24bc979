"""Pre-flight's whole verdict on every launch of the Megatron tier (preflight_corpus.py).

The Megatron tier judges these launches against Megatron itself but runs only where
megatron-core is installed; here each launch's problems and warnings are compared whole
with the record, so a rule that fires where it did not, stays silent where it fired, or
words a problem differently fails the main suite too. After changing a rule on purpose,
write the record again (see preflight_corpus.py) and review its diff.
"""

from __future__ import annotations

import json

import pytest
from preflight_corpus import RECORD, launches, verdict

RECORDED = json.loads(RECORD.read_text())


def test_every_launch_is_recorded() -> None:
    assert sorted(launches()) == sorted(RECORDED)


def test_the_record_holds_rejections_controls_and_warnings() -> None:
    rejected = [label for label, seen in RECORDED.items() if seen["problems"]]
    accepted = [label for label, seen in RECORDED.items()
                if not seen["problems"] and not seen["others_object"]]
    assert len(rejected) > 300 and len(accepted) > 150
    assert any(seen["warnings"] for seen in RECORDED.values())


# parametrized by the record's labels, so collection builds no launch; a launch missing
# from the record fails test_every_launch_is_recorded, one missing from the corpus here
@pytest.mark.parametrize("label", sorted(RECORDED))
def test_verdict_as_recorded(label: str) -> None:
    launch = launches().get(label)
    assert launch is not None, f"{label} is recorded but no longer a launch of the corpus"
    assert verdict(launch) == RECORDED[label]
