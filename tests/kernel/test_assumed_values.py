"""``--assume NAME=VERSION`` and ``--assume-device-capability``: read with str methods, and
accepting exactly what the patterns that define them accept."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megaplug.environment._environment import (
    _VERSION,
    _is_package_name,
    _is_release,
    parse_assumed_capability,
    parse_assumed_package,
)

#: The grammars as patterns, each matching a whole text: the definition the str-method
#: checks must agree with (values are stripped before they are checked).
PACKAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
CAPABILITY = re.compile(r"(\d{1,3})(?:\.(\d{1,3}))?", re.ASCII)
RELEASE = re.compile(r"\d+(?:\.\d+)*", re.ASCII)

#: Characters near every boundary: ASCII letters, digits and punctuation, other scripts'
#: digits and letters, blanks.
ALPHABET = st.sampled_from(list("aZ_09.-+=/ xé٣²ǅ\t") + ["\n"])
TEXTS = st.text(ALPHABET, max_size=8)


@given(TEXTS)
@settings(max_examples=2000, deadline=None)
def test_package_names_are_the_patterns(text):
    assert _is_package_name(text) == bool(PACKAGE_NAME.fullmatch(text))


@given(TEXTS)
@settings(max_examples=2000, deadline=None)
def test_plain_releases_are_versions_of_the_pattern(text):
    assert _is_release(text) == bool(RELEASE.fullmatch(text))
    if _is_release(text):
        assert re.match(_VERSION, text)


@given(TEXTS)
@settings(max_examples=2000, deadline=None)
def test_capabilities_are_the_patterns(text):
    match = CAPABILITY.fullmatch(text.strip())
    expected = (int(match.group(1)), int(match.group(2) or 0)) if match and int(
        match.group(1)) else None
    if text.strip().lower() == "none":
        assert parse_assumed_capability(text) is None
    elif expected is None:
        with pytest.raises(ValueError, match="expects MAJOR.MINOR"):
            parse_assumed_capability(text)
    else:
        assert parse_assumed_capability(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("9.0", (9, 0)), ("10", (10, 0)), (" 8.6 ", (8, 6)), ("100.999", (100, 999)),
    ("none", None), ("None", None)])
def test_capabilities_read(text, expected):
    assert parse_assumed_capability(text) == expected


@pytest.mark.parametrize("text", ["0.0", "9.", ".9", "1000.0", "9.0.1", "٩.0", "9,0", ""])
def test_capabilities_refused(text):
    with pytest.raises(ValueError):
        parse_assumed_capability(text)


@pytest.mark.parametrize("item, expected", [
    ("torch=2.7.0", ("torch", "2.7.0")), ("torch=2.7.0.dev0", ("torch", "2.7.0.dev0")),
    ("transformer-engine=1.0rc1", ("transformer_engine", "1.0rc1")),
    ("torch=2.17.1+cu12", ("torch", "2.17.1+cu12")), ("apex=none", ("apex", None))])
def test_assumed_packages_read(item, expected):
    assert parse_assumed_package(item) == expected


@pytest.mark.parametrize("item, message", [
    ("torch=2.x", "is not a version"), ("torch=banana", "is not a version"),
    ("torch=-1", "is not a version"), ("torch=٣.0", "is not a version"),
    ("9torch=1.0", "is not a package name"), ("tör=1.0", "is not a package name")])
def test_assumed_packages_refused(item, message):
    with pytest.raises(ValueError, match=message):
        parse_assumed_package(item)
