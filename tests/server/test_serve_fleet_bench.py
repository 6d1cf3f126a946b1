"""benchmarks/serve_fleet.py at smoke size: two ``serve`` replicas on a real 3-node Redis
Cluster, one ``audit collect``, a handful of session calls moving between the replicas.

Nothing is timed here (``make bench`` measures four replicas): the run proves the fleet is
consistent, every record written shipped and collected, every chain verifying, and every
replica's status at the collector.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _support.redis_cluster import running_cluster

from benchmarks import serve_fleet


def kinds(folder: Path) -> list[str]:
    return [
        json.loads(line)["kind"]
        for path in sorted(folder.glob("r*/audit.jsonl"))
        for line in path.read_bytes().splitlines()
    ]


# Four processes and a cluster started on a loaded 2-core machine take 15 to 25 s: make fuzz
# runs this, not make test (the collector, the status push and the cluster have tests of their
# own there).
@pytest.mark.slow
@pytest.mark.spawns
def test_a_small_fleet_loses_nothing(tmp_path: Path) -> None:
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster") as cluster:
        result = serve_fleet.run(
            tmp_path, cluster.url, replicas=2, sessions=4, calls=3, clients=2, seconds=30
        )
    assert result["errors"] == {}
    assert result["calls"] == 4 * 3
    # One activation per replica, then one record per call.
    assert result["records_local"] == 2 + 4 * 3, (result, kinds(tmp_path))
    assert result["records_local"] == result["records_shipped"] == result["records_collected"]
    assert result["chains_verify"]
    assert (result["replicas_reporting"], result["replicas_healthy"]) == (2, 2)


DOC = Path(__file__).resolve().parents[2] / "docs" / "scale.md"
SAMPLE = {
    "replicas": 4,
    "redis_cluster_primaries": 3,
    "clients": 8,
    "calls": 1600,
    "wall_seconds": 5.4,
    "calls_per_second": 295.4,
    "p50_ms": 21.96,
    "p99_ms": 104.5,
    "errors": {},
    "records_local": 1604,
    "records_shipped": 1604,
    "records_collected": 1604,
    "chains_verify": True,
    "replicas_reporting": 4,
    "replicas_healthy": 4,
    "load_average": [1.5, 1.25, 1.0],
    "cpus": 2,
}


def shape(line: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", line)


def test_docs_show_what_the_benchmark_prints() -> None:
    """docs/scale.md's block is the benchmark's report, numbers aside, and its counts agree."""
    text = DOC.read_text(encoding="utf-8")
    after = text[text.index("## Serving a fleet: four replicas") :]
    documented = after.split("```\n", 2)[1].splitlines()
    assert [shape(line) for line in documented] == [
        shape(line) for line in serve_fleet.report(SAMPLE)
    ]
    local, shipped, collected = re.findall(r"(?:local|shipped|collected) (\d+)", documented[2])
    assert local == shipped == collected
    assert "errors 0" in documented[1]
