"""Run by test_megatron_release_parsers.py in a process of its own, with one Megatron
release's code first on ``sys.path``: for every shared parity configuration whose flags that
release's parser has, that release's own ``parse_args`` against megaplug's facade
``parse_args`` -- which must find the release on its own (the imported Megatron) and give its
flag surface. Prints one JSON object: the release, the version megaplug found, and per
configuration the differences (missing / extra keys, values or types that differ)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference  # noqa: E402


def _no_jit_extensions() -> None:
    """Some releases build a CUDA extension at import; on a CPU machine that fails softly."""
    import torch.utils.cpp_extension as cpp_extension

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no CUDA toolchain: extension not built")

    cpp_extension.load_inline = cpp_extension.load = refuse


def _options() -> set[str]:
    from megatron.training.arguments import add_megatron_arguments

    parser = add_megatron_arguments(argparse.ArgumentParser(add_help=False))
    return {option for action in parser._actions for option in action.option_strings}


#: Values Megatron's parser computes from the environment when it builds the parser
#: (``default=int(os.getenv('WORLD_SIZE', '1'))``), which megaplug derives in validation.
FROM_THE_ENVIRONMENT_AT_PARSE_TIME = {"inprocess_active_world_size"}


def _differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    from megaplug.megatron._native import to_native

    ours = {key: to_native(value) for key, value in ours.items()}
    for key in FROM_THE_ENVIRONMENT_AT_PARSE_TIME:
        theirs.pop(key, None), ours.pop(key, None)
    found = [f"missing {key}" for key in sorted(set(theirs) - set(ours))]
    found += [f"extra {key}" for key in sorted(set(ours) - set(theirs))]
    for key in sorted(set(theirs) & set(ours)):
        expected, actual = theirs[key], ours[key]
        if type(expected) is not type(actual) or expected != actual:
            found.append(f"{key}: release {expected!r} ({type(expected).__qualname__}), "
                         f"megaplug {actual!r} ({type(actual).__qualname__})")
    return found


def _parsed(parse: Any) -> dict[str, Any] | str:
    """The namespace a parser gives, or ``"refuses"`` where it exits as argparse's error."""
    try:
        return vars(parse())
    except SystemExit:
        return "refuses"


def main() -> None:
    _no_jit_extensions()
    import megatron.core.package_info as package_info
    import megatron.training.arguments as arguments
    from megaplug.megatron import parse_args
    from megaplug import TargetEnvironment

    from megaplug import load

    options = _options()
    # what the parser declares: flags and environment values, not the settings megaplug
    # computes (data_parallel_size, ...), which Megatron's validate_args adds
    table = load([], target=TargetEnvironment())[0].table
    computed = {spec.dest for spec in table if spec.kind == "computed"}
    results: dict[str, list[str]] = {}
    added_later: set[str] = set()
    for path in reference.case_files() + reference.case_files("mutations"):
        case = reference.load_case(path)
        if not all(token.split("=", 1)[0] in options for token in case["argv"]
                   if token.startswith("--")):
            continue
        with reference.targeting(case), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            theirs = _parsed(arguments.parse_args)
            ours = _parsed(lambda: parse_args(
                argv=[*reference.third_party_blocks(), *case["argv"]],
                environ=dict(case.get("env") or {})))
        if isinstance(theirs, str) or isinstance(ours, str):  # a refusal: both must refuse
            results[path.stem] = [] if type(theirs) is type(ours) else [
                f"release {theirs if isinstance(theirs, str) else 'accepts'}, "
                f"megaplug {ours if isinstance(ours, str) else 'accepts'}"]
        else:
            added_later |= (set(ours) - set(theirs)) & (computed | {
                "_is_global_batch_size_explicitly_specified"})
            results[path.stem] = _differences(theirs, {
                key: value for key, value in ours.items()
                if key not in computed or key in theirs})
    print(json.dumps({"release": package_info.__version__,
                      "megaplug": TargetEnvironment().release_source(),
                      "computed_after_parse": sorted(added_later),
                      "cases": results}))


if __name__ == "__main__":
    main()
