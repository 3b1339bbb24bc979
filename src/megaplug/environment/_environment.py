"""The target environment: installed package versions and the GPU a job will run on.

Checks that depend on Transformer Engine's version or the GPU's compute capability ask
this service instead of importing packages or touching CUDA themselves. By default it
looks at the real machine, lazily (nothing is imported until a check asks); a caller
can state the target instead (``megaplug resolve --assume transformer_engine=2.17.1
--assume-device-capability 9.0``), so a login node or CI can validate a launch for the
cluster it targets.
"""

from __future__ import annotations

import os
import re

from .._record import MutableRecord
from .._startup import find_spec, version_beside
from .._startup import metadata as importlib_metadata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

_NOT_ASKED = object()
#: What to do about a kernel whose flag table is for another line than its target's.
OTHER_LINE_HINT = ("resolve with the kernel of the target's release: megaplug.load(target=TARGET) "
                   "or megaplug.resolve(argv, target=TARGET)")

#: Import names whose distribution is spelled differently on PyPI.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "transformer_engine": ("transformer_engine", "transformer-engine", "transformer_engine_torch"),
    "nvidia_resiliency_ext": ("nvidia-resiliency-ext", "nvidia_resiliency_ext"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "multistorageclient": ("multi-storage-client", "multistorageclient"),
    "mamba_ssm": ("mamba-ssm", "mamba_ssm"),
    "yaml": ("PyYAML",),
}


def parse_version(text: str) -> tuple[int, ...]:
    """A comparable tuple of the leading numeric release parts (``'2.17.1+cu12'`` -> ``(2, 17, 1)``)."""  # noqa: E501
    parts = []
    for piece in re.split(r"[.+-]", text):
        match = re.match(r"\d+", piece)
        if not match:
            break
        parts.append(int(match.group()))
    return tuple(parts)


#: A version as ``--assume`` takes it: PEP 440's public form and an optional local part
#: (``2.17.1``, ``2.7.0.dev0``, ``1.0rc1``, ``2.17.1+cu12``), without epoch or ``v``.
# patterns are text, compiled (and cached by re) when first used: not by every resolve
_VERSION = (
    r"(?ia)^\d+(?:\.\d+)*"
    r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:[-_.]?(?:post|rev|r)[-_.]?\d*)?(?:[-_.]?dev[-_.]?\d*)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$")
#: Packages megaplug's checks ask about: a stated name close to one of these is a typo.
KNOWN_PACKAGES = ("transformer_engine", "torch", "apex", "flash_attn", "flash_attn_3",
                  "flashinfer", "multistorageclient", "mamba_ssm", "nvidia_resiliency_ext",
                  "megatron", "megatron_core", "yaml", "triton", "numpy", "tensorstore",
                  "zarr")


def parse_assumed_package(item: str, known: tuple[str, ...] = KNOWN_PACKAGES,
                          ) -> tuple[str, str | None]:
    """``NAME=VERSION`` (``NAME=none``: not installed) as (import name, version or None).

    Raises ``ValueError`` saying what is wrong: no ``=``, a name that is no package name
    (or a near miss of a known one, ``transformer_enigne``), or a version that is not
    one (``2.x``, ``banana``, ``-1``).
    """
    name, sep, version = item.partition("=")
    name, version = name.strip(), version.strip()
    if not sep or not name:
        raise ValueError(f"--assume expects NAME=VERSION (or NAME=none), got {item!r}")
    if not _is_package_name(name):
        raise ValueError(f"--assume {item!r}: {name!r} is not a package name")
    name = name.replace("-", "_")
    if name not in known and name.lower() in known:
        name = name.lower()  # distribution names are case-insensitive
    if name not in known:
        import difflib  # only an unknown name pays for it

        near = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if near:
            raise ValueError(f"--assume {item!r}: no check asks about a package {name!r}; "
                             f"did you mean {near[0]}?")
    if version.lower() == "none":
        return name, None
    if name == "megatron_core" and version in ("main", "seed"):
        return name, version  # Megatron's lines by name: Megatron-LM main, megaplug's own
    if not (_is_release(version) or re.match(_VERSION, version)):
        raise ValueError(f"--assume {item!r}: {version!r} is not a version (give one such as "
                         "2.17.1, 2.7.0.dev0 or 1.0rc1, or none for not installed)")
    if name == "megatron_core":
        _check_megatron_version(item, version)
    return name, version


