"""A tiny entry script written the way Megatron-LM's are: it knows nothing of megaplug.

Run it through the switch: ``python -m megaplug.megatron pretrain_tiny.py ARGS``.
"""

import json

from megatron.training import get_args
from megatron.training.arguments import (
    core_transformer_config_from_args,
    parse_and_validate_args,
)


def add_tiny_args(parser):
    group = parser.add_argument_group(title="tiny")
    group.add_argument("--tiny-knob", type=int, default=3, help="A knob of this script.")
    return parser


if __name__ == "__main__":
    args = parse_and_validate_args(extra_args_provider=add_tiny_args,
                                   args_defaults={"tokenizer_type": "NullTokenizer"})
    config = core_transformer_config_from_args(args)
    print(json.dumps({
        "parse_and_validate_args": parse_and_validate_args.__module__,
        "get_args_is_args": get_args() is args,
        "tiny_knob": args.tiny_knob,
        "num_layers": config.num_layers,
        "hidden_size": config.hidden_size,
        "params_dtype": str(config.params_dtype),
        "attention_backend": f"{type(args.attention_backend).__module__}."
                             f"{type(args.attention_backend).__qualname__}",
    }))
