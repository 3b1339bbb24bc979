"""megaplug-gtp: tensor-parallel weight sharding with rematerialization (GTP).

Adds ``--tensor-parallel-num-weight-shards``, its expert twin and the ``--gtp-*`` flags.
Derives ``gtp_weight_remat_size`` / ``expert_gtp_weight_remat_size`` (weight shards divided
by the (expert) tensor-parallel size) and, after the ``parallel`` plugin has derived the
data-parallel size, takes the remat ranks out of it. Checks what GTP cannot combine with.
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, Rules


def remat_active(config: Draft) -> bool:
    """Whether some weight is rematerialized: most GTP checks apply only then."""
    return config.gtp_weight_remat_size > 1 or config.expert_gtp_weight_remat_size > 1


# named, not imported: the rules module is imported when a resolve first derives. (Not bound
# to ``rules``: importing the module ``megaplug_gtp.rules`` sets that attribute.)
_rules = Rules(derive=("megaplug_gtp.rules:DERIVATIONS",))
_rules.validate("megaplug_gtp.rules:REMAT_CHECKS", when=remat_active)

megaplug_plugin = PluginInfo(
    name="gtp",
    description="GTP: tensor-parallel weight sharding with weight rematerialization.",
    options="megaplug_gtp.options:GtpOptions",
    version="0.1.0",
    # parallel derives the data-parallel size GTP refines; precision decides whether
    # gradients are reduced in fp32 already
    after=("parallel", "precision"),
    rules=_rules,
)
