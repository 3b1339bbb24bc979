"""A byte-level tokenizer for the training example.

Every UTF-8 byte is one token (ids 0-255) and one extra id marks the end of a document,
the way Megatron's ``NullTokenizer`` reserves ``vocab_size`` as its end-of-document id.
It needs no vocabulary file, so the example runs anywhere.
"""

from __future__ import annotations

from typing import Iterable

BYTE_VOCAB = 256


class ByteTokenizer:
    """Bytes in, bytes out: ``vocab_size`` is 257 (256 bytes plus the end-of-document id)."""

    def __init__(self) -> None:
        self.eod = BYTE_VOCAB

    @property
    def vocab_size(self) -> int:
        """Number of distinct ids the tokenizer can produce."""
        return BYTE_VOCAB + 1

    def tokenize(self, text: str) -> list[int]:
        """The ids of ``text``'s UTF-8 bytes (no end-of-document marker)."""
        return list(text.encode("utf-8"))

    def detokenize(self, ids: Iterable[int]) -> str:
        """Text for ``ids``; the end-of-document id and padding ids are dropped."""
        data = bytes(i for i in ids if 0 <= i < BYTE_VOCAB)
        return data.decode("utf-8", errors="replace")


def vocab_size_with_padding(orig_vocab_size: int, divisible_by: int,
                            tensor_model_parallel_size: int = 1) -> int:
    """Pad the vocabulary like Megatron: up to a multiple of divisible_by x TP size.

    Padding keeps the embedding table splittable evenly across tensor-parallel ranks and
    its rows a multiple of a hardware-friendly size.
    """
    multiple = max(1, divisible_by) * max(1, tensor_model_parallel_size)
    return -(-orig_vocab_size // multiple) * multiple
