"""Fine-grained activation offloading and the MoE paged stash: which activations go where."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Modules whose activations fine-grained offloading can move to the host.
OFFLOAD_MODULES = frozenset({"core_attn", "attn_proj", "expert_fc1", "fused_group_mlp",
                             "moe_act", "attn_norm", "mlp_norm", "qkv_linear", "gdp_qkv"})
#: Offloadable activations that live inside the MoE layer (or its fused grouped MLP).
INSIDE_MOE = ("moe_act", "expert_fc1", "fused_group_mlp")
#: Allowed values of the GTP rematerialization opt-in list.
GTP_REMAT_OPT_IN_MODULES = frozenset({"moe_latent_proj"})


def _fine_grained(config: Draft) -> bool:
    return bool(config.get("fine_grained_activation_offloading"))


def fine_grained_offloading_modules(config: Draft) -> None:
    """Fine-grained offloading names known modules, and not together with CPU offloading."""
    if not _fine_grained(config):
        return
    modules = view.offload_modules(config)
    if view.cpu_offloading(config):
        reject(config, "--fine-grained-activation-offloading does not work with "
                       "--cpu-offloading-num-layers",
               flags=("fine_grained_activation_offloading", "cpu_offloading_num_layers"),
               hint="use one of the two offloading schemes")
    if not modules:
        reject(config, "--fine-grained-activation-offloading needs --offload-modules",
               flags=("fine_grained_activation_offloading", "offload_modules"),
               hint="name the activations to offload, e.g. --offload-modules core_attn "
                    "attn_proj")
    unknown = [m for m in modules if m not in OFFLOAD_MODULES]
    if unknown:
        reject(config, f"unknown --offload-modules: {', '.join(map(str, unknown))}",
               flags=("offload_modules",),
               hint=f"choose from {', '.join(sorted(OFFLOAD_MODULES))}")


def attention_projection_offloaded_with_core_attention(config: Draft) -> None:
    """The projection's input is core attention's output, which core attention needs back."""
    modules = view.offload_modules(config)
    if _fine_grained(config) and "attn_proj" in modules and "core_attn" not in modules:
        reject(config, "--offload-modules attn_proj needs core_attn offloaded too",
               flags=("offload_modules",), hint="add core_attn to --offload-modules")


def offloading_and_recompute_do_not_overlap(config: Draft) -> None:
    """What a recomputed block rebuilds cannot also be offloaded from inside it."""
    if not _fine_grained(config) or view.recompute_granularity_final(config) != "selective":
        return
    offloaded, recomputed = view.offload_modules(config), view.recompute_modules_final(config)
    if "gdp_qkv" in offloaded and "gdp_in_proj" in recomputed:
        reject(config, "--offload-modules gdp_qkv does not work with --recompute-modules "
                       "gdp_in_proj (the recomputation discards what would be offloaded)",
               flags=("offload_modules", "recompute_modules"), hint="drop one of the two")
    inside = [m for m in INSIDE_MOE if m in offloaded]
    if "moe" in recomputed and inside:
        reject(config, f"--offload-modules {' '.join(inside)} does not work while whole MoE "
                       "layers are recomputed (moe in --recompute-modules or "
                       "--moe-layer-recompute)",
               flags=("offload_modules", "recompute_modules"),
               hint="remove moe from the recomputed modules, or these from --offload-modules")


def offloading_amounts_in_range(config: Draft) -> None:
    if not _fine_grained(config):
        return
    for dest in ("min_offloaded_tensor_size", "delta_offload_bytes_across_pp_ranks"):
        value = config.get(dest)
        if value is not None and value < 0:
            reject(config, f"{shown(config, dest)} must not be negative", flags=(dest,),
                   hint="use 0 or more")
    fraction = config.get("activation_offload_fraction")
    if fraction is not None and not 0 <= fraction <= 1:
        reject(config, f"{shown(config, 'activation_offload_fraction')} must be between 0 and 1",
               flags=("activation_offload_fraction",), hint="use a fraction in [0, 1]")


def fused_group_mlp_offloading(config: Draft) -> None:
    """The fused grouped MLP is offloaded whole, from the TE op fuser's path."""
    modules = view.offload_modules(config)
    if not _fine_grained(config) or "fused_group_mlp" not in modules:
        return
    if not config.get("use_transformer_engine_op_fuser"):
        reject(config, "--offload-modules fused_group_mlp needs --use-transformer-engine-op-fuser",
               flags=("offload_modules", "use_transformer_engine_op_fuser"),
               hint="add --use-transformer-engine-op-fuser")
    partial = [m for m in ("expert_fc1", "moe_act") if m in modules]
    if partial:
        reject(config, f"--offload-modules fused_group_mlp already covers {' and '.join(partial)}",
               flags=("offload_modules",), hint=f"remove {' and '.join(partial)}")


def paged_stash_requirements(config: Draft) -> None:
    """The paged stash holds expert activations of capacity-bounded ranks, by itself."""
    if not config.get("moe_paged_stash"):
        return
    if view.cpu_offloading(config):
        reject(config, "--moe-paged-stash does not work with --cpu-offloading-num-layers",
               flags=("moe_paged_stash", "cpu_offloading_num_layers"),
               hint="drop one of the two")
    if config.get("moe_expert_rank_capacity_factor") is None:
        reject(config, "--moe-paged-stash needs --moe-expert-rank-capacity-factor",
               flags=("moe_paged_stash", "moe_expert_rank_capacity_factor"),
               hint="set --moe-expert-rank-capacity-factor")
    conflict = [m for m in INSIDE_MOE if m in view.offload_modules(config)]
    if conflict:
        reject(config, f"--moe-paged-stash already stashes what --offload-modules "
                       f"{' '.join(conflict)} would offload",
               flags=("moe_paged_stash", "offload_modules"), hint=f"remove {' '.join(conflict)}")


def gated_delta_product_recompute_range(config: Draft) -> None:
    count = config.get("gdp_num_chunk_states_to_recompute")
    if config.get("gdp_cutedsl_kernel") and count is not None and not 0 <= count <= 64:
        reject(config, f"{shown(config, 'gdp_num_chunk_states_to_recompute')} must be between 0 "
                       "and 64",
               flags=("gdp_num_chunk_states_to_recompute", "gdp_cutedsl_kernel"),
               hint="use a value in [0, 64]")


def gtp_remat_opt_in_modules_known(config: Draft) -> None:
    modules = view.names_of(config.get("gtp_remat_opt_in_modules"))
    unknown = [m for m in modules if m not in GTP_REMAT_OPT_IN_MODULES]
    if unknown:
        reject(config, f"unknown --gtp-remat-opt-in-modules: {', '.join(map(str, unknown))}",
               flags=("gtp_remat_opt_in_modules",),
               hint=f"choose from {', '.join(sorted(GTP_REMAT_OPT_IN_MODULES))}")


CHECKS: tuple[Check, ...] = (
    fine_grained_offloading_modules,
    attention_projection_offloaded_with_core_attention,
    offloading_and_recompute_do_not_overlap,
    offloading_amounts_in_range,
    fused_group_mlp_offloading,
    paged_stash_requirements,
    gated_delta_product_recompute_range,
    gtp_remat_opt_in_modules_known,
)
