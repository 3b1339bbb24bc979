"""How pre-flight words the divisors it suggests (shared by every rule that lists them): one
divisor alone, two joined by "or", more by commas and a final "or"; a huge, mistyped count is
searched only up to a bound, so the list holds the divisors found below it and their
cofactors (never a search as long as the number)."""

from __future__ import annotations

import enum

import pytest
from preflight_launches import problems

AT_MODEL_BUILD = "; Megatron would raise this when building the model"
HEADS = ("--num-attention-heads", "--tensor-model-parallel-size")


def heads_hint(heads: int, tp: int) -> list[tuple[str, tuple[str, ...], str]]:
    found = problems(["--num-attention-heads", str(heads), "--kv-channels", "16",
                      "--tensor-model-parallel-size", str(tp)])
    assert not [str(p) for p in found if p.plugin != "preflight"]
    return [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in found]


#: 100001 * 100003 (100001 = 11 * 9091, 100003 is prime): its square root is just above the
#: 100000 bound, so 100001 and its cofactor 100003 are not searched.
HUGE = 100001 * 100003


@pytest.mark.parametrize("heads, tp, divisors", [
    (1, 2, "1"),
    (3, 2, "1 or 3"),
    (6, 4, "1, 2, 3 or 6"),
    (9, 2, "1, 3 or 9"),
    (HUGE, 2, f"1, 11, 9091, 1100033, 909127273 or {HUGE}"),
])
def test_the_divisors_a_hint_suggests(heads, tp, divisors):
    assert heads_hint(heads, tp) == [
        (f"--num-attention-heads {heads} cannot be split over --tensor-model-parallel-size {tp}",
         HEADS, f"use a multiple of {tp} heads, or a tensor parallel size that divides {heads}: "
                f"{divisors}")]


def test_no_rope_period_hint_lists_the_layer_count_divisors():
    found = problems(["--no-rope-freq", "3", "--position-embedding-type", "rope",
                      "--num-layers", "12"])
    assert [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in found] == []
    found = problems(["--no-rope-freq", "5", "--position-embedding-type", "rope",
                      "--num-layers", "12"])
    assert [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in found] == [
        ("--no-rope-freq 5 does not divide --num-layers 12", ("--no-rope-freq", "--num-layers"),
         "use a period that divides 12: 1, 2, 3, 4, 6 or 12")]


class _Draft:
    """The two things ``shown`` asks of a draft: a setting's value and its spelling."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def get(self, dest: str, default: object = None) -> object:
        return self.values.get(dest, default)

    def spelling(self, dest: str) -> str:
        return "--" + dest.replace("_", "-")


class _Granularity(enum.Enum):
    full = 1
    selective = 2


@pytest.mark.parametrize("value, expected", [
    (4, "--setting 4"),
    ("p2p", "--setting p2p"),
    (True, "--setting"),
    ([1, 2, 4], "--setting 1 2 4"),
    (("a2a", "p2p"), "--setting a2a p2p"),
    (_Granularity.selective, "--setting selective"),
    ([_Granularity.full, _Granularity.selective], "--setting full selective"),
])
def test_a_flag_is_shown_as_written_with_its_values_by_name(value, expected):
    from megaplug_preflight._report import shown

    assert shown(_Draft({"setting": value}), "setting") == expected
    assert shown(_Draft({}), "setting", value) == expected


def test_no_words_for_no_items():
    from megaplug_preflight._report import spoken

    assert (spoken([]), spoken([3]), spoken([1, 2])) == ("", "3", "1 or 2")
