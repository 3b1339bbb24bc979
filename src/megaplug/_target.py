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
from typing import Mapping

from ._record import MutableRecord

_NOT_ASKED = object()

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


class TargetEnvironment(MutableRecord):
    """Package versions, device capability and environment variables a check may consult.

    ``packages`` maps import names to a version string, or ``None`` for "not installed";
    names not in it are looked up on this machine when first asked. ``device_capability``
    is the GPU's ``(major, minor)``; when not stated it is read from torch on first use,
    and is ``None`` on a machine without a GPU. ``environ`` is the process environment
    the job will see (defaults to ``os.environ``).
    """

    __slots__ = ("packages", "device_capability", "environ", "_looked_up")
    _hidden = ("_looked_up",)

    def __init__(
        self,
        packages: dict[str, str | None] | None = None,
        device_capability: tuple[int, int] | None | object = _NOT_ASKED,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.packages: dict[str, str | None] = {} if packages is None else packages
        self.device_capability = device_capability
        self.environ = environ
        self._looked_up: dict[str, str | None] = {}

    def with_environ(self, environ: Mapping[str, str]) -> TargetEnvironment:
        """The same target for a process that sees ``environ`` (a fresh lookup cache)."""
        return TargetEnvironment(self.packages, self.device_capability, environ)

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

    def capability(self) -> tuple[int, int] | None:
        """The target GPU's compute capability, or ``None`` when there is no GPU."""
        if self.device_capability is _NOT_ASKED:
            self.device_capability = _local_device_capability()
        return self.device_capability  # type: ignore[return-value]


def _installed_version(import_name: str) -> str | None:
    from importlib import util

    # find_spec first: it is cheap, and a missing package then never pays for
    # importing importlib.metadata (tens of milliseconds) on the start-up path.
    try:
        spec = util.find_spec(import_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    candidates = _DISTRIBUTIONS.get(import_name, (import_name, import_name.replace("_", "-")))
    version = _version_beside(spec, candidates)
    if version is not None:
        return version
    from importlib import metadata

    for dist in candidates:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "0"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _version_beside(spec: object, distributions: tuple[str, ...]) -> str | None:
    """The version in a ``NAME-VERSION.dist-info`` directory next to the package, if any.

    That is where pip puts it; reading the directory name avoids importlib.metadata.
    """
    origin = getattr(spec, "origin", None)
    if not origin or origin in ("built-in", "frozen"):
        return None
    package_dir = os.path.dirname(origin)
    site = os.path.dirname(package_dir) if origin.endswith("__init__.py") else package_dir
    wanted = {_normalized(name) for name in distributions}
    try:
        entries = os.listdir(site)
    except OSError:
        return None
    for entry in entries:
        if entry.endswith(".dist-info"):
            name, _, version = entry[: -len(".dist-info")].partition("-")
            if version and _normalized(name) in wanted:
                return version
    return None


def _local_device_capability() -> tuple[int, int] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return (int(major), int(minor))
