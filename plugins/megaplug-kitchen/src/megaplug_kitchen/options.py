"""The settings of the kitchen plugin: one way to choose a quantization recipe."""

from typing import Optional

from megaplug import FlagDeclarations, options


@options
class KitchenOptions:
    """The resolved kitchen settings (at most one of the two is set)."""

    kitchen_config_file: Optional[str] = None
    kitchen_recipe_number: Optional[int] = None


def declare(flags: FlagDeclarations) -> None:
    """Declare the two recipe flags; a recipe comes from a config file or a number, not both."""
    recipe = flags.add_mutually_exclusive_group()
    recipe.add_argument("--kitchen-config-file", type=str, default=None,
                        help="Configure kitchen quantization from this YAML file.")
    recipe.add_argument("--kitchen-recipe-number", type=int, default=None,
                        help="Quantize every linear layer (not attention) with this built-in "
                             "kitchen recipe.")
