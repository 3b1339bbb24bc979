"""Run the fenced blocks of the documentation as tests (the convention: docs/snippets.md).

Sybil finds the pages and lexes their fences and ``<!-- docs: ... -->`` markers; this module
pairs each fence with the markers right above it (:func:`parse_blocks`) and runs it
(:func:`evaluate_block`) in the page's own working copy of the checkout (:class:`Workspace`).
``conftest.py`` at the repository root collects the pages of the main tier through
:data:`DOCS`; ``tests/megatron/test_docs_snippets.py`` runs the blocks marked ``megatron`` in
the Megatron tier.
"""

from __future__ import annotations

import doctest
import functools
import importlib.util
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import traceback
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.parsers.abstract.lexers import LexingException
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer

REPO = Path(__file__).resolve().parents[2]

#: The pages whose blocks are tests, as paths relative to the repository root.
PAGES = ("README.md", "docs/*.md", "docs/*/*.md", "examples/*/README.md", "examples/README.md",
         "examples/*/*/README.md", "plugins/*/README.md")

#: Languages run as shell scripts with no output shown.
SCRIPT_LANGUAGES = frozenset({"bash", "sh", "shell"})
#: Languages shown and never run (unless the block is a file).
SHOWN_LANGUAGES = frozenset({"text", "toml", "yaml", "yml", "json", "ini", "cfg", "diff",
                             "markdown", "md", "dockerfile", "mermaid", "csv", "pycon-output"})
#: Markers a block may carry, each taking no argument except the two named here.
MARKERS_WITH_ARGUMENT = frozenset({"skip", "timeout", "excerpt"})
MARKERS = frozenset({"megatron", "gpu", "setup"}) | MARKERS_WITH_ARGUMENT

#: Pages other people are rewriting right now (issue 32): their blocks are reported as
#: skipped with this reason until the page follows docs/snippets.md. Keep this empty.
PAGES_BEING_REWRITTEN: frozenset[str] = frozenset()

DEFAULT_TIMEOUT_S = 60.0
FILE_LINE = re.compile(r"^(?:#|//)\s*file:\s*(?P<path>\S+)\s*$")


def is_page(relative: str) -> bool:
    """Whether the page at ``relative`` (a posix path from the repository root) is covered."""
    return any(fnmatch(relative, pattern) for pattern in PAGES) and "/tests/" not in relative


def pages(root: Path = REPO) -> List[Path]:
    """Every covered page in the checkout at ``root``, sorted."""
    found = set()
    for pattern in PAGES:
        found.update(path for path in root.glob(pattern)
                     if is_page(path.relative_to(root).as_posix()))
    return sorted(found)


# -- parsing ----------------------------------------------------------------------------------

@dataclass
class Block:
    """One fenced block and the markers above it."""

    language: str
    source: str
    line: int
    markers: Dict[str, str] = field(default_factory=dict)
    setup: str = ""
    problem: str = ""

    @property
    def file_path(self) -> Optional[str]:
        """The path a ``# file: PATH`` first line names, or None."""
        first = self.source.split("\n", 1)[0]
        match = FILE_LINE.match(first.strip())
        return match.group("path") if match else None

    @property
    def timeout(self) -> float:
        return float(self.markers.get("timeout") or DEFAULT_TIMEOUT_S)


def _parse_marker_arguments(arguments: str) -> Tuple[Dict[str, str], str]:
    """``'gpu timeout 300'`` -> ({'gpu': '', 'timeout': '300'}, problem or '')."""
    try:
        words = shlex.split(arguments)
    except ValueError as error:
        return {}, f"unreadable marker {arguments!r}: {error}"
    markers: Dict[str, str] = {}
    while words:
        word = words.pop(0)
        if word not in MARKERS:
            return markers, (f"unknown marker {word!r} (known: {', '.join(sorted(MARKERS))};"
                             " see docs/snippets.md)")
        if word in MARKERS_WITH_ARGUMENT:
            if not words:
                return markers, f"marker {word!r} needs an argument (see docs/snippets.md)"
            markers[word] = words.pop(0)
        else:
            markers[word] = ""
    if "skip" in markers and not markers["skip"].strip():
        return markers, "a skip marker needs its reason: <!-- docs: skip \"why\" -->"
    if "timeout" in markers:
        try:
            float(markers["timeout"])
        except ValueError:
            return markers, f"timeout {markers['timeout']!r} is not a number of seconds"
    return markers, ""


