"""The documentation harness (tests/docs/snippets.py) holds pages to what docs/snippets.md says."""

import sys
from pathlib import Path

import pytest
from sybil import Document
from sybil.example import SybilFailure

snippets = sys.modules["megaplug_docs_snippets"]  # loaded by the repository's conftest.py


# -- output with elisions ---------------------------------------------------------------------

@pytest.mark.parametrize("shown, actual", [
    (["a", "b"], ["a", "b"]),
    (["a", "b"], ["a  ", "b", "", ""]),                      # trailing spaces and blank lines
    (["a", "...", "d"], ["a", "d"]),                         # an elided line stands for none
    (["a", "...", "d"], ["a", "b", "c", "d"]),               # ... or for several
    (["a", "... (b and c)", "d"], ["a", "b", "c", "d"]),     # a note after it is not compared
    (["done in ... s | loss 2.9..."], ["done in 3.1 s | loss 2.9291"]),
    (["...", "last"], ["first", "last"]),
])
def test_shown_output_matches(shown, actual):
    assert snippets.output_matches(shown, actual)


@pytest.mark.parametrize("shown, actual", [
    (["a", "b"], ["a", "c"]),
    (["a", "d"], ["a", "b", "c", "d"]),                      # rows left out without saying so
    (["a"], ["a", "b"]),                                     # an extra line at the end
    (["done in ... s"], ["done in 3 s!"]),                   # ... stays within its line
    (["x ... y"], ["x", "y"]),
])
def test_shown_output_differs(shown, actual):
    assert not snippets.output_matches(shown, actual)


def test_no_shown_output_is_not_compared():
    assert snippets.compare_output([], "anything\n") is None
    assert "--- the page shows:\nx\n--- it printed:\ny" in snippets.compare_output(["x"], "y\n")


# -- console blocks ---------------------------------------------------------------------------

def test_console_commands_continue_over_backslashes_and_collect_their_output():
    block = snippets.Block("console", "$ echo a \\\n    b\na b\n$ true\n", line=10)
    commands, problem = snippets.parse_console(block)
    assert problem == ""
    assert [(c.text, c.line, c.shown) for c in commands] == [
        ("echo a \\\n    b", 11, ["a b"]), ("true", 14, [""])]


def test_output_before_any_command_is_a_problem():
    commands, problem = snippets.parse_console(snippets.Block("console", "out\n$ true\n", 3))
    assert (commands, problem) == ([], "line 4: output before any `$ ` command")


# -- whole pages ------------------------------------------------------------------------------

def run_page(tmp_path: Path, text: str) -> list:
    """Evaluate every block of a page; a list of None (held), 'skipped: why' or the failure."""
    page = tmp_path / "page.md"
    page.write_text(text)
    document = Document.parse(str(page), snippets.BlockParser())
    snippets._setup_page(document.namespace)
    results = []
    try:
        for example in document.examples():
            try:
                example.evaluate()
                results.append(None)
            except SybilFailure as failure:
                results.append(failure.result)
            except pytest.skip.Exception as skipped:
                results.append(f"skipped: {skipped.msg}")
    finally:
        snippets._teardown_page(document.namespace)
    return results


def test_a_page_runs_in_order_in_its_own_working_copy(tmp_path):
    results = run_page(tmp_path, """
```console
$ mkdir made && cd made
```

```yaml
# file: settings.yaml
hidden_size: 64
```

```console
$ cat settings.yaml
# file: settings.yaml
hidden_size: 64
$ test -f ../README.md && test -f ../pyproject.toml && echo "a copy of the checkout"
a copy of the checkout
$ echo "$MEGAPLUG_CACHE_DIR" | grep -c megaplug-docs
1
```

```python
>>> import os
>>> os.path.basename(os.getcwd())
'made'
```
""")
    assert results == [None, None, None, None]


