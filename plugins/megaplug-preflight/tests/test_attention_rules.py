"""Attention rules at their boundaries: each problem whole (plugin, message, flags, hint) and the
near miss that must pass, found by the flags a problem names.

Megatron's checks (``TransformerConfig.__post_init__`` / ``MLATransformerConfig``): heads and
query groups over TP ranks, the gated delta net's five linear-attention sizes, value heads
grouped by key heads and both split over TP x CP, the Householder count (>= 1), DSA's kernel
backend, RoPE fusion, indexer and CP all-gather, RoPE fusion's Transformer Engine versions, MLA's
cached latents, heterogeneous layers without MLA, ``--no-rope-freq`` against the layer count and
flash decoding, and MuP's base width (> 0).
"""

from __future__ import annotations

from typing import Any

import pytest
from preflight_launches import (
    AT_MODEL_BUILD,
    DENSE,
    ENVIRON,
    MLA,
    MLA_FUSED,
    every_problem as whole,
    pre,
    target,
)

import megaplug


GDN = ["--experimental-attention-variant", "gdn", "--linear-attention-freq", "2",
       "--linear-conv-kernel-dim", "4", "--linear-key-head-dim", "16",
       "--linear-value-head-dim", "16", "--linear-num-key-heads", "4",
       "--linear-num-value-heads", "8"]
DSA_FUSED = [*MLA_FUSED, "--experimental-attention-variant", "dsa", "--disable-bias-linear"]
DSA = [*DSA_FUSED, "--no-rope-fusion"]
ROPE = ["--position-embedding-type", "rope"]
#: Without the parallel plugin, the rules must assume Megatron's sizes of 1.
NO_PARALLEL = ["-p", "no:parallel"]


