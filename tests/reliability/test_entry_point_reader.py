"""Entry points read straight from distribution metadata, as importlib.metadata reads them.

A cold start (no cache) reads the ``megaplug`` entry points without importing
importlib.metadata; the answer must be importlib.metadata's own, and wherever the simple
reader could differ it hands over (``None``) rather than guess.
"""

from __future__ import annotations

import zipfile
from importlib import metadata
from importlib.metadata import MetadataPathFinder
from pathlib import Path

import pytest

from megaplug.cache import _entry_points
from megaplug.cache._entry_points import read_entry_points

GROUP = "megaplug"


def distribution(site: Path, directory: str, name: str, version: str, entry_points: str,
                 metadata_file: str = "METADATA") -> Path:
    path = site / directory
    path.mkdir(parents=True)
    (path / metadata_file).write_text(f"Metadata-Version: 2.1\nName: {name}\n"
                                      f"Version: {version}\n\nA description.\n")
    if entry_points is not None:
        (path / "entry_points.txt").write_text(entry_points)
    return path


def importlib_answer() -> list[tuple[str, str, str | None, str | None]]:
    MetadataPathFinder().invalidate_caches()
    return sorted((ep.name, ep.value, ep.dist.metadata["Name"], ep.dist.version)
                  for ep in metadata.entry_points(group=GROUP))


def read_answer() -> list[tuple[str, str, str | None, str | None]] | None:
    found = read_entry_points()
    return None if found is None else sorted(
        (ep.name, ep.value, ep.distribution, ep.version) for ep in found)


@pytest.fixture
def sites(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))  # before second on sys.path
    return first, second


def test_the_installed_environment_reads_as_importlib_metadata_reads_it():
    assert read_answer() == importlib_answer()
    assert read_answer()  # megaplug's own plugins are installed here


def test_sections_comments_and_spacing(sites):
    first, _ = sites
    distribution(first, "reader_one-1.0.dist-info", "reader-one", "1.0",
                 "# a comment\n[console_scripts]\nreader = reader:main\n\n"
                 "[megaplug]\n  alpha  =  reader_alpha:plugin \nbeta=reader_beta\n"
                 "[other]\ngamma = x\n")
    expected = importlib_answer()
    assert ("alpha", "reader_alpha:plugin", "reader-one", "1.0") in expected
    assert read_answer() == expected


def test_the_first_distribution_of_a_name_on_sys_path_wins(sites):
    first, second = sites
    distribution(first, "Reader.Two-1.0.dist-info", "Reader.Two", "1.0", None)
    distribution(second, "reader_two-2.0.dist-info", "reader_two", "2.0",
                 "[megaplug]\nshadowed = reader_two\n")
    distribution(second, "reader_three-3.0.egg-info", "reader-three", "3.0",
                 "[megaplug]\nthree = reader_three\n", metadata_file="PKG-INFO")
    expected = importlib_answer()
    assert not any(row[0] == "shadowed" for row in expected)
    assert ("three", "reader_three", "reader-three", "3.0") in expected
    assert read_answer() == expected


@pytest.mark.parametrize("case", ["two of one name in a directory", "an egg-info file",
                                  "a line without =", "a folded header", "a zip archive"])
def test_anything_unusual_is_left_to_importlib_metadata(sites, tmp_path, monkeypatch, case):
    first, _ = sites
    if case == "two of one name in a directory":
        distribution(first, "reader_four-1.0.dist-info", "reader-four", "1.0",
                     "[megaplug]\nold = reader_four\n")
        distribution(first, "reader_four-2.0.dist-info", "reader-four", "2.0",
                     "[megaplug]\nnew = reader_four\n")
    elif case == "an egg-info file":
        (first / "reader_five-1.0.egg-info").write_text("Name: reader-five\nVersion: 1.0\n")
    elif case == "a line without =":
        distribution(first, "reader_six-1.0.dist-info", "reader-six", "1.0",
                     "[megaplug]\nno equals sign here\n")
    elif case == "a folded header":
        path = distribution(first, "reader_seven-1.0.dist-info", "x", "1.0",
                            "[megaplug]\nseven = reader_seven\n")
        (path / "METADATA").write_text("Metadata-Version: 2.1\nName: reader-\n seven\n"
                                       "Version: 1.0\n")
    else:
        archive = tmp_path / "plugins.zip"
        with zipfile.ZipFile(archive, "w") as handle:
            handle.writestr("reader_eight-1.0.dist-info/METADATA",
                            "Name: reader-eight\nVersion: 1.0\n")
            handle.writestr("reader_eight-1.0.dist-info/entry_points.txt",
                            "[megaplug]\neight = reader_eight\n")
        monkeypatch.syspath_prepend(str(archive))
    assert read_entry_points() is None


def test_a_cold_scan_gives_importlib_metadatas_answer(sites):
    first, _ = sites
    distribution(first, "reader_nine-1.0.dist-info", "reader-nine", "1.0",
                 "[megaplug]\nnine = reader_nine\n")
    scanned = sorted((ep.name, ep.value, ep.distribution, ep.version)
                     for ep in _entry_points.scan())
    assert scanned == importlib_answer()
