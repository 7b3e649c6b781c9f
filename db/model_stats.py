"""The LLM model selector's state per model of a run (table ``model_stats``, migration 0007)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from evokernel.db.connection import SessionScope
from evokernel.db.models import ModelStatsRow, utcnow

FIELDS = ("pulls", "observed", "gain", "cost_usd")


class ModelStatsMixin:
    """Needs ``_scope``, which :class:`~evokernel.db.library.SolutionLibrary` sets up."""

    _scope: SessionScope

    def record_model_stats(self, run_id: str, stats: Mapping[str, Mapping[str, float]]) -> None:
        """Replace the run's rows for the models in ``stats`` (model -> pulls, observed, gain,
        cost_usd) in one transaction."""
        if not stats:
            return
        rows = [
            {
                "run_id": run_id,
                "model": model,
                "updated_at": utcnow(),
                **{k: values.get(k, 0) for k in FIELDS},
            }
            for model, values in stats.items()
        ]

        def fn(s: Session) -> None:
            s.execute(
                delete(ModelStatsRow).where(
                    ModelStatsRow.run_id == run_id, ModelStatsRow.model.in_(list(stats))
                )
            )
            s.execute(insert(ModelStatsRow), rows)

        self._scope.run(fn)

    def model_stats(self, run_id: str) -> dict[str, dict[str, float]]:
        """model -> {pulls, observed, gain, cost_usd} as last recorded for the run ({} if none)."""
        stmt = select(ModelStatsRow).where(ModelStatsRow.run_id == run_id).order_by(ModelStatsRow.model)
        return self._scope.run(
            lambda s: {r.model: {k: getattr(r, k) for k in FIELDS} for r in s.scalars(stmt)}
        )