def _check_megatron_version(item: str, version: str) -> None:
    """A Megatron version is read by the one mapping from versions to release lines: one it
    cannot read as a version is refused here, as a resolve would refuse it (an unsupported
    but well-formed one, 0.12.9, is the resolve's problem, with everything else)."""
    from ._releases import line_of

    stated = line_of(version, "as stated")
    unreadable = line_of("not-a-version", "as stated")
    if stated.problem and stated.problem.replace(repr(version), "") == \
            unreadable.problem.replace(repr("not-a-version"), ""):  # type: ignore[union-attr]
        raise ValueError(f"--assume {item!r}: {stated.problem}")


def parse_assumed_capability(text: str) -> tuple[int, int] | None:
    """``MAJOR.MINOR`` (``9.0``; ``10`` is ``10.0``) or ``none`` (no GPU) as
    ``--assume-device-capability`` takes it; ``ValueError`` for anything else."""
    if text.strip().lower() == "none":
        return None
    major, dot, minor = text.strip().partition(".")
    if not (_is_number(major, 3) and int(major) > 0 and (_is_number(minor, 3) or not dot)):
        raise ValueError(f"--assume-device-capability expects MAJOR.MINOR (such as 8.0, 9.0 "
                         f"or 10.0) or none, got {text!r}")
    return int(major), int(minor or 0)


# Names, versions and capabilities are checked with str methods where they can be: a
# regular expression is compiled in every resolve stating --assume (docs/performance.md).

def _is_number(text: str, most_digits: int | None = None) -> bool:
    """ASCII digits only (``str.isdigit`` also takes other scripts' digits), at least one."""
    return (text.isascii() and text.isdigit()
            and (most_digits is None or len(text) <= most_digits))


def _is_release(version: str) -> bool:
    """A plain release (``2.17.1``): what most versions are, and all they need checking for."""
    return all(_is_number(part) for part in version.split("."))


def _is_package_name(name: str) -> bool:
    """An import or distribution name: an ASCII letter or ``_``, then letters, digits and
    ``_.-`` (``-`` is read as ``_``)."""
    return (name[:1].isalpha() or name[:1] == "_") and name.isascii() and all(
        character.isalnum() or character in "_.-" for character in name)