#: What may stand between a marker's text and the fence below it: the marker's close, blanks.
_MARKER_GAP = re.compile(r"\s*(?:--+>)?\s*")


class BlockParser:
    """A Sybil parser: one region per fence, carrying the markers directly above it."""

    def __init__(self) -> None:
        self.fences = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"(?P<language>[^\n]*)$\n", re.MULTILINE),
            mapping={"language": "language", "source": "source"})
        self.markers = DirectiveInHTMLCommentLexer(directive="docs", arguments=r".*?")

    def __call__(self, document: Document) -> Iterator[Region]:
        try:
            markers = list(self.markers(document))
        except LexingException as error:
            yield Region(0, 1, Block("", "", 1, problem=str(error)), evaluate_block)
            return
        fences = sorted(self.fences(document), key=lambda region: region.start)
        for fence in fences:
            # Markers stack: each one directly above the next, the last directly above the fence.
            attached = []
            start = fence.start
            for marker in sorted(markers, key=lambda region: region.end, reverse=True):
                if marker.end <= start and _MARKER_GAP.fullmatch(document.text[marker.end:start]):
                    attached.insert(0, marker)
                    start = marker.start
            block = Block(language=(fence.lexemes["language"] or "").strip(),
                          source=str(fence.lexemes["source"]),
                          line=document.text.count("\n", 0, fence.start) + 1)
            for marker in attached:
                markers.remove(marker)
                found, problem = _parse_marker_arguments(marker.lexemes["arguments"] or "")
                block.markers.update(found)
                block.problem = block.problem or problem
                if "setup" in found:
                    block.setup = str(marker.lexemes["source"] or "")
            yield Region(fence.start, fence.end, block, evaluate_block)
        for marker in markers:
            line = document.text.count("\n", 0, marker.start) + 1
            yield Region(marker.start, marker.end,
                         Block("", "", line, problem=f"the marker at line {line} is not directly "
                               "above a fenced block"), evaluate_block)


class DocsSybil(Sybil):
    """Sybil over :data:`PAGES` only (``Path.match`` would also take every nested README)."""

    def should_parse(self, path: Path) -> bool:
        try:
            relative = path.resolve().relative_to(self.path.resolve()).as_posix()
        except ValueError:
            return False
        return is_page(relative)


def _setup_page(namespace: Dict[str, Any]) -> None:
    namespace["__docs_workspace__"] = None


def _teardown_page(namespace: Dict[str, Any]) -> None:
    workspace = namespace.pop("__docs_workspace__", None)
    if workspace is not None:
        workspace.remove()


DOCS = DocsSybil(parsers=[BlockParser()], path=str(REPO), setup=_setup_page,
                 teardown=_teardown_page)


# -- where a page runs ------------------------------------------------------------------------

#: Folders never copied into a page's working copy when git cannot list the checkout.
_NOT_COPIED = re.compile(r"^(\.git|\.venv.*|__pycache__|.*\.egg-info|\.whl|\.pytest_cache)$")


