"""The scanner of first-step raises (scripts/first_step_raises.py) and its record.

The record is data the script writes from Megatron-LM's release tags (it needs the mirror,
so the main suite does not run it over them): here the scanner runs on a small module of
its own, and the record is held to what pre-flight's first-step rules claim."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

from megaplug_preflight import first_step

HERE = Path(__file__).resolve().parent
RECORD = json.loads((HERE / "first_step_raises.json").read_text())
SPEC = importlib.util.spec_from_file_location("first_step_raises",
                                              HERE.parent / "scripts" / "first_step_raises.py")
scanner = importlib.util.module_from_spec(SPEC)  # type: ignore[arg-type]
SPEC.loader.exec_module(scanner)  # type: ignore[union-attr]

ROUTER = '''
try:
    from transformer_engine import fused_gate
except ImportError:
    fused_gate = None


class TopKRouter:
    def forward(self, logits):
        if self.config.moe_aux_loss_coeff > 0 and self.config.topk == 1:
            raise ValueError("no aux loss with top-1")
        assert logits.shape[0] > 0, "empty batch"
        if self.config.fused and fused_gate is None:
            raise RuntimeError("fused gate missing")
        return self._route(logits)

    def _route(self, logits):
        kind = self.config.kind
        if kind != "topk":
            raise NotImplementedError(f"routing {kind}")

    def unused(self):
        raise RuntimeError("never reached")
'''


def test_the_scanner_lists_each_site_with_its_condition_and_verdict(tmp_path):
    router = tmp_path / "megatron" / "core" / "transformer" / "moe" / "router.py"
    router.parent.mkdir(parents=True)
    router.write_text(textwrap.dedent(ROUTER))
    found = scanner.scan(tmp_path / "megatron")
    path = "megatron/core/transformer/moe/router.py"
    assert {key: (site["line"], site["kind"], site["condition"], site["config_decidable"],
                  site["environment_decidable"]) for key, site in found.items()} == {
        f"{path}:TopKRouter.forward:'no aux loss with top-1'": (
            11, "raise", "(self.config.moe_aux_loss_coeff > 0 and self.config.topk == 1)",
            True, True),
        f"{path}:TopKRouter.forward:'empty batch'": (
            12, "assert", "(not (logits.shape[0] > 0))", False, False),
        f"{path}:TopKRouter.forward:'fused gate missing'": (
            14, "raise", "(self.config.fused and fused_gate is None)", False, True),
        f"{path}:TopKRouter._route:f'routing {{kind}}'": (
            20, "raise", "(kind != 'topk')", True, True),
        f"{path}:TopKRouter.unused:'never reached'": (23, "raise", "", False, False),
    }


def test_the_record_names_its_script_and_every_release():
    assert RECORD["generated_by"] == "plugins/megaplug-preflight/scripts/first_step_raises.py"
    assert list(RECORD["totals"]) == scanner.ORDER
    assert {release: (total["sites"], total["config_decidable"])
            for release, total in RECORD["totals"].items()
            if release in ("0.13.0", "0.19.2", "main")} == {
        "0.13.0": (405, 34), "0.19.2": (563, 43), "main": (595, 50)}


def test_every_first_step_rule_refuses_sites_of_the_record():
    named = {site["verdict"].removeprefix(scanner.RULE) for site in RECORD["sites"].values()
             if (site["verdict"] or "").startswith(scanner.RULE)}
    rules = {check.__name__ for check in first_step.CHECKS}
    # the router's NameError is a use of an undefined name, not a raise
    assert named == rules - {"moe_router_needs_transformer_engine_before_0_17"}


def test_every_decidable_site_has_a_verdict():
    kinds = {scanner.INTERNAL, scanner.INFERENCE, scanner.PACKAGE, scanner.WRAPPER, scanner.OPEN}
    for key, site in RECORD["sites"].items():
        if site["environment_decidable"]:
            assert site["verdict"] in kinds or site["verdict"].startswith(scanner.RULE), key
    assert RECORD["totals"]["0.19.2"]["verdicts"] == {
        "Megatron-FSDP": 3, "environment": 5, "inference only": 6, "internal": 13, "open": 10,
        "refused by a rule": 20}
