"""Where steps run: Dagster pools (op concurrency limits) and the Kubernetes request of the passes
that run a model. Declared here once; the asset decorators take `pool=` and `op_tags=` from here.

- `warehouse_writer`, limit 1, with the `duckdb` backend: DuckDB allows one writer per file, so
  every asset that writes the warehouse is in it. Other backends take concurrent writers of
  different partitions (DuckLake), so they have no writer pool.
- `gpu`, limit the number of devices: the passes that run a model (GPU_PASS_POOL) with a backend
  other than `duckdb`. With `duckdb` they stay in `warehouse_writer`: a step is in one pool, and
  that one already runs one pass at a time.
- GPU_PASS_OP_TAGS: each of those passes asks Kubernetes for one `nvidia.com/gpu` through its
  `dagster-k8s/config` op tag, which dagster-k8s's k8s_job_executor (deploy/definitions.py)
  puts on the step's pod. Elsewhere the tag is ignored.

Set the limits on the instance before the first run (`attn-warehouse pools`, set_pool_limits):
a pool met for the first time gets `concurrency.pools.default_limit` from dagster.yaml, and when
two runs do that at once on a Postgres instance, the second one's INSERT hits the unique key and
Dagster's fallback UPDATE runs in the transaction Postgres has aborted, failing that step
(tests/deploy/test_postgres_instance.py shows it).
"""

from collections.abc import Mapping

import torch
from dagster import DagsterInstance

from dagster_project.storage.backend import warehouse_backend

WAREHOUSE_WRITER = "warehouse_writer"
GPU = "gpu"
K8S_CONFIG_TAG = "dagster-k8s/config"  # read by dagster-k8s: dagster_k8s.job.USER_DEFINED_K8S_CONFIG_KEY
GPU_RESOURCE = "nvidia.com/gpu"  # NVIDIA's device plugin


def single_writer() -> bool:
    """Whether the warehouse takes one writer at a time: the DuckDB file (storage/backend.py)."""
    return warehouse_backend() == "duckdb"


WRITER_POOL: str | None = WAREHOUSE_WRITER if single_writer() else None
GPU_PASS_POOL: str = WAREHOUSE_WRITER if single_writer() else GPU
GPU_PASS_OP_TAGS: Mapping[str, object] = {
    K8S_CONFIG_TAG: {
        "container_config": {"resources": {"limits": {GPU_RESOURCE: "1"}}},
        # GPU node pools are commonly tainted so that only pods asking for a GPU land there.
        "pod_spec_config": {"tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]},
    }
}


def local_device_count() -> int:
    """CUDA devices on this machine; 1 without any (a CPU or MPS pass takes the whole machine)."""
    return max(torch.cuda.device_count(), 1)


def pool_limits(gpus: int | None = None) -> dict[str, int]:
    """The pools the assets use with the configured backend, and their limits (`gpus`: the number
    of devices the `gpu` pool shares, default this machine's)."""
    if single_writer():
        if gpus is not None:
            raise ValueError(
                f"the duckdb backend runs the model passes in the {WAREHOUSE_WRITER} pool, one at a time, so it has "
                f"no {GPU} pool to size: leave out --gpus, or set ATTN_WAREHOUSE_BACKEND=ducklake "
                "(docs/operations/scaling-out.md)"
            )
        return {WAREHOUSE_WRITER: 1}
    count = local_device_count() if gpus is None else gpus
    if count < 1:
        raise ValueError(f"the gpu pool needs a limit of at least 1 device, got {count}")
    return {GPU: count}


def set_pool_limits(instance: DagsterInstance, limits: Mapping[str, int]) -> dict[str, int]:
    """Set each pool's limit on `instance` (what `dagster instance concurrency set` does); returns
    the limits the instance now reports."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        raise ValueError(
            f"the Dagster instance at {instance.root_directory} has no pool support (its event log storage "
            f"{type(storage).__name__} keeps no concurrency limits): use the SQLite default or dagster-postgres"
        )
    for pool, limit in limits.items():
        storage.set_concurrency_slots(pool, limit)
    return {pool: storage.get_concurrency_info(pool).slot_count for pool in limits}