def without(argv: list[str], *dropped: str) -> list[str]:
    """``argv`` less each dropped flag and its value (flags that take one)."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in dropped:
            skip = True
        else:
            out.append(token)
    return out



def set_after_parsing(argv: list[str], **values: Any) -> list[tuple]:
    """Every problem of ``DENSE + argv`` parsed by the Megatron facade, ``values`` then set on
    the namespace (as Megatron code may), validated with pre-flight."""
    from megaplug import megatron as facade

    environ = dict(ENVIRON)
    args = facade.parse_args(argv=[*DENSE, *argv], environ=environ)
    for dest, value in values.items():
        setattr(args, dest, value)
    try:
        facade.validate_args(args, target=target(), environ=environ, torch_types=False,
                             preflight=True)
    except megaplug.ConfigError as error:
        return [(p.plugin, p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
                for p in error.problems]
    return []



GDN_SHAPES_HINT = "set every linear-attention size flag"
GDN_SHAPES = ("linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
              "linear_num_key_heads", "linear_num_value_heads")
GDN_RANKS_FLAGS = ("--tensor-model-parallel-size", "--context-parallel-size")
DSA_CP = pre("DeepSeek sparse attention (DSA) with context parallelism supports only "
             "--cp-comm-type all_gather, got {}", ("--cp-comm-type", "--context-parallel-size"),
             "use --cp-comm-type all_gather")
CASES: list[tuple[str, list[str], dict[str, Any], list[tuple]]] = [
    # -- heads and query groups, with Megatron's TP size 1 when no plugin declares it
    ("heads 3, no parallel plugin", [*NO_PARALLEL, "--num-attention-heads", "3",
                                     "--hidden-size", "96"], {}, []),
    ("groups 3, no parallel plugin", [*NO_PARALLEL, "--group-query-attention",
                                      "--num-query-groups", "3", "--num-attention-heads", "6",
                                      "--hidden-size", "96"], {}, []),
    ("groups, TP 0", ["--group-query-attention", "--num-query-groups", "2",
                      "--tensor-model-parallel-size", "0"], {},
     [("parallel", "--tensor-model-parallel-size is 0; it must be at least 1",
       ("--tensor-model-parallel-size",), "use 1 to turn this kind of parallelism off")]),
    # -- gated delta net
    ("gdn", GDN, {}, []),
    ("gdn sizes without gdn", ["--linear-num-key-heads", "4", "--linear-num-value-heads", "6",
                               "--tensor-model-parallel-size", "8"], {}, []),
    ("gdn one key head", [*GDN, "--linear-num-key-heads", "1", "--linear-num-value-heads", "3"],
     {}, []),
    ("gdn no key heads", [*GDN, "--linear-num-key-heads", "0", "--linear-num-value-heads", "2",
                          "--tensor-model-parallel-size", "4"], {},
     [pre("--linear-num-value-heads 2 is not a multiple of --linear-num-key-heads 0",
          ("--linear-num-value-heads", "--linear-num-key-heads"),
          "use a value-head count that is a multiple of the key-head count"),
      pre("--linear-num-value-heads 2 cannot be split over tensor x context parallel ranks (4)",
          ("--linear-num-value-heads", *GDN_RANKS_FLAGS),
          "use a multiple of 4 heads, or smaller parallel sizes")]),
    ("gdn over TP 2 x CP 2", [*GDN, "--linear-num-key-heads", "2", "--linear-num-value-heads",
                              "2", "--tensor-model-parallel-size", "2",
                              "--context-parallel-size", "2"], {},
     [pre(f"--linear-num-{kind}-heads 2 cannot be split over tensor x context parallel ranks "
          "(4)", (f"--linear-num-{kind}-heads", *GDN_RANKS_FLAGS),
          "use a multiple of 4 heads, or smaller parallel sizes") for kind in ("key", "value")]),
    ("gdn 3 heads, no parallel plugin", [*NO_PARALLEL, *GDN, "--linear-num-key-heads", "3",
                                         "--linear-num-value-heads", "3"], {}, []),
    ("householder 0", ["--gdp-num-householder", "0"], {},
     [pre("--gdp-num-householder 0 must be 1 or more", ("--gdp-num-householder",),
          "use at least one Householder reflection")]),
    ("householder 1", ["--gdp-num-householder", "1"], {}, []),
    # -- DeepSeek sparse attention
    ("dsa", DSA, {}, []),
    ("dsa, no GPU", DSA, {"capability": None}, []),
    ("dsa backend without dsa, no GPU", ["--dsa-kernel-backend", "tilelang"],
     {"capability": None}, []),
    ("dsa cudnn", [*DSA, "--dsa-kernel-backend", "cudnn"], {},
     [pre("--dsa-kernel-backend cudnn needs flash_mla, cudnn, not installed",
          ("--dsa-kernel-backend",),
          "install the kernel packages, or use --dsa-kernel-backend none")]),
    ("dsa rope fusion", [*DSA_FUSED, "--rope-type", "yarn"], {},
     [pre("DeepSeek sparse attention (DSA) does not support RoPE fusion, which is on (the "
          "default)", ("--experimental-attention-variant", "--no-rope-fusion"),
          "add --no-rope-fusion")]),
    ("dsa CP 2", [*DSA, "--context-parallel-size", "2"], {},
     [(*DSA_CP[:1], DSA_CP[1].format("p2p"), *DSA_CP[2:])]),
    ("dsa CP 2 per layer", [*DSA, "--context-parallel-size", "2", "--cp-comm-type",
                            *["p2p"] * 7, "a2a"], {},
     [(*DSA_CP[:1], DSA_CP[1].format("p2p p2p p2p p2p p2p p2p p2p a2a"), *DSA_CP[2:])]),
    ("dsa CP 2 allgather", [*DSA, "--context-parallel-size", "2", "--cp-comm-type",
                            "allgather"], {}, []),
    ("dsa CP 2 allgather per layer", [*DSA, "--context-parallel-size", "2", "--cp-comm-type",
                                      *["allgather"] * 8], {}, []),
    ("dsa, no parallel plugin", [*NO_PARALLEL, *DSA], {}, []),
    # Megatron's model check reads "all_gather" as allgather; validate_args' choices refuse it
    ("dsa CP 2 all_gather", [*DSA, "--context-parallel-size", "2", "--cp-comm-type",
                             "all_gather"], {},
     [("parallel", "--cp-comm-type all_gather: unknown communication type", ("--cp-comm-type",),
       "choose from p2p, a2a, allgather, a2a+p2p")]),
    # -- RoPE
    ("rope type rope", ["--rope-type", "rope"], {}, []),
    ("rope fusion, TE not installed", ROPE, {"packages": {"transformer_engine": None}},
     [pre("RoPE fusion (on by default) requires transformer_engine >= 1.4, not installed",
          ("--no-rope-fusion", "--position-embedding-type"),
          "add --no-rope-fusion, or install Transformer Engine")]),
    ("no rope fusion, TE not installed", [*ROPE, "--no-rope-fusion"],
     {"packages": {"transformer_engine": None}}, []),
    ("interleaved rope fusion, TE 2.2", [*ROPE, "--rotary-interleaved"],
     {"packages": {"transformer_engine": "2.2.0"}},
     [pre("--rotary-interleaved with RoPE fusion requires transformer_engine >= 2.3, found "
          "2.2.0", ("--rotary-interleaved", "--no-rope-fusion"),
          "add --no-rope-fusion, or upgrade Transformer Engine")]),
    ("rope fusion, TE 2.2", ROPE, {"packages": {"transformer_engine": "2.2.0"}}, []),
    ("interleaved rope fusion, TE 2.3", [*ROPE, "--rotary-interleaved"],
     {"packages": {"transformer_engine": "2.3.0"}}, []),
    # -- MLA
    ("mla cached latents, fused", [*MLA_FUSED, "--cache-mla-latents"], {},
     [pre("--cache-mla-latents does not work with RoPE fusion (on by default)",
          ("--cache-mla-latents", "--no-rope-fusion"), "add --no-rope-fusion")]),
    ("mla cached latents", [*MLA, "--cache-mla-latents"], {}, []),
    ("heterogeneous mla", [*MLA, "--heterogeneous-layers-config-path", "/nonexistent.json"], {},
     [("model", "--heterogeneous-layers-config-path /nonexistent.json: cannot read the file "
       "(cannot read heterogeneous layers config /nonexistent.json: No such file or directory)",
       ("--heterogeneous-layers-config-path",), "give the path of an existing JSON file"),
      pre("--heterogeneous-layers-config-path does not support --multi-latent-attention",
          ("--heterogeneous-layers-config-path", "--multi-latent-attention"),
          "drop one of the two")]),
    ("heterogeneous", ["--heterogeneous-layers-config-path", "/nonexistent.json"], {},
     [("model", "--heterogeneous-layers-config-path /nonexistent.json: cannot read the file "
       "(cannot read heterogeneous layers config /nonexistent.json: No such file or directory)",
       ("--heterogeneous-layers-config-path",), "give the path of an existing JSON file")]),
    # -- layers without RoPE
    ("no-rope freq 2", ["--no-rope-freq", "2"], {}, []),
    ("no-rope freq 8", ["--no-rope-freq", "8"], {}, []),
    ("no-rope freq 3", ["--no-rope-freq", "3"], {},
     [pre("--no-rope-freq 3 does not divide --num-layers 8", ("--no-rope-freq", "--num-layers"),
          "use a period that divides 8: 1, 2, 4 or 8")]),
    ("no-rope freq with flash decode", ["--no-rope-freq", "2", "--flash-decode"], {},
     [pre("--no-rope-freq does not work with --flash-decode", ("--no-rope-freq", "--flash-decode"),
          "drop one of the two")]),
    ("no-rope flags per layer", ["--no-rope-freq", "[0,1,0,1,0,1,0,1]"], {}, []),
    ("no-rope flags, too few", ["--no-rope-freq", "[0,1,0,1]"], {},
     [pre("--no-rope-freq lists 4 layers, but the model has --num-layers 8",
          ("--no-rope-freq", "--num-layers"), "give one 0/1 flag per layer (8)")]),
    # -- MuP
    ("mup base 0", ["--use-mup", "--mup-base-hidden-size", "0"], {},
     [pre("--mup-base-hidden-size 0 must be positive", ("--mup-base-hidden-size", "--use-mup"),
          "give the base model's hidden size, or leave it unset")]),
    ("mup base 1", ["--use-mup", "--mup-base-hidden-size", "1"], {}, []),
    ("mup base unset", ["--use-mup"], {}, []),
    ("mup base 0 without mup", ["--mup-base-hidden-size", "0"], {}, []),
]


#: Settings no command line leaves unset (every one has a default), unset by Megatron code.
UNSET_CASES: list[tuple[str, list[str], dict[str, Any], list[tuple]]] = [
    ("gdn without conv kernel", GDN, {"linear_conv_kernel_dim": None},
     [pre("gated delta net attention needs --linear-conv-kernel-dim",
          ("--experimental-attention-variant", "--linear-conv-kernel-dim"), GDN_SHAPES_HINT)]),
    ("gdn without value dim and key heads", GDN,
     {"linear_value_head_dim": None, "linear_num_key_heads": None},
     [pre("gated delta net attention needs --linear-value-head-dim, --linear-num-key-heads",
          ("--experimental-attention-variant", "--linear-value-head-dim",
           "--linear-num-key-heads"), GDN_SHAPES_HINT)]),
    ("gdn without value heads", GDN, {"linear_num_value_heads": None},
     [pre("gated delta net attention needs --linear-num-value-heads",
          ("--experimental-attention-variant", "--linear-num-value-heads"), GDN_SHAPES_HINT)]),
    ("dense without gdn sizes", [], dict.fromkeys(GDN_SHAPES), []),
    # TransformerConfig: no query-group count means one group per head
    ("groups unset: one per head, TP 4", ["--group-query-attention", "--num-attention-heads",
                                          "6", "--hidden-size", "96",
                                          "--tensor-model-parallel-size", "4"],
     {"num_query_groups": None},
     [pre("--num-attention-heads 6 cannot be split over --tensor-model-parallel-size 4",
          ("--num-attention-heads", "--tensor-model-parallel-size"),
          "use a multiple of 4 heads, or a tensor parallel size that divides 6: 1, 2, 3 or 6"),
      pre("--num-query-groups 6 is neither a multiple nor a divisor of "
          "--tensor-model-parallel-size 4",
          ("--num-query-groups", "--tensor-model-parallel-size"),
          "use a query-group count that is a multiple or a divisor of 4")]),
]


@pytest.mark.parametrize("argv, values, expected",
                         [pytest.param(a, v, e, id=name) for name, a, v, e in UNSET_CASES])
def test_attention_rule_with_unset_settings(argv: list[str], values: dict[str, Any],
                                            expected: list[tuple]) -> None:
    assert set_after_parsing(argv, **values) == expected


@pytest.mark.parametrize("argv, options, expected",
                         [pytest.param(a, o, e, id=name) for name, a, o, e in CASES])
def test_attention_rule_whole(argv: list[str], options: dict[str, Any],
                              expected: list[tuple]) -> None:
    assert whole(argv, **options) == expected


def test_dsa_from_the_hybrid_pattern_needs_no_kernel_backend() -> None:
    # without the model plugin, --dsa-kernel-backend reads as Megatron's "none": a DSA layer
    # of the hybrid pattern needs no fused kernel, so no GPU either
    found = whole(["-p", "no:model", "--hybrid-layer-pattern", "MD"], capability=None,
                  base=["--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
                        "--seq-length", "128"])
    assert not [p for p in found if "dsa_kernel_backend" in p[2]]
