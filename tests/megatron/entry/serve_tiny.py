"""An entry script whose own flags clash with megaplug's spellings: ``-p/--port`` (megaplug's
plugin selection) and ``--config`` (megaplug's settings files). Run it through the switch."""

import json

from megatron.training.arguments import parse_and_validate_args


def add_server_args(parser):
    group = parser.add_argument_group(title="server")
    group.add_argument("-p", "--port", type=int, default=80, help="The port to serve on.")
    group.add_argument("--config", default=None, help="The server's own config file.")
    return parser


if __name__ == "__main__":
    args = parse_and_validate_args(extra_args_provider=add_server_args,
                                   args_defaults={"tokenizer_type": "NullTokenizer"})
    print(json.dumps({"port": args.port, "config": args.config,
                      "num_layers": args.num_layers}))
