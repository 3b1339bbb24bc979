import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

_OUTCOMES: dict[str, bool] = {}


def pytest_runtest_logreport(report):
    if report.when == "call" and "test_parity_case[" in report.nodeid:
        _OUTCOMES[report.nodeid] = report.passed


def pytest_terminal_summary(terminalreporter):
    if _OUTCOMES:
        matched = sum(_OUTCOMES.values())
        terminalreporter.write_line(
            f"parity: {matched}/{len(_OUTCOMES)} shared Megatron cases match fully")
