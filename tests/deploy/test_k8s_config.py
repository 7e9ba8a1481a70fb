"""The Kubernetes deployment (deploy/) checked against dagster-k8s itself, without a cluster:
the run launcher and run coordinator that Dagster's Helm chart builds from deploy/values.yaml
are loaded by a real Dagster instance (which validates them against their config schemas, the
K8sRunLauncher's from dagster-k8s), each asset's `dagster-k8s/config` op tag goes through
dagster-k8s's own tag parsing into the Kubernetes Job of its step, and deploy/definitions.py
runs every job on the k8s_job_executor."""

import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import AssetsDefinition, DagsterInstance, DagsterInvalidConfigError, QueuedRunCoordinator

from dagster_project.defs.assets import all_assets
from dagster_project.defs.pools import GPU_RESOURCE, K8S_CONFIG_TAG
from dagster_project.settings import PROJECT_ROOT
from tests.deploy.passes import GPU_PASSES

dagster_k8s = pytest.importorskip("dagster_k8s", reason="dagster-k8s is in the scale extra: pip install -e '.[scale]'")
from dagster_k8s.container_context import K8sContainerContext  # noqa: E402
from dagster_k8s.job import (  # noqa: E402
    USER_DEFINED_K8S_CONFIG_KEY,
    UserDefinedDagsterK8sConfig,
    get_user_defined_k8s_config,
)

DEPLOY = PROJECT_ROOT / "deploy"
VALUES = yaml.safe_load((DEPLOY / "values.yaml").read_text())

# How the chart's dagsterYaml.runLauncher.k8s template (helm/dagster/templates/helpers/instance/
# _run-launcher.tpl) names each key of runLauncher.config.k8sRunLauncher in the instance's
# run_launcher config; lists of {name: ...} references become lists of names.
CHART_RUN_LAUNCHER_KEYS = {
    "loadInclusterConfig": "load_incluster_config",
    "kubeconfigFile": "kubeconfig_file",
    "jobNamespace": "job_namespace",
    "imagePullPolicy": "image_pull_policy",
    "envConfigMaps": "env_config_maps",
    "envSecrets": "env_secrets",
    "envVars": "env_vars",
    "volumeMounts": "volume_mounts",
    "volumes": "volumes",
    "labels": "labels",
    "resources": "resources",
    "failPodOnRunFailure": "fail_pod_on_run_failure",
    "schedulerName": "scheduler_name",
    "securityContext": "security_context",
    "runK8sConfig": "run_k8s_config",
}
CHART_RUN_K8S_CONFIG_KEYS = {
    "containerConfig": "container_config",
    "podSpecConfig": "pod_spec_config",
    "podTemplateSpecMetadata": "pod_template_spec_metadata",
    "jobSpecConfig": "job_spec_config",
    "jobMetadata": "job_metadata",
}


def chart_run_launcher(values: Mapping[str, Any], namespace: str = "attention") -> dict[str, Any]:
    """The run_launcher section of dagster.yaml that the chart renders from `values`; a key this
    renderer does not know is an error, so nothing in values.yaml goes unchecked."""
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    settings = launcher["config"]["k8sRunLauncher"]
    unknown = set(settings) - set(CHART_RUN_LAUNCHER_KEYS)
    assert not unknown, f"values.yaml sets k8sRunLauncher keys this test does not render: {unknown}"
    config: dict[str, Any] = {
        "job_namespace": namespace,
        "service_account_name": "dagster",
        "dagster_home": "/opt/dagster/dagster_home",
        "instance_config_map": "dagster-instance",
        "postgres_password_secret": "dagster-postgresql-secret",
    }
    for key, value in settings.items():
        name = CHART_RUN_LAUNCHER_KEYS[key]
        if key in ("envConfigMaps", "envSecrets"):
            value = [reference["name"] for reference in value if "name" in reference]
        if key == "runK8sConfig":
            assert set(value) <= set(CHART_RUN_K8S_CONFIG_KEYS), set(value) - set(CHART_RUN_K8S_CONFIG_KEYS)
            value = {CHART_RUN_K8S_CONFIG_KEYS[part]: config for part, config in value.items() if config}
        if value or key in ("loadInclusterConfig", "imagePullPolicy"):
            config[name] = value
    return config


def chart_run_coordinator(values: Mapping[str, Any]) -> dict[str, Any]:
    """The run_coordinator section the chart's dagsterYaml.runCoordinator.queued template
    (_run-coordinator.tpl) renders from dagsterDaemon.runCoordinator, for the keys values.yaml sets."""
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] and coordinator["type"] == "QueuedRunCoordinator"
    settings = coordinator["config"]["queuedRunCoordinator"]
    unknown = set(settings) - {"maxConcurrentRuns", "blockOpConcurrencyLimitedRuns"}
    assert not unknown, f"values.yaml sets queuedRunCoordinator keys this test does not render: {unknown}"
    config: dict[str, Any] = {"max_concurrent_runs": settings.get("maxConcurrentRuns", -1)}
    if block := settings.get("blockOpConcurrencyLimitedRuns"):
        config["block_op_concurrency_limited_runs"] = {
            "enabled": block["enabled"],
            "op_concurrency_slot_buffer": block["opConcurrencySlotBuffer"],
        }
    return {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator", "config": config}


def load_instance(home: Path, config: Mapping[str, Any], run_coordinator: Mapping[str, Any] | None = None):
    """The run launcher and run coordinator of a Dagster instance whose dagster.yaml names
    K8sRunLauncher with `config` (and `run_coordinator`), out of a cluster: the in-cluster
    credentials are swapped for a kubeconfig file in `home`."""
    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    outside = {**config, "load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    launcher = {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": outside}
    instance_yaml = {"run_launcher": launcher, "telemetry": {"enabled": False}}
    if run_coordinator:
        instance_yaml["run_coordinator"] = dict(run_coordinator)
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance_yaml))
    with DagsterInstance.from_config(str(home)) as instance:
        return instance.run_launcher, instance.run_coordinator


