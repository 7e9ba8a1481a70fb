"""Asset checks from `dagster_project.compute.checks` outcomes: declared on the asset, evaluated on
the facts each materialization computes, blocking downstream assets when science is wrong."""

from dagster import AssetCheckResult, AssetCheckSeverity, AssetCheckSpec

from dagster_project.compute.checks import CheckOutcome


def fact_check_specs(asset_name: str, checks: dict[str, str]) -> list[AssetCheckSpec]:
    """Blocking specs for the named checks (name -> description)."""
    return [
        AssetCheckSpec(name, asset=asset_name, description=description, blocking=True)
        for name, description in checks.items()
    ]


def check_result(outcome: CheckOutcome) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=outcome.name, passed=outcome.passed, severity=AssetCheckSeverity.ERROR, metadata=outcome.metadata
    )