class TargetEnvironment(MutableRecord):
    """Package versions, device capability and environment variables a check may consult.

    ``packages`` maps import names to a version string, or ``None`` for "not installed";
    names not in it are looked up on this machine when first asked. ``device_capability``
    is the GPU's ``(major, minor)``; when not stated it is read from the NVIDIA driver on
    first use (see :func:`local_device_capability`), and is ``None`` on a machine without
    a GPU. ``environ`` is the process environment
    the job will see (defaults to ``os.environ``). ``own_process`` says the target is this
    very process -- megaplug running inside the training job (the switch; the facade under
    torchrun) -- so a package that is not importable here is absent, not unknown
    (:meth:`knows_package`).
    """

    __slots__ = ("packages", "device_capability", "environ", "own_process", "_looked_up",
                 "_line", "device_memory")
    _hidden = ("_looked_up", "_line")

    def __init__(
        self,
        packages: dict[str, str | None] | None = None,
        device_capability: tuple[int, int] | None | object = _NOT_ASKED,
        environ: Mapping[str, str] | None = None,
        own_process: bool = False,
    ) -> None:
        self.packages: dict[str, str | None] = {} if packages is None else packages
        _check_packages(self.packages)
        self.device_capability = device_capability
        self.environ = environ
        self.own_process = own_process
        self._looked_up: dict[str, str | None] = {}
        self._line: Any = None
        #: bytes of memory of the target GPU (``--assume-device-memory``), read on first use
        self.device_memory: int | None | object = _NOT_ASKED

    def with_environ(self, environ: Mapping[str, str]) -> TargetEnvironment:
        """The same target for a process that sees ``environ`` (a fresh lookup cache)."""
        target = TargetEnvironment(self.packages, self.device_capability, environ,
                                   self.own_process)
        target.device_memory = self.device_memory
        return target

    def knows_package(self, import_name: str) -> bool:
        """Whether :meth:`package_version` is certain for this package: the target states
        it, or the target is this process, where what does not import is absent. On a
        login node a package missing here may well be installed on the cluster: unknown."""
        return self.own_process or import_name in self.packages

    def getenv(self, name: str, default: str | None = None) -> str | None:
        env = os.environ if self.environ is None else self.environ
        return env.get(name, default)

    def package_version(self, import_name: str) -> str | None:
        """The installed version of a package by import name, or ``None`` if absent."""
        if import_name in self.packages:
            return self.packages[import_name]
        if import_name not in self._looked_up:
            self._looked_up[import_name] = _installed_version(import_name)
        return self._looked_up[import_name]

    def version_at_least(self, import_name: str, minimum: str) -> bool:
        found = self.package_version(import_name)
        return found is not None and parse_version(found) >= parse_version(minimum)

    def requirement_problem(self, import_name: str, minimum: str | None = None) -> str | None:
        """``None`` when satisfied, else ``'requires X >= v, found w'`` / ``'... not installed'``."""  # noqa: E501
        found = self.package_version(import_name)
        wanted = f"{import_name} >= {minimum}" if minimum else import_name
        if found is None:
            return f"requires {wanted}, not installed"
        if minimum and parse_version(found) < parse_version(minimum):
            return f"requires {wanted}, found {found}"
        return None

    # -- the Megatron release (see _releases) ------------------------------------------------

    def line_choice(self, package: str = "megatron_core") -> Any:
        """The measured release of ``package`` this target runs and where it came from (a
        :class:`~megaplug.environment._releases.LineChoice`); only Megatron has releases."""
        from ._releases import PACKAGE, choose_line

        if package != PACKAGE:
            raise ValueError(f"no measured releases are known for {package!r}")
        if self._line is None:
            self._line = choose_line(self.packages)
        return self._line

    def release_line(self, package: str = "megatron_core") -> str:
        """The measured release in force: ``"0.13.0"`` ... ``"0.19.2"``, ``"main"`` or
        ``"seed"``."""
        return self.line_choice(package).line  # type: ignore[no-any-return]

    def release_source(self, package: str = "megatron_core") -> str:
        """The release and where it came from, in words (``megaplug list`` / ``explain``)."""
        return self.line_choice(package).describe()  # type: ignore[no-any-return]

    def release_lines(self) -> dict[str, str]:
        """Every package's release in force, as the kernel keys its flag table on them."""
        from ._releases import PACKAGE

        return {PACKAGE: self.release_line(PACKAGE)}

    def line_problems(self) -> list[tuple[str, bool]]:
        """What a resolve reports about the target's Megatron version: ``(message, True)``
        for one megaplug cannot target (older, or no version), ``(message, False)`` for one
        newer than every release it knows (resolved as the newest)."""
        choice = self.line_choice()
        return [(message, is_problem) for message, is_problem in (
            (choice.problem, True), (choice.warning, False)) if message]

    def other_line_than(self, lines: Mapping[str, str]) -> str | None:
        """Why a flag table for ``lines`` does not fit this target (its flags, defaults and
        rules would silently be another release's), or ``None`` when it does."""
        if self.release_lines() == dict(lines):
            return None
        shown = [", ".join(f"{package} {line}" for package, line in sorted(chosen.items()))
                 for chosen in (lines, self.release_lines())]
        return f"this kernel's flag table is for {shown[0]}, but the target runs {shown[1]}"

    @property
    def megatron(self) -> Any:
        """The megatron-core release this target runs, for rule conditions
        (:class:`~megaplug.environment._releases.MegatronRelease`:
        ``config.env.megatron.at_least("0.18.0")``, ``.between("0.16.0", "0.17.1")``)."""
        from ._releases import MegatronRelease

        return MegatronRelease(self.release_line())

    def capability(self) -> tuple[int, int] | None:
        """The target GPU's compute capability, or ``None`` when there is no GPU."""
        if self.device_capability is _NOT_ASKED:
            from ._devices import local_device_capability

            self.device_capability = local_device_capability(
                os.environ if self.environ is None else self.environ)
        return self.device_capability  # type: ignore[return-value]

    def memory(self) -> int | None:
        """Bytes of memory of the target GPU (NVML's total of the first visible device),
        or ``None`` when unknown (no GPU here and none stated)."""
        if self.device_memory is _NOT_ASKED:
            from ._devices import local_device_memory

            self.device_memory = local_device_memory(
                os.environ if self.environ is None else self.environ)
        return self.device_memory  # type: ignore[return-value]


