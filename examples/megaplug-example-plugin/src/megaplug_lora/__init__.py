"""megaplug-example-plugin: LoRA adapter settings, as a template for third-party plugins.

A complete plugin in two modules:

* :class:`LoraOptions` (in ``options.py``) declares the flags, a hidden deprecated alias
  and a computed value; the ``add_args`` hook imports it and hands it to the kernel (a
  process that reads the flag table from megaplug's cache never imports it);
* ``rules`` holds the plugin's rules, each a small named function declared with a
  decorator: a normalization migrates the alias ``--lora-r`` to ``--lora-rank`` (warning,
  provenance), a derivation computes ``lora_scaling = lora_alpha / lora_rank``, and checks
  report problems, including ones that depend on core values;
* ``megaplug_plugin`` says who it is, that its rules run after the ``model`` plugin's (its
  checks read ``hidden_size``, which ``model`` owns), and which rules it has.

The kernel runs the rules, and names the rule in the provenance of each value it sets and
in each problem it reports.
"""

from megaplug import Draft, FlagDeclarations, PluginInfo, Rules, hookimpl

__version__ = "0.1.0"

#: The plugin's normalizations, derivations and checks, in the order each phase runs them.
rules = Rules()

@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the LoRA flags."""
    # imported here, not at the top: a flag table read from megaplug's cache needs none
    from .options import LoraOptions

    flags.add_options(LoraOptions)


# -- normalize -------------------------------------------------------------------------


@rules.normalize
def migrate_lora_r(config: Draft) -> None:
    """``--lora-r N`` is the old spelling of ``--lora-rank N``; the old key leaves the result."""
    old = config.lora_r
    if old is not None:
        if config.given("lora_rank") and config.lora_rank != old:
            config.error(
                f"--lora-r {old} and --lora-rank {config.lora_rank} disagree",
                flags=("lora_r", "lora_rank"),
                hint="drop --lora-r, the deprecated spelling of --lora-rank")
        else:
            config.set("lora_rank", old, inputs=("lora_r",),
                       reason="--lora-r is the deprecated spelling of --lora-rank")
            config.warn(f"--lora-r is deprecated; use --lora-rank {old}", flags=("lora_r",))
    config.discard("lora_r", reason="retired spelling of lora_rank")


# -- derive ----------------------------------------------------------------------------


@rules.derive
def derive_scaling(config: Draft) -> None:
    """lora_scaling = lora_alpha / lora_rank (validate reports a rank that is not positive)."""
    rank = config.lora_rank
    if rank is not None and rank > 0:
        config.set("lora_scaling", config.lora_alpha / rank,
                   inputs=("lora_alpha", "lora_rank"))


# -- validate --------------------------------------------------------------------------


@rules.validate
def check_rank_positive(config: Draft) -> None:
    rank = config.lora_rank
    if rank is not None and rank <= 0:
        config.error(f"--lora-rank {rank} must be a positive integer", flags=("lora_rank",),
                     hint="use a small rank such as 8, or drop --lora-rank to train without "
                          "adapters")


@rules.validate
def check_rank_below_hidden(config: Draft) -> None:
    """An adapter of rank >= hidden size is no cheaper than training the layer itself."""
    rank, hidden = config.lora_rank, config.get("hidden_size")
    if rank is not None and rank > 0 and hidden is not None and rank >= hidden:
        config.error(f"--lora-rank {rank} is not smaller than --hidden-size {hidden}",
                     flags=("lora_rank", "hidden_size"),
                     hint=f"use a rank below {hidden}; LoRA saves memory only when the rank is "
                          "much smaller than the hidden size")


@rules.validate
def check_dropout(config: Draft) -> None:
    dropout = config.lora_dropout
    if not 0.0 <= dropout < 1.0:
        config.error(f"--lora-dropout {dropout} is outside [0, 1)", flags=("lora_dropout",),
                     hint="use a probability such as 0.05, or 0 for none")


@rules.validate
def check_alpha(config: Draft) -> None:
    if config.lora_alpha <= 0:
        config.error(f"--lora-alpha {config.lora_alpha} must be positive",
                     flags=("lora_alpha",), hint="a common choice is twice the rank")


@rules.validate
def check_settings_without_rank(config: Draft) -> None:
    """Adapter settings without a rank do nothing; say so rather than ignore them silently."""
    if config.lora_rank is not None:
        return
    unused = [d for d in ("lora_alpha", "lora_dropout", "lora_target_modules") if config.given(d)]
    if unused:
        spelled = ", ".join(config.spelling(d) for d in unused)
        config.warn(f"{spelled} {'has' if len(unused) == 1 else 'have'} no effect without "
                    "--lora-rank", flags=tuple(unused))


megaplug_plugin = PluginInfo(
    name="lora",
    description="Low-rank adapters (LoRA): train small rank-r updates of frozen linear layers.",
    version=__version__,
    after=("model",),
    rules=rules,
)

__all__ = ["LoraOptions", "TARGET_MODULES", "megaplug_plugin", "rules"]


def __getattr__(name: str) -> object:
    if name in ("LoraOptions", "TARGET_MODULES"):  # from the options module, on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
