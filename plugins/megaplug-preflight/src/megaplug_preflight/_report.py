"""How pre-flight words a problem: the flags, a hint, and when Megatron would have failed."""

from __future__ import annotations

from megaplug import Draft, divisors  # noqa: F401  (the checks' divisor helper, shared)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

    #: A pre-flight check: reads the draft, reports through :func:`reject`, changes nothing.
    Check = Callable[[Draft], None]

#: Appended to every message: the arguments pass Megatron's validate_args; the failure
#: would come later, once every rank builds its model.
AT_MODEL_BUILD = "Megatron would raise this when building the model"


def reject(config: Draft, message: str, *, flags: Sequence[str], hint: str) -> None:
    """Report one problem Megatron's model configuration would raise."""
    config.error(f"{message}; {AT_MODEL_BUILD}", flags=tuple(flags), hint=hint)


TRANSFORMER_ENGINE = "transformer_engine"


def te_shortfall(config: Draft, minimum: str) -> str | None:
    """``'requires transformer_engine >= v, found w'`` (or ``..., not installed``) when the
    target lacks that Transformer Engine, else None.

    A login node or laptop usually has no Transformer Engine. When it is not installed here
    and the target does not state a version (``--assume transformer_engine=...``), the
    target's version is unknown and the check is not made: validating for the cluster means
    stating its Transformer Engine. Inside the training process (the switch; the facade
    under torchrun) the target is this process: not installed here is absent, and the
    check is made.
    """
    env = config.env
    if env.package_version(TRANSFORMER_ENGINE) is None and not env.knows_package(
            TRANSFORMER_ENGINE):
        return None
    return env.requirement_problem(TRANSFORMER_ENGINE, minimum)


def shown(config: Draft, dest: str, value: Any = None) -> str:
    """A flag as the user wrote it, with its value: ``--tensor-model-parallel-size 4``."""
    if value is None:
        value = config.get(dest)
    spelling = config.spelling(dest)
    if isinstance(value, bool):
        return spelling
    if isinstance(value, (list, tuple)):
        return f"{spelling} {' '.join(str(getattr(v, 'name', v)) for v in value)}"
    return f"{spelling} {getattr(value, 'name', value)}"


def spoken(items: Sequence[Any]) -> str:
    """``[1, 2, 4]`` -> ``'1, 2 or 4'``."""
    words = [str(i) for i in items]
    if not words:
        return ""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
