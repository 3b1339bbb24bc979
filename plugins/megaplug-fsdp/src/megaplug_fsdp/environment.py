"""Facts about the target machine that several FSDP checks share."""

from __future__ import annotations

from megaplug import Draft

BLACKWELL = 10


def device_arch(config: Draft) -> int:
    """The target GPU's major compute capability, 0 when unknown (treated as pre-Blackwell)."""
    capability = config.env.capability()
    return capability[0] if capability else 0


def single_device_connection(config: Draft) -> bool:
    """Whether CUDA_DEVICE_MAX_CONNECTIONS is set to exactly 1, which FSDP cannot overlap with."""
    return config.env.getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "1"


def set_if_declared(config: Draft, name: str, value: object, *, reason: str,
                    inputs: tuple[str, ...]) -> None:
    """Change another plugin's setting when that plugin is installed and the value differs."""
    if name in config and config[name] != value:
        config.set(name, value, reason=reason, inputs=inputs)
