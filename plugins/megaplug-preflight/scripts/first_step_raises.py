"""List every raise, assert and exit that Megatron's code reaches after the model is built, per
release, and say which the configuration alone decides: the data behind ``first_step.py``.

    python plugins/megaplug-preflight/scripts/first_step_raises.py [--mirror GIT_DIR]
        [--wheel SITE_PACKAGES] [--out JSON]

Each release tag of the Megatron-LM mirror (``core_v0.13.0`` ... ``core_v0.19.0`` with their
patches, and main at ``d98e8a64dd``) is unpacked with ``git archive`` and the installed
megatron-core 0.19.2 wheel is read in place; nothing is imported. Every module is parsed with
``ast``. A *site* is a ``raise``, an ``assert`` or a ``sys.exit``/``exit`` call inside a function
the first training step reaches (``SCOPES``: the forward passes, the MoE router, token dispatch
and its utilities, the pipeline schedules, the optimizer and its step, DDP and its buffers,
checkpoint saving, ``train_step``/``train``): the scope's root functions and, within the same
file, every function they call by name. Each site gets a key that stays the same across
releases while its file, function and message do (``file:function:message``), its line in
each release, the enclosing ``if`` conditions (an ``else`` branch as ``not (...)``) and, for an
assert, its test.

A site is *config-decidable* when its conditions read nothing but attributes of the
configuration objects (``config.``, ``args.``, ``self.config.``, ``ddp_config.``, ...),
constants and a few pure built-ins: then the launch's flags alone decide whether it raises,
and pre-flight can refuse it at resolve. The rest depend on data or run-time state (token
counts, shapes, process groups, NaNs) or raise unconditionally (abstract methods). The
verdict is mechanical and over-inclusive (a condition over configuration attributes that
validate_args or the model build already refuse counts too); ``first_step.py`` says which of
them pre-flight refuses and why the others need no rule.

When a release is added: add its tag to ``TAGS`` (or point ``--wheel`` at it), run this
script and review the diff of ``tests/first_step_raises.json``: new config-decidable keys are
the candidates for rules.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "first_step_raises.json"
MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"
WHEEL = Path.home() / ".cache/megaplug/megatron-core-0.19.2-py312/lib/python3.12/site-packages"
#: megaplug's release name -> the mirror's tag or commit (0.19.2 comes from the wheel).
TAGS = {
    "0.13.0": "core_v0.13.0", "0.13.1": "core_v0.13.1", "0.14.0": "core_v0.14.0",
    "0.15.0": "core_v0.15.0", "0.15.1": "core_v0.15.1", "0.15.2": "core_v0.15.2",
    "0.15.3": "core_v0.15.3", "0.16.0": "core_v0.16.0", "0.16.1": "core_v0.16.1",
    "0.17.0": "core_v0.17.0", "0.17.1": "core_v0.17.1", "0.18.0": "core_v0.18.0",
    "0.18.2": "core_v0.18.2", "0.19.0": "core_v0.19.0", "main": "d98e8a64dd",
}
ORDER = [*list(TAGS)[:-1], "0.19.2", "main"]

ALL = "*"
#: Where the first step goes: (file glob under megatron/, root functions). ``ALL`` takes every
#: function of the file; ``-__init__`` every one but the constructors (built with the model,
#: judged by the model-build pre-flight); a tuple names the roots.
SCOPES: list[tuple[str, Any]] = [
    ("core/transformer/moe/router.py", ALL),
    ("core/transformer/moe/token_dispatcher.py", ALL),
    ("core/transformer/moe/moe_utils.py", ALL),
    ("core/transformer/moe/moe_layer.py", "-__init__"),
    ("core/transformer/moe/experts.py", "-__init__"),
    ("core/transformer/moe/shared_experts.py", "-__init__"),
    ("core/transformer/transformer_layer.py", "forward*"),
    ("core/transformer/transformer_block.py", "forward*"),
    ("core/transformer/attention.py", "forward*"),
    ("core/transformer/dot_product_attention.py", "forward*"),
    ("core/transformer/multi_latent_attention.py", "forward*"),
    ("core/transformer/mlp.py", "forward*"),
    ("core/transformer/multi_token_prediction.py", "forward*"),
    ("core/models/gpt/gpt_model.py", "forward*"),
    ("core/models/common/language_module/language_module.py", "compute_language_model_loss"),
    ("core/pipeline_parallel/schedules.py", ALL),
    ("core/optimizer/*.py", ALL),
    ("core/distributed/distributed_data_parallel.py", ALL),
    ("core/distributed/param_and_grad_buffer.py", ALL),
    ("core/distributed/finalize_model_grads.py", ALL),
    ("core/dist_checkpointing/serialization.py", ("save", "get_default_save_*")),
    ("core/dist_checkpointing/strategies/*.py", "-*load*"),
    ("core/dist_checkpointing/state_dict_utils.py", "-*load*"),
    ("core/dist_checkpointing/validation.py", "-*load*"),
    ("training/checkpointing.py", ("save_checkpoint",)),
    ("training/training.py", ("train_step", "train")),
]

#: Configuration objects: an attribute chain rooted here reads the launch's settings.
CONFIG_ROOTS = {"config", "args", "ddp_config", "optimizer_config", "transformer_config",
                "tf_config", "model_config", "get_args()", "self.config", "self.args",
                "self.ddp_config", "self.optimizer_config", "self.transformer_config",
                "self.tf_config", "self.model_config"}
#: Values the launch decides that the code computes or passes along under a plain name:
#: the schedules' micro-batch count (global batch / (micro batch x data-parallel size)) and
#: pipeline size, the save path's checkpoint type and format (from ``--ckpt-format``,
#: ``--non-persistent-ckpt-type``) and whether the save is non-persistent (the interval flag).
LAUNCH_DECIDED = {"num_microbatches", "pipeline_parallel_size", "ckpt_type", "ckpt_format",
                  "non_persistent_ckpt"}
PURE = {"len", "getattr", "hasattr", "isinstance", "any", "all", "int", "str", "bool"}
CONSTANTS = {"None", "True", "False"}


RULE, INTERNAL, INFERENCE, PACKAGE, WRAPPER, OPEN = (
    "refused by first_step.", "internal", "inference only", "environment", "Megatron-FSDP", "open")
#: The verdict on each decidable site: (function, text of its message or condition, verdict).
#: ``refused by first_step.RULE``: pre-flight refuses it (the corpus proves it); ``internal``:
#: an invariant of Megatron's own calls (the function runs only where it holds); ``inference
#: only``: not reached in training; ``environment``: an optional package megaplug's target
#: does not track; ``Megatron-FSDP``: the other wrapper's paths; ``open``: a candidate not yet
#: judged (validate_args or the model build may refuse it first).
VERDICTS: list[tuple[str, str, str]] = [
    ("MoELayer.forward", "performance may degrade",
     RULE + "moe_with_tensor_parallelism_needs_sequence_parallelism"),
    ("forward_backward_pipelining_with_interleaving", "microbatch_group_size_per_vp_stage >",
     RULE + "interleaved_schedule_micro_batch_groups"),
    ("forward_backward_pipelining_with_interleaving", "final_microbatch_group_size",
     RULE + "interleaved_schedule_micro_batch_groups"),
    ("TopKRouter.sinkhorn_load_balancing", "aux loss", RULE + "sinkhorn_routing_without_aux_loss"),
    ("MoELayer.preprocess", "latent", RULE + "latent_moe_excludes_shared_expert_overlap"),
    ("LanguageModule.compute_language_model_loss", "TE block",
     RULE + "te_cross_entropy_needs_transformer_engine"),
    ("MLP.forward", "moe_apply_probs_on_input", RULE + "probs_on_input_needs_top_1_routing"),
    ("DistributedDataParallel.__init__", "per-token loss",
     RULE + "per_token_loss_excludes_average_in_collective"),
    ("train", "Manual garbage", RULE + "manual_gc_interval_not_negative"),
    ("save_checkpoint", "legacy checkpoints", RULE + "async_save_needs_a_distributed_format"),
    ("save_checkpoint", "optimizer sharding type",
     RULE + "local_checkpoints_exclude_fully_reshardable_optimizer"),
    ("TopKRouter.quantile_balancing", "Quantile", RULE + "quantile_balancing_limits"),
    ("MultiTokenPredictionLayer._checkpointed_forward", "must be 1",
     RULE + "mtp_uniform_recompute_one_layer"),
    ("muon_optimizer", "fp16", RULE + "muon_excludes_fp16"),
    ("_get_megatron_emerging_optimizer", "fp16", RULE + "muon_excludes_fp16"),
    ("_ParamAndGradBucketGroup.__init__", "RS w/ FP32",
     RULE + "fp32_reduce_scatter_needs_one_optimizer_instance"),
    ("DistributedDataParallel.__init__", "Partial DistOpt",
     RULE + "partial_distributed_optimizer_needs_it"),
    ("num_floating_point_operations.transformer_flops", "group_query_attention",
     RULE + "mla_flops_exclude_group_query_attention"),
    ("MoEFlexTokenDispatcher.__init__", "DeepEP is not enabled",
     RULE + "early_flex_dispatcher_needs_deep_ep"),
    ("_ParamAndGradBucketGroup.", "overlap_", INTERNAL),
    ("_ParamAndGradBucketGroup.start_param_sync", "use_distributed_optimizer", INTERNAL),
    ("MoETokenDispatcher.set_shared_experts", "", INTERNAL),
    ("SharedExpertMLP.", "moe_shared_expert_overlap", INTERNAL),
    ("overlap_state_check.decorator.wrapper", "", INTERNAL),
    ("OptimizerCudaGraphWrapper.__call__", "", INTERNAL),
    ("forward_backward_pipelining_with_interleaving", "wait_handles", INTERNAL),
    ("get_start_time_from_progress_log", "", INTERNAL),
    ("MoEAlltoAllTokenDispatcher.__init__", "num_moe_experts", INTERNAL),
    ("GPTModel._postprocess", "mtp_num_layers", INTERNAL),
    ("SelfAttention.get_query_key_value_tensors", "num_query_groups", INTERNAL),
    ("_verify_integrity_manifest_impl", "", INTERNAL),
    ("InferenceTopKRouter.__init__", "", INFERENCE),
    ("MoELayer._setup_inference_mode", "", INFERENCE),
    ("Attention._get_pp_layer_offset_for_inference", "", INFERENCE),
    ("InferenceGroupedMLP.", "", INFERENCE),
    ("Attention.flash_decode", "", INFERENCE),
    ("", "HAVE_PSUTIL", PACKAGE), ("", "HAVE_PACKAGING", PACKAGE),
    ("", "HAVE_TENSORSTORE", PACKAGE), ("", "HAVE_ZARR", PACKAGE),
    ("", "HAVE_EMERGING_OPTIMIZERS", PACKAGE), ("", "has_rl_utils", PACKAGE),
    ("", "HAVE_MEGATRON_FSDP", PACKAGE), ("", "fused_apply_mla_rope", PACKAGE),
    ("DistributedOptimizer.", "use_megatron_fsdp", WRAPPER),
    ("FullyShardedOptimizer._validate_config", "", WRAPPER),
]


def verdict(site: dict[str, Any]) -> str | None:
    """The verdict on a site: a rule's for the sites pre-flight refuses (some read state the
    configuration set, ``self.shared_expert_overlap``), else one for each decidable site
    (``open`` when none is listed), else None."""
    for function, words, said in VERDICTS:
        if function in site["function"] and (words in site["message"]
                                             or words in site["condition"]):
            if said.startswith(RULE) or site["environment_decidable"]:
                return said
    return OPEN if site["environment_decidable"] else None


def unpack(mirror: str, tag: str, into: Path) -> Path:
    """The ``megatron/`` tree of ``tag``, unpacked under ``into`` (reused if already there)."""
    target = into / tag
    if not (target / "megatron").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", mirror, "archive", tag, "megatron"],
                                 capture_output=True, check=True).stdout
        with tempfile.TemporaryFile() as handle:
            handle.write(archive)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(target, filter="data")
    return target / "megatron"


def text(node: ast.AST | None) -> str:
    """Source text of a node, whitespace collapsed (the stable form keys and conditions use)."""
    return "" if node is None else re.sub(r"\s+", " ", ast.unparse(node)).strip()


class Functions(ast.NodeVisitor):
    """Every function of a module by qualified name (``Class.method``), with its node."""

    def __init__(self) -> None:
        self.found: dict[str, ast.AST] = {}
        self._stack: list[str] = []

    def _enter(self, node: ast.AST, name: str, record: bool) -> None:
        self._stack.append(name)
        if record:
            self.found[".".join(self._stack)] = node
        self.generic_visit(node)
        self._stack.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._enter(node, node.name, False)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._enter(node, node.name, True)

    visit_AsyncFunctionDef = visit_FunctionDef


def selected(functions: dict[str, ast.AST], roots: Any) -> set[str]:
    """The functions of the scope: its roots, then every function of the file they call."""
    def short(name: str) -> str:
        return name.rpartition(".")[2]
    if roots == ALL:
        chosen = set(functions)
    elif isinstance(roots, str) and roots.startswith("-"):
        chosen = {n for n in functions if not fnmatch.fnmatch(short(n), roots[1:])}
    else:
        patterns = (roots,) if isinstance(roots, str) else roots
        chosen = {n for n in functions if any(fnmatch.fnmatch(short(n), p) for p in patterns)}
    by_short: dict[str, list[str]] = {}
    for name in functions:
        by_short.setdefault(short(name), []).append(name)
    todo = list(chosen)
    while todo:
        for node in ast.walk(functions[todo.pop()]):
            if isinstance(node, ast.Call):
                func = node.func
                callee = func.id if isinstance(func, ast.Name) else (
                    func.attr if isinstance(func, ast.Attribute) else None)
                for name in by_short.get(callee or "", ()):
                    if name not in chosen:
                        chosen.add(name)
                        todo.append(name)
    return chosen


def sites_of(function: ast.AST) -> Iterator[tuple[ast.AST, list[str]]]:
    """Each site of one function's own body (nested functions are their own) with the
    conditions of the ``if`` branches around it."""
    def walk(body: list[ast.stmt], conditions: list[str]) -> Iterator[tuple[ast.AST, list[str]]]:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(statement, ast.If):
                yield from walk(statement.body, [*conditions, text(statement.test)])
                yield from walk(statement.orelse, [*conditions, f"not ({text(statement.test)})"])
                continue
            if isinstance(statement, (ast.Raise, ast.Assert)) or _is_exit(statement):
                yield statement, conditions
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                    nested = [s for item in inner for s in (
                        item.body if isinstance(item, ast.ExceptHandler) else [item])]
                    extra = ["<in an except handler>"] if field == "handlers" else []
                    yield from walk(nested, [*conditions, *extra])
    yield from walk(function.body, [])  # type: ignore[attr-defined]


def _is_exit(statement: ast.stmt) -> bool:
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and text(call.func) in {"sys.exit", "exit", "quit"}


def describe(site: ast.AST) -> tuple[str, str, str]:
    """(kind, exception, message) of a site."""
    if isinstance(site, ast.Assert):
        return "assert", "AssertionError", text(site.msg)
    if isinstance(site, ast.Raise):
        exc = site.exc
        if isinstance(exc, ast.Call):
            return "raise", text(exc.func), text(exc.args[0]) if exc.args else ""
        return "raise", text(exc), ""
    call = site.value  # type: ignore[attr-defined]
    return "exit", text(call.func), text(call.args[0]) if call.args else ""


def config_decidable(conditions: list[str], local: frozenset[str] = frozenset()) -> bool:
    """Whether the conditions read only configuration attributes, constants, pure built-ins
    and ``local`` names (and there is at least one: an unconditional raise is no launch's
    choice)."""
    if not conditions or any(c.startswith("<") for c in conditions):
        return False
    for condition in conditions:
        for node in ast.walk(ast.parse(condition, mode="eval")):
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
                if text(node) not in local and not _config_read(node):
                    return False
            elif isinstance(node, ast.Call) and not (
                    isinstance(node.func, ast.Name) and node.func.id in PURE
                    or text(node.func) == "get_args"):
                return False
            elif isinstance(node, (ast.Subscript, ast.Lambda, ast.NamedExpr)):
                return False
    return True


def _config_read(node: ast.AST) -> bool:
    """A name or attribute chain a decidable condition may read (it is checked whole, then
    its parts are walked again: a part of an allowed chain is allowed too)."""
    chain = text(node)
    if chain in CONSTANTS or chain in PURE or chain == "get_args" or chain in CONFIG_ROOTS:
        return True
    if chain == "self" or chain in LAUNCH_DECIDED:
        return True
    if chain[:1].isupper() and "." in chain:  # an enum member: CheckpointType.LOCAL
        return True
    return any(chain.startswith(root + ".") for root in CONFIG_ROOTS)


def optional_imports(tree: ast.Module) -> frozenset[str]:
    """Module-level names bound inside a ``try`` (``from transformer_engine ... import x``,
    ``HAVE_TE = True`` / ``False``): what the installed packages decide."""
    names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Try):
            for node in ast.walk(statement):
                if isinstance(node, ast.alias):
                    names.add((node.asname or node.name).partition(".")[0])
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return frozenset(names)


def decided_locals(function: ast.AST) -> frozenset[str]:
    """The function's local names whose every assignment is a config-decidable expression
    (``ckpt_format = args.ckpt_format``), found to a fixed point."""
    assigned: dict[str, list[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(text(node.value))
        elif isinstance(node, (ast.AugAssign, ast.For, ast.With, ast.AnnAssign)):
            for target in ast.walk(getattr(node, "target", node)):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    assigned.setdefault(target.id, []).append("<not an expression>")
    known: frozenset[str] = frozenset()
    while True:
        grown = frozenset(name for name, values in assigned.items() if all(
            not value.startswith("<") and config_decidable([value], known) for value in values))
        if grown == known:
            return known
        known = grown


def scan(root: Path) -> dict[str, dict[str, Any]]:
    """Every site of one release's ``megatron/`` tree, by key."""
    found: dict[str, dict[str, Any]] = {}
    for pattern, roots in SCOPES:
        for path in sorted(root.glob(pattern)):
            relative = str(path.relative_to(root.parent))
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except SyntaxError:
                continue
            visitor = Functions()
            visitor.visit(tree)
            for name in sorted(selected(visitor.found, roots)):
                local = decided_locals(visitor.found[name])
                environment = optional_imports(tree)
                for site, conditions in sites_of(visitor.found[name]):
                    kind, exception, message = describe(site)
                    if isinstance(site, ast.Assert):
                        conditions = [*conditions, f"not ({text(site.test)})"]
                    key = f"{relative}:{name}:{message or exception}"
                    while key in found:  # the same message twice in one function
                        key += "+"
                    found[key] = {"file": relative, "function": name, "line": site.lineno,
                                  "kind": kind, "exception": exception, "message": message,
                                  "condition": " and ".join(f"({c})" for c in conditions),
                                  "config_decidable": config_decidable(conditions, local),
                                  "environment_decidable": config_decidable(
                                      conditions, local | environment)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", default=MIRROR)
    parser.add_argument("--wheel", default=str(WHEEL))
    parser.add_argument("--out", default=str(OUT))
    options = parser.parse_args()
    per_release: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for release in ORDER:
            tree = (Path(options.wheel) / "megatron" if release == "0.19.2"
                    else unpack(options.mirror, TAGS[release], Path(scratch)))
            per_release[release] = scan(tree)
    write(per_release, Path(options.out))


def _count(verdicts: Iterator[str | None]) -> dict[str, int]:
    """How many decidable sites have each kind of verdict (each rule counted as refused)."""
    counts: dict[str, int] = {}
    for said in verdicts:
        if said is not None:
            kind = "refused by a rule" if said.startswith(RULE) else said
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def write(per_release: dict[str, dict[str, dict[str, Any]]], out: Path) -> None:
    """The record: totals per release, then every site (as in its newest release, with its
    line in each release that has it)."""
    sites: dict[str, dict[str, Any]] = {}
    for release in ORDER:
        for key, site in per_release[release].items():
            entry = sites.setdefault(key, {"lines": {}})
            entry.update({k: v for k, v in site.items() if k != "line"})
            entry["verdict"] = verdict(site)
            entry["lines"][release] = site["line"]
    totals = {release: {"sites": len(found),
                        "config_decidable": sum(s["config_decidable"] for s in found.values()),
                        "config_and_environment_decidable": sum(
                            s["environment_decidable"] for s in found.values()),
                        "asserts": sum(s["kind"] == "assert" for s in found.values()),
                        "verdicts": _count(verdict(s) for s in found.values())}
              for release, found in per_release.items()}
    record = {"generated_by": "plugins/megaplug-preflight/scripts/first_step_raises.py",
              "sources": {**{r: f"tag {t}" for r, t in TAGS.items() if r != "main"},
                          "0.19.2": "wheel megatron-core==0.19.2", "main": "commit d98e8a64dd"},
              "scopes": [[pattern, roots if isinstance(roots, str) else list(roots)]
                         for pattern, roots in SCOPES],
              "totals": totals, "sites": dict(sorted(sites.items()))}
    out.write_text(json.dumps(record, indent=1) + "\n")
    for release, total in totals.items():
        print(f"{release}: {total['sites']} sites, {total['config_decidable']} config-decidable, "
              f"{total['config_and_environment_decidable']} with the installed packages "
              f"({', '.join(f'{k}: {v}' for k, v in total['verdicts'].items())})")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
