"""In-process restart, fault tolerance and their runtime needs.

Megatron accepts these flags at argument time and only imports nvidia-resiliency-ext when
the job starts; a missing package is therefore reported here as a warning, early.
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_NVRX = "nvidia_resiliency_ext"


def default_active_world_size(config: Draft) -> None:
    """Without --inprocess-active-world-size every rank of WORLD_SIZE starts working."""
    if config.given("inprocess_active_world_size"):
        return
    # the resolved world size: WORLD_SIZE as a setting, from the environment or a file
    world_size = config.get("world_size", 1)
    if world_size != config.inprocess_active_world_size:
        config.set("inprocess_active_world_size", world_size, reason="defaults to WORLD_SIZE")


def warn_missing_resiliency_ext(config: Draft) -> None:
    """In-process restart and the fault tolerance package come from nvidia-resiliency-ext."""
    users = [dest for dest in ("inprocess_restart", "enable_ft_package") if config[dest]]
    if not users:
        return
    problem = config.env.requirement_problem(_NVRX)
    if problem:
        spelled = " and ".join(config.spelling(d) for d in users)
        config.warn(f"{spelled} {problem}; the job will fail when it starts "
                    "(pip install nvidia-resiliency-ext)", flags=tuple(users))


def warn_inprocess_settings(config: Draft) -> None:
    """Timeouts and spares that cannot work as given."""
    if not config.inprocess_restart:
        return
    soft, hard = config.inprocess_soft_timeout, config.inprocess_hard_timeout
    if soft >= hard:
        config.warn(f"--inprocess-soft-timeout {soft} is not below --inprocess-hard-timeout "
                    f"{hard}: ranks are killed before the soft timeout can act",
                    flags=("inprocess_soft_timeout", "inprocess_hard_timeout"))
    world_size = config.get("world_size")
    active = config.inprocess_active_world_size
    if world_size is not None and active > world_size:
        config.warn(f"--inprocess-active-world-size {active} is larger than the world size "
                    f"{world_size}", flags=("inprocess_active_world_size",))


def warn_ft_timeouts_without_package(config: Draft) -> None:
    """Computing fault tolerance timeouts only means something with the package on."""
    if config.calc_ft_timeouts and not config.enable_ft_package:
        config.warn("--calc-ft-timeouts has no effect without --enable-ft-package",
                    flags=("calc_ft_timeouts", "enable_ft_package"))


NORMALIZE: tuple[Callable[[Draft], None], ...] = (default_active_world_size,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    warn_missing_resiliency_ext,
    warn_inprocess_settings,
    warn_ft_timeouts_without_package,
)
