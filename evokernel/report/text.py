"""The report on a terminal: the same figures as the HTML, as plain tables."""

from __future__ import annotations

from evokernel.analysis import learning_lines
from evokernel.report.collect import RunReport, SweepReport
from evokernel.report.html import fast1, num, stat, x
from evokernel.run.progress import format_table


def run_text(report: RunReport) -> str:
    o = report.overview
    run = o.run
    lines = [
        f"run {run.id} '{run.name}': {run.status}, {run.evaluations}/{run.budget} evaluations, "
        f"LLM ${run.usd:.4f}, started {run.started}"
    ]
    if o.interpreter:
        lines.append("(CPU, Triton interpreter: timings rank candidates but say nothing about GPU speed)")
    rows = [
        [
            t.task,
            f"#{t.best_candidate}" if t.best_candidate else "none correct",
            t.speedup_text,
            x(t.speedup_compile),
            num(t.runtime_ms),
            f"{t.sol_share:.0%}" if t.sol_share is not None else "-",
            t.bottleneck or "-",
            t.profile,
            f"{t.correct}/{t.evaluations}/{t.budget}",
        ]
        for t in o.tasks
    ]
    header = [
        "task",
        "best",
        "vs eager",
        "vs compile",
        "ms",
        "SOL",
        "bottleneck",
        "profile",
        "correct/evaluated/budget",
    ]
    lines += [format_table(rows, header)]
    lines.append(
        f"geomean {x(o.geomean)} over {o.correct_tasks} task(s) with a correct kernel; fast_1 {fast1(o):.0%}"
    )
    for tr in report.tasks:
        if tr.ancestry:
            steps = " -> ".join(
                f"#{n.candidate} {n.operator}{'/' + n.model if n.model else ''} {n.speedup_text}"
                for n in tr.ancestry
            )
            lines.append(f"  {tr.name} lineage: {steps}")
        for f in tr.failures[:5]:
            lines.append(f"  {tr.name} failed {f.count}x at {f.stage or '-'} ({f.status}): {f.reason}")
    lines += learning_lines(report.models)
    return "\n".join(lines)


def sweep_text(report: SweepReport) -> str:
    t = report.table
    tasks = [tr.name for tr in next(iter(report.runs.values())).tasks] if report.runs else []
    rows = [
        [str(g.point.get(c)) for c in t.columns]
        + [
            ",".join(str(s) for s in g.seeds),
            stat(g.geomean, "x"),
            stat(g.correct_share, "%"),
            stat(g.evaluations, ""),
        ]
        + [stat(g.best.get(task), "x") for task in tasks]
        for g in t.groups
    ]
    header = [*t.columns, "seeds", "geomean", "tasks correct", "evaluations", *(f"best {k}" for k in tasks)]
    sw = t.sweep
    head = f"sweep {sw.id} '{sw.name}': {sw.status}, {len(sw.cells)} cells (mean ± sd over seeds)"
    return "\n".join([head, format_table(rows, header)])


def text(report: RunReport | SweepReport) -> str:
    return sweep_text(report) if isinstance(report, SweepReport) else run_text(report)