def _checkout_files(root: Path) -> List[str]:
    """The files git tracks or would track (untracked, not ignored) under ``root``.

    Where ``root`` is no git checkout (a copy sent to a GPU machine), every file but
    environments, caches and build metadata.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True).stdout
        return sorted({name for name in listed.decode().split("\0") if name})
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not _NOT_COPIED.match(d)]
            found += [os.path.relpath(os.path.join(folder, name), root) for name in files]
        return sorted(found)


class Workspace:
    """A page's temporary working copy, megaplug cache and virtual environment.

    The environment is created without pip and sees ``.venv``'s packages through a ``.pth``
    file; the console scripts of the running interpreter's environment are copied in with their
    first line pointing at its own python, so ``pip install -e .`` on a page installs there.
    """

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="megaplug-docs-"))
        self.copy = self.base / "megaplug"
        self.cache = self.base / "cache"
        self.venv = self.base / "venv"
        self.cwd = self.copy
        for name in _checkout_files(REPO):
            source = REPO / name
            if source.is_file():
                target = self.copy / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        self.cache.mkdir()
        shared = REPO.parent / "shared"
        if shared.is_dir():  # laid beside the checkout, as CI and the developers have it
            (self.base / "shared").symlink_to(shared)
        self._make_venv()

    def _make_venv(self) -> None:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True)
        python = self.venv / "bin" / "python"
        site = subprocess.run([str(python), "-c", "import sysconfig; "
                               "print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        here = sysconfig.get_paths()["purelib"]
        Path(site, "megaplug-docs-base.pth").write_text(
            f"import site; site.addsitedir({here!r})\n")
        own_bin = Path(sys.executable).parent
        for script in own_bin.iterdir():
            target = self.venv / "bin" / script.name
            if target.exists() or not script.is_file():
                continue
            try:
                head, _, rest = script.read_text().partition("\n")
            except (UnicodeDecodeError, OSError):
                continue
            if head.startswith("#!") and str(own_bin) in head:
                target.write_text(f"#!{python}\n{rest}")
                target.chmod(0o755)

    def environ(self) -> Dict[str, str]:
        """The environment a page's commands run in: deterministic, isolated."""
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("MEGAPLUG_", "PYTEST_", "COLUMNS", "LINES"))
               and key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
        env.update(MEGAPLUG_CACHE_DIR=str(self.cache), VIRTUAL_ENV=str(self.venv),
                   PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONIOENCODING="utf-8", NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1",
                   PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        return env

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def workspace_of(namespace: Dict[str, Any]) -> Workspace:
    """The page's workspace, made on its first block that needs one."""
    if namespace.get("__docs_workspace__") is None:
        namespace["__docs_workspace__"] = Workspace()
    return namespace["__docs_workspace__"]


@functools.lru_cache(maxsize=None)
def has_gpu() -> bool:
    """Whether ``nvidia-smi`` lists a GPU here."""
    if shutil.which("nvidia-smi") is None:
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return listed.returncode == 0 and "GPU" in listed.stdout


@functools.lru_cache(maxsize=None)
def in_megatron_tier() -> bool:
    """Whether Megatron-LM's code is importable (the Megatron tier's environment)."""
    return importlib.util.find_spec("megatron") is not None and (
        importlib.util.find_spec("megatron.core") is not None)


def skip_reason(block: Block) -> Optional[str]:
    """Why ``block`` does not run here, or None when it does."""
    only = {word for word in os.environ.get("MEGAPLUG_DOCS_ONLY", "").split(",") if word}
    if only and not only & set(block.markers):
        return f"MEGAPLUG_DOCS_ONLY={','.join(sorted(only))}: only blocks marked so run"
    if "skip" in block.markers:
        return f"cannot run as written: {block.markers['skip']}"
    if "megatron" in block.markers and not in_megatron_tier():
        return ("needs Megatron-LM's code: runs in the Megatron tier "
                "(bash scripts/megatron-tier.sh runs tests/megatron/test_docs_snippets.py)")
    if "gpu" in block.markers and not has_gpu():
        return "needs a CUDA GPU: runs where nvidia-smi lists one (docs/snippets.md)"
    return None


# -- running a block --------------------------------------------------------------------------

def evaluate_block(example: Example) -> Optional[str]:
    """Sybil's evaluator for every block: None when it holds, else the failure to report."""
    block: Block = example.parsed
    page = Path(example.path).resolve()
    relative = page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else str(page)
    if relative in PAGES_BEING_REWRITTEN:
        raise pytest.skip.Exception(
            f"{relative} is being rewritten; its blocks are not yet marked (issue 32)",
            _use_item_location=True)
    if block.problem:
        return block.problem
    path = block.file_path
    if path is None and not block.language:
        return ("a fenced block with no language: write ```text for plain text, the language "
                "otherwise (docs/snippets.md)")
    if "excerpt" in block.markers:
        return check_excerpt(block)
    if path is None and not _runs(block.language) and block.language not in SHOWN_LANGUAGES:
        return (f"unknown language {block.language!r}: a runnable one (console, bash, python) "
                "or one shown only (SHOWN_LANGUAGES in tests/docs/snippets.py)")
    reason = skip_reason(block)
    if path is None and reason is None and not _runs(block.language):
        return None
    workspace = workspace_of(example.namespace)
    if path is not None:
        target = (workspace.cwd / path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.source)
        return None
    if reason is not None:
        # Reported at the block's line on its page, not at this line.
        raise pytest.skip.Exception(reason, _use_item_location=True)
    if block.language in {"python", "pycon"}:
        return run_python(block, workspace, example)
    if block.setup:
        failure = _run_setup(block, workspace)
        if failure:
            return failure
    if block.language == "console":
        return run_console(block, workspace)
    return run_script(block, workspace)


def check_excerpt(block: Block) -> Optional[str]:
    """An excerpt's lines appear, in order and together, in the file it names.

    Lines are compared without their indentation; ``...`` elides as in console output.
    """
    source = REPO / block.markers["excerpt"]
    if not source.is_file():
        return f"the excerpt's file {block.markers['excerpt']} does not exist"
    shown = [line.strip() for line in _clean(block.source.split("\n"))]
    actual = [line.strip() for line in source.read_text().split("\n")]
    if output_matches(["...", *shown, "..."], actual):
        return None
    return (f"these lines are not in {block.markers['excerpt']} (in this order, together):\n"
            + "\n".join(shown))


def _runs(language: str) -> bool:
    return language in {"console", "python", "pycon"} | SCRIPT_LANGUAGES


def _run_setup(block: Block, workspace: Workspace) -> Optional[str]:
    """Run a shell block's setup marker in the working copy."""
    done = subprocess.run(["bash", "-e", "-c", block.setup], cwd=workspace.cwd,
                          env=workspace.environ(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=block.timeout)
    if done.returncode != 0:
        return f"the setup above the block failed (exit {done.returncode}):\n{done.stdout}"
    return None


@dataclass
class Command:
    """One ``$ `` command of a console block and the output the page shows for it."""

    text: str
    line: int
    shown: List[str] = field(default_factory=list)


def parse_console(block: Block) -> Tuple[List[Command], str]:
    """The commands of a console block, or a problem with its layout."""
    commands: List[Command] = []
    lines = block.source.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        line_no = block.line + 1 + index
        if line.startswith("$ ") or line == "$":
            text = line[2:]
            while text.endswith("\\") and index + 1 < len(lines):
                index += 1
                text += "\n" + lines[index]
            commands.append(Command(text, line_no))
        elif commands:
            commands[-1].shown.append(line)
        elif line.strip():
            return [], f"line {line_no}: output before any `$ ` command"
        index += 1
    if not commands:
        return [], "a console block with no `$ ` command"
    return commands, ""


def run_console(block: Block, workspace: Workspace) -> Optional[str]:
    """Run a console block's commands in one bash session; compare status and output."""
    commands, problem = parse_console(block)
    if problem:
        return problem
    mark = f"@@docs-{secrets.token_hex(8)}@@"
    script = [f"cd {shlex.quote(str(workspace.cwd))}"]
    for command in commands:
        script += [command.text, "__docs_status=$?",
                   f"printf '\\n{mark} %d\\n' \"$__docs_status\"",
                   "(exit $__docs_status)"]
    script.append(f"printf '{mark}-cwd %s\\n' \"$PWD\"")
    try:
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=workspace.cwd,
                              env=workspace.environ(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=block.timeout * len(commands))
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode(errors="replace") if isinstance(error.stdout, bytes) else (
            error.stdout or "")
        return (f"timed out after {block.timeout * len(commands):.0f} s (mark a slower block "
                f"<!-- docs: timeout S -->):\n{out[-3000:]}")
    outputs, statuses, rest = _split_transcript(done.stdout, mark)
    cwd_line = rest.strip().rpartition(f"{mark}-cwd ")[2].strip()
    if cwd_line and Path(cwd_line).is_dir():
        workspace.cwd = Path(cwd_line)
    for position, command in enumerate(commands):
        if position >= len(statuses):
            return (f"line {command.line}: `$ {command.text}` never finished (the session ended "
                    f"early):\n{rest[-3000:]}")
        output, status = outputs[position], statuses[position]
        following = commands[position + 1].text.strip() if position + 1 < len(commands) else ""
        if status != 0 and following != "echo $?":
            return (f"line {command.line}: `$ {command.text}` exited {status} (a command that "
                    f"is meant to fail is followed by `$ echo $?`); it printed:\n{output}")
        mismatch = compare_output(command.shown, output)
        if mismatch:
            return f"line {command.line}: `$ {command.text}`: {mismatch}"
    return None


def _split_transcript(text: str, mark: str) -> Tuple[List[str], List[int], str]:
    outputs: List[str] = []
    statuses: List[int] = []
    pattern = re.compile(rf"\n{re.escape(mark)} (-?\d+)\n")
    place = 0
    for match in pattern.finditer(text):
        outputs.append(text[place:match.start()])
        statuses.append(int(match.group(1)))
        place = match.end()
    return outputs, statuses, text[place:]


def _clean(lines: Sequence[str]) -> List[str]:
    cleaned = [line.rstrip() for line in lines]
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    return cleaned


@functools.lru_cache(maxsize=None)
def _line_pattern(shown: str) -> "re.Pattern[str]":
    return re.compile(".*".join(re.escape(piece) for piece in shown.split("...")), re.DOTALL)


def output_matches(shown: Sequence[str], actual: Sequence[str]) -> bool:
    """Whether ``actual`` lines are what ``shown`` shows, with the elisions of docs/snippets.md.

    A shown line that starts with ``...`` stands for any number of lines; ``...`` inside a
    line for any text within it.
    """
    shown, actual = _clean(shown), _clean(actual)

    @functools.lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        if shown[i].lstrip().startswith("..."):
            return match(i + 1, j) or (j < len(actual) and match(i, j + 1))
        return (j < len(actual) and _line_pattern(shown[i]).fullmatch(actual[j]) is not None
                and match(i + 1, j + 1))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * (len(shown) + len(actual)) + 1000))
    return match(0, 0)


