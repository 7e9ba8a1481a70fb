"""Entry point of the code on Kubernetes (deploy/values.yaml, deploy/Dockerfile): the project's
definitions with dagster-k8s's k8s_job_executor, so every step runs in a pod of its own and the
passes that run a model get one `nvidia.com/gpu` through their `dagster-k8s/config` op tag
(dagster_project/defs/pools.py). Locally, dagster_project.definitions stays the entry point."""

from dagster import Definitions
from dagster_k8s import k8s_job_executor

from dagster_project.definitions import defs as project_defs

defs = Definitions.merge(project_defs, Definitions(executor=k8s_job_executor))
