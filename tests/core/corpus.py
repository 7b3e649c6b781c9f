"""Reading the hack/legit/fault corpora: each file's header says what must happen to it.

Header lines (comments at the top of each file)::

    # hack: <the trick>            (or  # legit: / # fault:)
    # expect: status=<status> stage=<stage> [rule=<rule>] [reason=<text in the reason>]
    # without-static: ...          (optional: the verdict with the static rules off)
    # task: <task file, relative to the repository root>
    # device: cpu | cuda
    # allowed-by: <profile> [<profile> ...] (why)   (optional: profiles whose contract the trick
                                                   stays within, e.g. default sizes only)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.request import build_request
from evokernel.tasks import load_task
from evokernel.types import Evaluation

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass(frozen=True)
class Expectation:
    status: str
    stage: str
    rule: str | None
    reason: str | None

    def met_by(self, ev: Evaluation) -> bool:
        """The verdict's status and stage are these, and its reason names the rule and text."""
        return (
            (ev.status.value, ev.stage) == (self.status, self.stage)
            and (not self.rule or f"rule {self.rule}" in ev.reason)
            and (not self.reason or self.reason.strip() in ev.reason)
        )


@dataclass(frozen=True)
class Case:
    path: Path
    kind: str
    trick: str
    expect: Expectation
    without_static: Expectation | None
    task: Path
    device: str
    timeout_s: float
    # Profiles whose correctness contract does not reach the trick (a field profile checks the
    # default sizes only, or at 1e-2): accepted there by design, refused under strict.
    allowed_by: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.path.stem


def _expectation(text: str) -> Expectation:
    fields = dict(re.findall(r"(\w+)=([^=]+?)(?=\s+\w+=|\s*\(|$)", text.strip()))
    return Expectation(
        fields["status"].strip(), fields["stage"].strip(), fields.get("rule"), fields.get("reason")
    )


def load_case(path: Path) -> Case:
    header: dict[str, str] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"# (hack|legit|fault|expect|without-static|task|device|timeout|allowed-by): (.*)", line)
        if m:
            header[m.group(1)] = m.group(2)
        elif not line.startswith("#"):
            break
    kind = next(k for k in ("hack", "legit", "fault") if k in header)
    return Case(
        path=path,
        kind=kind,
        trick=header[kind],
        expect=_expectation(header.get("expect", "status=correct stage=timing")),
        without_static=_expectation(header["without-static"]) if "without-static" in header else None,
        task=ROOT / header["task"],
        device=header.get("device", "cpu"),
        timeout_s=float(header.get("timeout", "120")),
        allowed_by=tuple(header.get("allowed-by", "").split("(")[0].split()),
    )


# Refusals and verdicts, not figures: a few short timed calls; on a GPU baselines over 200 ms,
# not 1 s (these check behaviour, not the stability of figures).
FAST_CPU_TIMING = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
GPU_TIMING = TimingConfig(warmup_ms=10, max_ms=200, baseline_min_ms=200)


def case_request(
    case: Case, profile: str = "strict", static_checks: bool = True, device: str = "cpu"
) -> dict[str, Any]:
    """The sandbox request for ``case`` under ``profile``: on the CPU small sizes and fast timing,
    on a GPU full sizes; no torch.compile baseline (off on a CPU anyway)."""
    cuda = device == "cuda"
    return build_request(
        load_task(case.task),
        case.path.read_text(),
        device=device,
        scale="full" if cuda else "small",
        timing=GPU_TIMING if cuda else FAST_CPU_TIMING,
        evaluation=EvaluationConfig(profile=profile, compile_baseline="off"),
        static_checks=static_checks,
    )


def assert_supervised_verdict(ev: Evaluation) -> None:
    """The verdict is the supervisor's own record of the stage that failed, so it came within the
    timeout the supervisor enforces: the sandbox's outer kill, past the timeout and its grace,
    records no stages (sandbox.classify)."""
    stages = ev.details.get("stages") or [{}]
    assert (stages[-1].get("stage"), stages[-1].get("status")) == (ev.stage, "failed"), (ev.reason, stages)


def corpus(kind: str) -> list[Case]:
    folder = {"hack": "hacks", "legit": "legit", "fault": "faults"}[kind]
    return [load_case(p) for p in sorted((FIXTURES / folder).glob("*.py"))]