def test_a_failing_command_needs_echo_status_after_it(tmp_path):
    results = run_page(tmp_path, """
```console
$ false
$ echo $?
1
```

```console
$ sh -c 'echo oops; exit 3'
oops
```
""")
    assert results[0] is None
    assert results[1].startswith("line 9: `$ sh -c 'echo oops; exit 3'` exited 3 (a command that "
                                 "is meant to fail is followed by `$ echo $?`); it printed:\noops")


def test_output_that_differs_fails_and_shows_both(tmp_path):
    [result] = run_page(tmp_path, "```console\n$ printf 'x\\ny\\n'\nx\nz\n```\n")
    assert result == ("line 2: `$ printf 'x\\ny\\n'`: the output differs from the page.\n"
                      "--- the page shows:\nx\nz\n--- it printed:\nx\ny")


def test_unmarked_and_unknown_blocks_fail(tmp_path):
    results = run_page(tmp_path, "```\nplain\n```\n\n```sh-session\n$ ls\n```\n")
    assert results[0].startswith("a fenced block with no language")
    assert results[1].startswith("unknown language 'sh-session'")


def test_markers_skip_with_their_reason_and_name_the_tier(tmp_path):
    results = run_page(tmp_path, """
<!-- docs: skip "publishes a package" -->
```console
$ twine upload dist/*
```

<!-- docs: megatron -->
```console
$ python -c "import megatron.core"
```
""")
    assert results[0] == "skipped: cannot run as written: publishes a package"
    if snippets.in_megatron_tier():
        assert results[1] is None
    else:
        assert results[1].startswith("skipped: needs Megatron-LM's code: runs in the Megatron tier")


def test_marker_mistakes_are_failures(tmp_path):
    results = run_page(tmp_path, """
<!-- docs: skip -->
```console
$ true
```

<!-- docs: gpus -->
```console
$ true
```

<!-- docs: timeout 5 -->

Some text between the marker and its block.

```console
$ true
```
""")
    assert results[0] == "marker 'skip' needs an argument (see docs/snippets.md)"
    assert results[1].startswith("unknown marker 'gpus'")
    assert results[2] == "the marker at line 12 is not directly above a fenced block"
    assert results[3] is None


def test_a_python_setup_gives_the_block_its_argv(tmp_path):
    results = run_page(tmp_path, """
<!-- docs: setup
import sys
sys.argv[1:] = ["--num-layers", "2"]
-->
```python
import sys
assert sys.argv[1:] == ["--num-layers", "2"]
```

```python
>>> 1 + 1
3
```
""")
    assert results[0] is None
    assert "Expected:\n    3\nGot:\n    2" in results[1]


def test_an_excerpt_must_be_in_its_file(tmp_path):
    results = run_page(tmp_path, """
<!-- docs: excerpt pyproject.toml -->
```toml
[project]
name = "megaplug"
...
[project.scripts]
```

<!-- docs: excerpt pyproject.toml -->
```toml
[project]
name = "not-megaplug"
```
""")
    assert results[0] is None
    assert results[1].startswith("these lines are not in pyproject.toml")


def test_every_covered_page_is_collected():
    covered = {path.relative_to(snippets.REPO).as_posix() for path in snippets.pages()}
    assert {"README.md", "docs/index.md", "docs/snippets.md", "examples/README.md",
            "examples/megaplug-example-plugin/README.md",
            "plugins/megaplug-moe/README.md"} <= covered
    assert not any("/tests/" in page or page.startswith("tests/") for page in covered)


def test_docs_only_runs_the_blocks_marked_so(tmp_path, monkeypatch):
    monkeypatch.setenv("MEGAPLUG_DOCS_ONLY", "megatron,gpu")
    results = run_page(tmp_path, """
```console
$ true
```

<!-- docs: gpu -->
```console
$ nvidia-smi -L
```
""")
    assert results[0] == "skipped: MEGAPLUG_DOCS_ONLY=gpu,megatron: only blocks marked so run"
    if not snippets.has_gpu():
        assert results[1] == ("skipped: needs a CUDA GPU: runs where nvidia-smi lists one "
                              "(docs/snippets.md)")