def test_the_charts_instance_from_values_is_valid_for_dagster_k8s(tmp_path: Path) -> None:
    config = chart_run_launcher(VALUES)
    assert config["load_incluster_config"] is True
    launcher, coordinator = load_instance(tmp_path, config, chart_run_coordinator(VALUES))
    assert isinstance(launcher, dagster_k8s.K8sRunLauncher)
    assert launcher.image_pull_policy == "IfNotPresent"
    assert launcher.job_namespace == "attention"
    run_pod = UserDefinedDagsterK8sConfig.from_dict(launcher.run_k8s_config)  # checked against the Kubernetes models
    assert run_pod.container_config["resources"]["requests"] == {"cpu": "1", "memory": "4Gi"}
    assert isinstance(coordinator, QueuedRunCoordinator)
    assert coordinator.get_run_queue_config().max_concurrent_runs == 8
    assert coordinator.should_block_op_concurrency_limited_runs and coordinator.op_concurrency_slot_buffer == 0


def test_the_instance_rejects_a_run_launcher_key_dagster_k8s_does_not_have(tmp_path: Path) -> None:
    """The check above is not vacuous: a misspelled key fails the same load."""
    config = {**chart_run_launcher(VALUES), "image_pul_policy": "Always"}
    with pytest.raises(DagsterInvalidConfigError, match="image_pul_policy"):
        load_instance(tmp_path, config)


def test_values_keep_the_postgres_driver_and_the_user_code_entry_point() -> None:
    instance_yaml = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    assert VALUES["postgresql"]["postgresqlScheme"] == instance_yaml["storage"]["postgres"]["postgres_db"]["scheme"]
    (deployment,) = VALUES["dagster-user-deployments"]["deployments"]
    args = deployment["dagsterApiGrpcArgs"]
    workdir = args[args.index("--working-directory") + 1]
    entry = args[args.index("--python-file") + 1]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(rf"^WORKDIR {re.escape(workdir)}$", dockerfile, re.M)
    assert (PROJECT_ROOT / entry).is_file() and f"COPY {Path(entry).parts[0]} " in dockerfile
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True


def test_the_dockerfile_pins_the_projects_torch_and_takes_the_base_image_as_an_argument() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    constraints = (PROJECT_ROOT / "constraints.txt").read_text().splitlines()
    (torch_pin,) = [pin for pin in constraints if pin.startswith("torch==")]
    assert f" {torch_pin}\n" in dockerfile
    assert re.search(r"^ARG BASE_IMAGE=\S+\nFROM \$\{BASE_IMAGE\}$", dockerfile, re.M)
    assert re.search(r"^ARG TORCH_VARIANT=cpu$", dockerfile, re.M)
    assert "pip install -c constraints.txt -e '.[scale]'" in dockerfile


RUN_POD = UserDefinedDagsterK8sConfig(**chart_run_launcher(VALUES)["run_k8s_config"])


def step_job(asset: AssetsDefinition):
    """The Kubernetes Job dagster-k8s builds for `asset`'s step: the run's pod config from the
    values merged with the step's op tags, as the k8s_job_executor merges them."""
    step_config = K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(asset.op.tags))
    user_config = K8sContainerContext(run_k8s_config=RUN_POD).merge(step_config).run_k8s_config
    job_config = dagster_k8s.DagsterK8sJobConfig(
        job_image="registry.example.com/attention-warehouse:0.1.0-cuda",
        dagster_home="/opt/dagster/dagster_home",
        image_pull_policy="IfNotPresent",
    )
    return dagster_k8s.construct_dagster_k8s_job(
        job_config, ["dagster", "api", "execute_step"], "step", user_config, component="step_worker"
    )


def test_gpu_passes_request_one_gpu_through_their_k8s_tag_and_other_steps_none() -> None:
    assert K8S_CONFIG_TAG == USER_DEFINED_K8S_CONFIG_KEY
    gpu_keys = {asset.key for asset in GPU_PASSES}
    executable = [asset for asset in all_assets if isinstance(asset, AssetsDefinition) and asset.is_executable]
    assert gpu_keys <= {asset.key for asset in executable}
    for asset in executable:
        template = step_job(asset).spec.template
        assert (
            template.metadata.labels["app.kubernetes.io/component"] == "step_worker"
        )  # the kubectl selector of docs/operations/scaling-out.md
        pod = template.spec
        assert pod.containers[0].resources.requests == {"cpu": "1", "memory": "4Gi"}, asset.key
        limits = pod.containers[0].resources.limits
        tolerations = [(t.key, t.operator, t.effect) for t in pod.tolerations or []]
        if asset.key in gpu_keys:
            assert limits == {GPU_RESOURCE: "1"}, asset.key
            assert tolerations == [(GPU_RESOURCE, "Exists", "NoSchedule")], asset.key
        else:
            assert K8S_CONFIG_TAG not in asset.op.tags and not limits and not tolerations, asset.key


def test_the_k8s_entry_point_runs_every_job_on_the_k8s_job_executor() -> None:
    spec = importlib.util.spec_from_file_location("k8s_definitions", DEPLOY / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jobs = module.defs.resolve_all_job_defs()
    assert {"model_analysis", "warehouse_views_job"} <= {job.name for job in jobs}
    assert {job.executor_def for job in jobs} == {dagster_k8s.k8s_job_executor}
