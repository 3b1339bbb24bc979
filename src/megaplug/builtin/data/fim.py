"""Fill-in-the-middle dataset checks."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_FIM_TOKENS = ("fim_prefix_token", "fim_middle_token", "fim_suffix_token", "fim_pad_token",
               "fim_eod_token")


def check_fim(config: Draft) -> None:
    """FIM needs real data, non-zero rates and all five of its special tokens.

    Megatron 0.16 also refuses the legacy tokenizer. FIM's flags exist from 0.16 on: older
    lines leave ``fim_data`` off."""
    if not config.fim_data:
        return
    if config.mock_data:
        config.error("--fim-data has no mock dataset; --mock-data cannot be used with it",
                     flags=("fim_data", "mock_data"), hint="give a dataset with --data-path")
    if config.get("legacy_tokenizer"):  # a flag of Megatron 0.16 alone, among FIM's lines
        config.error("--fim-data is not supported with legacy tokenizers (--legacy-tokenizer)",
                     flags=("fim_data", "legacy_tokenizer"), hint="drop --legacy-tokenizer")
    for dest in ("fim_rate", "fim_spm_rate"):
        if not config[dest]:
            config.error(f"--fim-data needs a non-zero {config.spelling(dest)}, got "
                         f"{config[dest]}", flags=("fim_data", dest),
                         hint=f"set {config.spelling(dest)} to a probability above 0")
    missing = [config.spelling(d) for d in _FIM_TOKENS if config[d] is None]
    if missing:
        config.error(f"--fim-data needs its special tokens; missing {', '.join(missing)}",
                     flags=("fim_data", *missing), hint="set every FIM token")


VALIDATE: tuple[Callable[[Draft], None], ...] = (check_fim,)
