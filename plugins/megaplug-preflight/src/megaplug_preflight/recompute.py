"""Activation recomputation: granularity, method, layer count, modules, and what they exclude."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown, te_shortfall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Modules selective recomputation knows.
RECOMPUTE_MODULES = frozenset({"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                               "shared_experts", "gdn_norm_out", "gdp_in_proj", "gdp_qkv",
                               "mhc"})

#: Transformer Engine version that recomputes FP8 activations and norms.
FP8_MODULE_RECOMPUTE_MIN_TE = "2.6.0dev0"


def _granularity(config: Draft) -> str | None:
    return config.get("recompute_granularity")


def cpu_offloading_layer_count(config: Draft) -> None:
    """CPU offloading moves fewer layers than the model has."""
    if not view.cpu_offloading(config):
        return
    count, num_layers = config.get("cpu_offloading_num_layers"), config.get("num_layers") or 0
    if count >= num_layers:
        reject(config, f"{shown(config, 'cpu_offloading_num_layers')} must be below "
                       f"{shown(config, 'num_layers', num_layers)}",
               flags=("cpu_offloading_num_layers", "num_layers"),
               hint=f"offload at most {max(num_layers - 1, 0)} layers")


def cpu_offloading_alone(config: Draft) -> None:
    """CPU offloading supports neither pipeline parallelism nor recomputation."""
    if not view.cpu_offloading(config):
        return
    pp = config.get("pipeline_model_parallel_size", 1)
    if pp > 1:
        reject(config, f"--cpu-offloading-num-layers does not work with "
                       f"{shown(config, 'pipeline_model_parallel_size')}",
               flags=("cpu_offloading_num_layers", "pipeline_model_parallel_size"),
               hint="use --pipeline-model-parallel-size 1, or drop CPU offloading")
    if _granularity(config) is not None:
        reject(config, f"--cpu-offloading-num-layers does not work with activation "
                       f"recomputation ({shown(config, 'recompute_granularity')})",
               flags=("cpu_offloading_num_layers", "recompute_granularity"),
               hint="drop the recomputation flags, or CPU offloading")


def recompute_granularity_and_method(config: Draft) -> None:
    """Full recomputation names a method; a method is block or uniform."""
    granularity, method = _granularity(config), config.get("recompute_method")
    if granularity is None:
        return
    if granularity not in ("full", "selective"):
        reject(config, f"{shown(config, 'recompute_granularity')} must be full or selective",
               flags=("recompute_granularity",), hint="use full or selective")
    if method is not None and method not in ("block", "uniform"):
        reject(config, f"{shown(config, 'recompute_method')} must be block or uniform",
               flags=("recompute_method",), hint="use block or uniform")
    elif method is None and granularity != "selective":
        reject(config, f"{shown(config, 'recompute_granularity')} needs --recompute-method "
                       "block or uniform",
               flags=("recompute_granularity", "recompute_method"),
               hint="add --recompute-method uniform (or block)")


def recompute_layer_count(config: Draft) -> None:
    """Full recomputation says how many layers; selective recomputation must not."""
    granularity, count = _granularity(config), config.get("recompute_num_layers")
    if granularity is None:
        return
    if granularity != "selective" and count is None:
        per_stage = view.layers_per_pipeline_stage(config)
        count_hint = ("1 or more" if per_stage is None
                      else f"between 1 and the {per_stage} layers per pipeline stage")
        reject(config, f"{shown(config, 'recompute_granularity')} needs --recompute-num-layers",
               flags=("recompute_granularity", "recompute_num_layers"),
               hint=f"add --recompute-num-layers N, N {count_hint}")
    elif granularity == "selective" and count is not None:
        reject(config, f"{shown(config, 'recompute_num_layers')} does not apply to selective "
                       "recomputation",
               flags=("recompute_num_layers", "recompute_granularity"),
               hint="drop --recompute-num-layers, or use --recompute-granularity full")


def distributed_activations_not_with_sequence_parallel(config: Draft) -> None:
    """Sequence parallelism already shards the saved activations."""
    if (_granularity(config) is not None and config.get("distribute_saved_activations")
            and config.get("sequence_parallel")):
        reject(config, "--distribute-saved-activations does not work with --sequence-parallel",
               flags=("distribute_saved_activations", "sequence_parallel"),
               hint="drop --distribute-saved-activations")


def recompute_modules_known(config: Draft) -> None:
    if _granularity(config) != "selective":
        return
    unknown = [m for m in view.recompute_modules(config) if m not in RECOMPUTE_MODULES]
    if unknown:
        reject(config, f"unknown --recompute-modules: {', '.join(map(str, unknown))}",
               flags=("recompute_modules",),
               hint=f"choose from {', '.join(sorted(RECOMPUTE_MODULES))}")


def recompute_modules_need_their_layers(config: Draft) -> None:
    """Each selectively recomputed module must exist in the model."""
    if _granularity(config) != "selective":
        return
    modules = view.recompute_modules(config)
    needs = (("moe_act", "moe_grouped_gemm", bool(config.get("moe_grouped_gemm")),
              "--moe-grouped-gemm"),
             ("mla_up_proj", "multi_latent_attention", view.multi_latent_attention(config),
              "--multi-latent-attention"),
             ("gdn_norm_out", "experimental_attention_variant", view.is_gated_delta_net(config),
              "--experimental-attention-variant gdn (or gdn2)"))
    for module, dest, present, spelled in needs:
        if module in modules and not present:
            reject(config, f"--recompute-modules {module} needs {spelled}",
                   flags=("recompute_modules", dest),
                   hint=f"add {spelled}, or drop {module} from --recompute-modules")


def shared_expert_recompute_not_with_overlap(config: Draft) -> None:
    if (_granularity(config) == "selective"
            and "shared_experts" in view.recompute_modules(config)
            and config.get("moe_shared_expert_intermediate_size") is not None
            and config.get("moe_shared_expert_overlap")):
        reject(config, "--recompute-modules shared_experts does not work with "
                       "--moe-shared-expert-overlap",
               flags=("recompute_modules", "moe_shared_expert_overlap"),
               hint="drop one of the two")


def fp8_module_recompute(config: Draft) -> None:
    """Recomputing FP8 activations or norms needs current scaling and a recent TE."""
    if _granularity(config) != "selective" or not view.fp8_on(config):
        return
    modules = [m for m in ("moe_act", "layernorm") if m in view.recompute_modules(config)]
    if not modules:
        return
    if config.get("fp8_recipe") == "delayed":
        reject(config, f"--recompute-modules {' '.join(modules)} does not work with "
                       "--fp8-recipe delayed",
               flags=("recompute_modules", "fp8_recipe"),
               hint="use another FP8 recipe, or drop these modules")
    what = f"recomputing {' and '.join(modules)} in FP8"
    problem = te_shortfall(config, FP8_MODULE_RECOMPUTE_MIN_TE)
    if problem:
        reject(config, f"{what} {problem}",
               flags=("recompute_modules", "fp8"), hint="upgrade Transformer Engine")


def moe_layer_recompute_not_with_full(config: Draft) -> None:
    """``--moe-layer-recompute`` is selective recomputation of MoE layers."""
    if config.get("moe_layer_recompute") and _granularity(config) == "full":
        reject(config, "--moe-layer-recompute does not work with --recompute-granularity full",
               flags=("moe_layer_recompute", "recompute_granularity"),
               hint="drop --moe-layer-recompute (full recomputation covers MoE layers)")


CHECKS: tuple[Check, ...] = (
    cpu_offloading_layer_count,
    cpu_offloading_alone,
    recompute_granularity_and_method,
    recompute_layer_count,
    distributed_activations_not_with_sequence_parallel,
    recompute_modules_known,
    recompute_modules_need_their_layers,
    shared_expert_recompute_not_with_overlap,
    fp8_module_recompute,
    moe_layer_recompute_not_with_full,
)
