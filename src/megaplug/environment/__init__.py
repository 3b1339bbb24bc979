"""The launch's target: the GPU generation and packages a job will run with.

Checks that depend on a package's version or the GPU's compute capability ask
:class:`TargetEnvironment`, which reads this machine lazily (``_devices``: NVML through
ctypes, never torch unless NVML cannot tell) unless the caller states the target
(``--assume``), so that a login node can validate a launch for the cluster it targets.
"""

from ._release_data import ReleaseData
from ._environment import (KNOWN_PACKAGES, TargetEnvironment, parse_assumed_capability,
                           parse_assumed_memory, parse_assumed_package, parse_version)

__all__ = ["KNOWN_PACKAGES", "ReleaseData", "TargetEnvironment", "parse_assumed_capability",
           "parse_assumed_memory",
           "parse_assumed_package", "parse_version"]
