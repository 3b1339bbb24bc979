"""FP8 and FP4: recipes, the layers kept in BF16, parameter gathers and output projections.

(FP8 with FP4, and FP4 parameter gathers without FP4, are validate_args' checks.)
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check


def bf16_edge_layers_not_with_delayed_scaling(config: Draft) -> None:
    """Delayed scaling keeps one amax history for all layers; it cannot skip the edges."""
    if (view.fp8_on(config) and config.get("first_last_layers_bf16")
            and config.get("fp8_recipe") == "delayed"):
        reject(config, "--first-last-layers-bf16 does not work with --fp8-recipe delayed",
               flags=("first_last_layers_bf16", "fp8_recipe"),
               hint="use another FP8 recipe (tensorwise, mxfp8, blockwise), or drop "
                    "--first-last-layers-bf16")


def bf16_edge_layer_counts_fit_a_stage(config: Draft) -> None:
    """The BF16 layers at each end fit within one pipeline stage."""
    if not (view.fp8_on(config) and config.get("first_last_layers_bf16")):
        return
    per_stage = view.layers_per_pipeline_stage(config)
    if per_stage is None:
        return  # a stage's size is unknown: nothing to hold the counts against
    for dest in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
        count = config.get(dest, 1)
        if count is not None and not 0 <= count <= per_stage:
            reject(config, f"{shown(config, dest)} must be between 0 and the {per_stage} layers "
                           "of a pipeline stage",
                   flags=(dest, "num_layers", "pipeline_model_parallel_size"),
                   hint=f"keep at most {per_stage} layers in BF16 at each end")


def custom_recipe_needs_quantizer_factory(config: Draft) -> None:
    """A custom FP8 or FP4 recipe is the quantizer factory the user names."""
    for fmt, recipe, factory in (("fp8", "fp8_recipe", "fp8_quantizer_factory"),
                                 ("fp4", "fp4_recipe", "fp4_quantizer_factory")):
        if config.get(fmt) and config.get(recipe) == "custom" and not config.get(factory):
            reject(config, f"{config.spelling(recipe)} custom needs {config.spelling(factory)}",
                   flags=(recipe, factory),
                   hint=f"name the factory's import path with {config.spelling(factory)} "
                        "package.module.function")


def fp8_parameter_gather_needs_fp8(config: Draft) -> None:
    """FP8 parameters only exist when the model computes in FP8 (validate_args checks the
    FP4 counterpart)."""
    if config.get("fp8_param_gather") and not view.fp8_on(config):
        reject(config, "--fp8-param-gather needs --fp8-format",
               flags=("fp8_param_gather", "fp8"),
               hint="add --fp8-format, or drop --fp8-param-gather")


def fp8_output_projection(config: Draft) -> None:
    """The FP8 output projection is an MXFP8 feature."""
    if not config.get("fp8_output_proj"):
        return
    if not view.fp8_on(config):
        reject(config, "--fp8-output-proj needs FP8 training (--fp8-format)",
               flags=("fp8_output_proj", "fp8"), hint="add --fp8-format e4m3 --fp8-recipe mxfp8")
    elif config.get("fp8_recipe") != "mxfp8":
        reject(config, f"--fp8-output-proj needs --fp8-recipe mxfp8, got "
                       f"{config.get('fp8_recipe')}",
               flags=("fp8_output_proj", "fp8_recipe"), hint="use --fp8-recipe mxfp8")


CHECKS: tuple[Check, ...] = (
    bf16_edge_layers_not_with_delayed_scaling,
    bf16_edge_layer_counts_fit_a_stage,
    custom_recipe_needs_quantizer_factory,
    fp8_parameter_gather_needs_fp8,
    fp8_output_projection,
)
