"""A Ray cluster of several raylets on this machine for the multi-node tests: a head without CPUs
(it builds and evaluates nothing), to which each test adds and removes its own nodes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import ray
from ray.cluster_utils import Cluster

# A node removed mid-test is seen dead within ~2 s, not Ray's default ~30 s.
FAST_NODE_DEATH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
}


@contextmanager
def head_only_cluster() -> Iterator[Cluster]:
    """The head alone; the caller sets RAY_TMPDIR (Ray's socket paths must stay short)."""
    head_args = {"num_cpus": 0, "include_dashboard": False, "_system_config": FAST_NODE_DEATH}
    made = Cluster(initialize_head=True, head_node_args=head_args)
    try:
        yield made
    finally:
        ray.shutdown()
        made.shutdown()