def _check_packages(packages: Any) -> None:
    """``TargetEnvironment(packages=...)`` maps import names to version text or ``None``;
    anything else is the caller's mistake, named (a version ``0.17`` written as a float
    would read as ``0.17`` but ``0.10`` as ``0.1``: it is never guessed)."""
    if not isinstance(packages, dict):
        raise TypeError(f"packages must be a dict of import name -> version text (or None), "
                        f"not {type(packages).__name__}")
    for name, version in packages.items():
        if not isinstance(name, str):
            raise TypeError(f"packages: {name!r} is a {type(name).__name__}, not an import "
                            "name (text)")
        if version is not None and not isinstance(version, str):
            raise TypeError(f"packages[{name!r}] is {version!r}, a {type(version).__name__}; "
                            f"a version is text (packages={{{name!r}: '0.17.1'}}), or None "
                            "for not installed")


_MEMORY_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
                 "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


#: The most device memory ``--assume-device-memory`` takes: beyond it no GPU is meant.
_LARGEST_DEVICE_MEMORY = 1 << 50


def parse_assumed_memory(text: str) -> int | None:
    """``--assume-device-memory``: a size (``139.8GiB``, ``80GB``, ``85899345920``) in bytes,
    or ``none`` (unknown); ``ValueError`` for anything else."""
    stripped = text.strip()
    if stripped.lower() == "none":
        return None
    number = stripped.rstrip("KMGTiBb")
    unit = stripped[len(number):].upper()
    whole, _, fraction = number.partition(".")
    if (unit not in _MEMORY_UNITS or not _is_number(whole)
            or not (fraction == "" or _is_number(fraction))):
        raise ValueError(f"--assume-device-memory expects a size such as 80GB, 139.8GiB or "
                         f"a number of bytes, or none, got {text!r}")
    # exact integer arithmetic: a float would lose bytes, and overflow on a long number
    scale = 10 ** len(fraction)
    size = (int(whole or "0") * scale + int(fraction or "0")) * _MEMORY_UNITS[unit] // scale
    if size <= 0:
        raise ValueError(f"--assume-device-memory must be positive, got {text!r}")
    if size > _LARGEST_DEVICE_MEMORY:
        raise ValueError(f"--assume-device-memory {text[:40]!r}{'...' if len(text) > 40 else ''}"
                         f" is more memory than any GPU has (at most 1 PiB is taken)")
    return size


def _installed_version(import_name: str) -> str | None:
    # the package's spec first, then the version beside it: a missing package, or one pip
    # installed, never imports importlib.metadata (megaplug._startup, items 3 and 4)
    try:
        spec = find_spec(import_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    candidates = _DISTRIBUTIONS.get(import_name, (import_name, import_name.replace("_", "-")))
    version = version_beside(spec, candidates)
    if version is not None:
        return version
    metadata = importlib_metadata()
    for dist in candidates:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "0"
