"""MLA derivation and checks, each a small function."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Hybrid-pattern layer symbols whose attention uses MLA projections ('+': MLA, 'D':
#: DeepSeek sparse attention). Plain attention ('*'), Mamba ('M'), GDN ('G'), MLP ('-')
#: and MoE ('E') do not. ('+' counts wherever a pattern language accepts it.)
MLA_ATTENTION_SYMBOLS = frozenset("+D")

#: Separates the main pattern from the multi-token-prediction patterns.
MTP_SEPARATOR = "/"


def _mla_symbols_in(pattern: object) -> list[str]:
    if not isinstance(pattern, str):
        return []
    return sorted(MLA_ATTENTION_SYMBOLS.intersection(pattern))


def _hybrid_patterns(config: Draft) -> list[tuple[str, str]]:
    """(dest, pattern) of every hybrid layer pattern in force, MTP patterns included."""
    main = config.get("hybrid_layer_pattern")
    patterns = [("hybrid_layer_pattern", main)]
    merged = isinstance(main, str) and MTP_SEPARATOR in main
    if (config.get("mtp_num_layers") or 0) > 0 and not merged:
        # a legacy MTP pattern is appended to the main one when that has no MTP part
        patterns.append(("mtp_hybrid_override_pattern", config.get("mtp_hybrid_override_pattern")))
    return [(dest, p) for dest, p in patterns if isinstance(p, str) and p]


def hybrid_mla_layers_enable_mla(config: Draft) -> None:
    """A hybrid pattern with MLA-based attention layers turns multi-latent attention on."""
    if config.multi_latent_attention:
        return
    for dest, pattern in _hybrid_patterns(config):
        symbols = _mla_symbols_in(pattern)
        if symbols:
            config.set("multi_latent_attention", True, inputs=(dest,),
                       reason=f"the hybrid pattern has MLA attention layers "
                              f"({', '.join(repr(s) for s in symbols)})")
            return


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (hybrid_mla_layers_enable_mla,)


def mla_excludes_group_query_attention(config: Draft) -> None:
    """MLA replaces grouped key/value heads with a latent projection; both cannot apply
    (Megatron checks this from 0.16)."""
    if config.env.megatron.before("0.16.0"):
        return
    if config.multi_latent_attention and config.get("group_query_attention"):
        config.error("--multi-latent-attention and --group-query-attention cannot be used "
                     "together", flags=("multi_latent_attention", "group_query_attention"),
                     hint="drop --group-query-attention (MLA compresses keys and values "
                          "through --kv-lora-rank instead)")


def down_proj_fusion_needs_mla(config: Draft) -> None:
    """The fused down-projection only exists in MLA layers."""
    if config.mla_down_proj_fusion and not config.multi_latent_attention:
        config.error("--mla-down-proj-fusion needs --multi-latent-attention",
                     flags=("mla_down_proj_fusion", "multi_latent_attention"),
                     hint="add --multi-latent-attention, or drop --mla-down-proj-fusion")


CHECKS: tuple[Callable[[Draft], None], ...] = (
    mla_excludes_group_query_attention,
    down_proj_fusion_needs_mla,
)