def compare_output(shown: Sequence[str], output: str) -> Optional[str]:
    """None when the output is what the page shows (or it shows none), else a report."""
    if not _clean(shown):
        return None
    actual = output.split("\n")
    if output_matches(shown, actual):
        return None
    return ("the output differs from the page.\n--- the page shows:\n"
            + "\n".join(_clean(shown)) + "\n--- it printed:\n" + "\n".join(_clean(actual)))


def run_script(block: Block, workspace: Workspace) -> Optional[str]:
    """Run a bash block under ``bash -e``; it must exit 0."""
    try:
        done = subprocess.run(["bash", "-e", "-c", block.source], cwd=workspace.cwd,
                              env=workspace.environ(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=block.timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {block.timeout:.0f} s"
    if done.returncode != 0:
        return f"exited {done.returncode}:\n{done.stdout[-3000:]}"
    return None


class _in_workspace:
    """Run in-process Python with the page's directory, cache and a bare ``sys.argv``."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def __enter__(self) -> None:
        self.saved = (os.getcwd(), dict(os.environ), list(sys.argv))
        os.chdir(self.workspace.cwd)
        for key in [key for key in os.environ if key.startswith("MEGAPLUG_")]:
            del os.environ[key]
        os.environ["MEGAPLUG_CACHE_DIR"] = str(self.workspace.cache)
        sys.argv[:] = [sys.argv[0]]

    def __exit__(self, *exc_info: object) -> None:
        cwd, environ, argv = self.saved
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.argv[:] = argv


def run_python(block: Block, workspace: Workspace, example: Example) -> Optional[str]:
    """Run a Python block in the page's namespace; a ``>>>`` block is a doctest.

    Its setup marker, if any, is Python too and runs first, in the same namespace and context.
    """
    namespace = example.namespace
    with _in_workspace(workspace):
        if block.setup:
            failure = _exec(block.setup, f"{example.path} (setup above line {block.line})",
                            0, namespace)
            if failure:
                return f"the setup above the block failed: {failure}"
        if block.source.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(
                block.source, namespace, f"{Path(example.path).name}:{block.line}",
                example.path, block.line)
            report: List[str] = []
            runner = doctest.DocTestRunner(
                optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
            runner.run(test, out=report.append, clear_globs=False)
            namespace.pop("__builtins__", None)
            return "".join(report) or None
        return _exec(block.source, example.path, block.line, namespace)


def _exec(source: str, filename: str, line: int, namespace: Dict[str, Any]) -> Optional[str]:
    """Run ``source`` (numbered from ``line`` + 1) in ``namespace``; None, or what it raised."""
    code = compile("\n" * line + source, filename, "exec")
    try:
        exec(code, namespace)
    except Exception as error:  # reported as the block's failure, with its own frames
        frames = [frame for frame in traceback.extract_tb(error.__traceback__)
                  if frame.filename != __file__]
        return ("it raised:\n" + "".join(traceback.format_list(frames))
                + "".join(traceback.format_exception_only(type(error), error)))
    finally:
        namespace.pop("__builtins__", None)
    return None
