"""The multi-storage client switch and its deprecated opposite."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: The first Megatron release line where MSC is opt-in (``--enable-msc``, checked to be
#: installed); before it MSC is on unless ``--disable-msc`` turns it off, and nothing checks
#: the package.
OPT_IN_RELEASE = "0.18.0"


def apply_disable_msc(config: Draft) -> None:
    """The deprecated --disable-msc still wins over --enable-msc, as it always did."""
    if not config.disable_msc_deprecated or not config.enable_msc:
        return
    config.set("enable_msc", False, reason="--disable-msc overrides --enable-msc",
               inputs=("disable_msc_deprecated",))
    config.warn("--disable-msc overrides --enable-msc: the multi-storage client stays off",
                flags=("disable_msc_deprecated", "enable_msc"))


def check_msc_installed(config: Draft) -> None:
    """--enable-msc needs the multistorageclient package on the target machine; releases
    before MSC became opt-in only say when --disable-msc turned it off."""
    if config.env.megatron.before(OPT_IN_RELEASE):
        if not config.enable_msc:
            config.warn("the multi-storage client (MSC) is disabled", flags=("enable_msc",))
        return
    if not config.enable_msc:
        return
    problem = config.env.requirement_problem("multistorageclient")
    if problem:
        config.error(f"--enable-msc {problem}", flags=("enable_msc",),
                     hint="pip install multi-storage-client, or drop --enable-msc")
    else:
        config.warn("the multi-storage client (MSC) is enabled", flags=("enable_msc",))


NORMALIZE: tuple[Callable[[Draft], None], ...] = (apply_disable_msc,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (check_msc_installed,)
