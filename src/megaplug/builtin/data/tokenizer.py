"""What each tokenizer type needs when it is built (reported early, as warnings).

Megatron only finds these out when the tokenizer is constructed at start-up, after the
arguments were accepted; a warning names the gap before the job is launched.
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Settings each tokenizer type reads when it is built.
_NEEDS: dict[str, tuple[str, ...]] = {
    "BertWordPieceLowerCase": ("vocab_file",),
    "BertWordPieceCase": ("vocab_file",),
    "GPT2BPETokenizer": ("vocab_file", "merge_file"),
    "SentencePieceTokenizer": ("tokenizer_model",),
    "GPTSentencePieceTokenizer": ("tokenizer_model",),
    "HuggingFaceTokenizer": ("tokenizer_model",),
    "Llama2Tokenizer": ("tokenizer_model",),
    "TikTokenizer": ("tokenizer_model",),
    "MultimodalTokenizer": ("tokenizer_model",),
    "SFTTokenizer": ("tokenizer_model",),
    "NullTokenizer": ("vocab_size",),
    "NullMultimodalTokenizer": ("vocab_size",),
}


def warn_missing_tokenizer_inputs(config: Draft) -> None:
    """Name the files or sizes the chosen tokenizer will ask for."""
    kind = config.tokenizer_type
    missing = [dest for dest in _NEEDS.get(kind or "", ()) if config[dest] is None]
    if missing:
        spelled = " and ".join(config.spelling(d) for d in missing)
        config.warn(f"--tokenizer-type {kind} will need {spelled} when the tokenizer is built",
                    flags=("tokenizer_type", *missing))


def derive_special_tokens_from_tiktoken(config: Draft) -> None:
    """--tiktoken-special-tokens is read as --tokenizer-special-tokens (0.16, 0.17).

    Megatron 0.16 and 0.17 read the deprecated ``--tiktoken-special-tokens`` as
    ``--tokenizer-special-tokens`` (``tokenizer_special_tokens`` in those lines) when that
    is not given; older lines keep them apart, later ones lack the old flag."""
    old = config.get("tiktoken_special_tokens")
    if not old or "tokenizer_special_tokens" not in config or config.tokenizer_special_tokens \
            or config.env.megatron.before("0.16.0"):
        return
    config.warn("--tiktoken-special-tokens is deprecated; use --tokenizer-special-tokens",
                flags=("tiktoken_special_tokens",))
    config.set("tokenizer_special_tokens", old, reason="--tiktoken-special-tokens is its "
               "deprecated spelling", inputs=("tiktoken_special_tokens",))


DERIVE: tuple[Callable[[Draft], None], ...] = (derive_special_tokens_from_tiktoken,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (warn_missing_tokenizer_inputs,)
