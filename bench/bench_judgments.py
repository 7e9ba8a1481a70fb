"""The claims' judgments (the generated view claim_judgments) on a real warehouse: this checkout's
judge SQL against the judge SQL of BASELINE_COMMIT's storage/claims.py, both generated from this
checkout's sql/claims registry and run in this process on the same read-only connection.

For each arm, --repeats times (interleaved, so a busy machine slows both alike):
  plan   EXPLAIN of the stacked judgments (the planner and optimizer alone)
  read   SELECT of every judgment, fetched (plan and execution)
and the median of each, the ratio current / baseline, and whether the two arms give the same
judgments (verdict and n equal, value and interval ends within 1e-9: the resampling draws alike;
only floating-point summation order may differ).

Usage (any warehouse with facts, e.g. the MiniLM integration test's or `attn-warehouse run`'s):
  OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m bench.bench_judgments WAREHOUSE.duckdb [--repeats 5]
Target: the same judgments, read below the baseline's (on the MiniLM integration warehouse, 93 claims and
68 judgments, at 10:09 on 2026-11-29 with one niced run beside it: plan 2.29 -> 2.53 s, read 4.58 -> 3.51 s,
ratio 0.77; planning is now most of a read).
"""

import argparse
import statistics
import subprocess
import time
import types
from collections.abc import Callable

import duckdb

from dagster_project.settings import PROJECT_ROOT
from dagster_project.storage import claims

BASELINE_COMMIT = "28c345b"  # the bootstrap before draws became positions and the modulo a UBIGINT's
TOLERANCE = 1e-9


def baseline_module(commit: str) -> types.ModuleType:
    """storage/claims.py as it was at `commit`, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{commit}:dagster_project/storage/claims.py"],
        cwd=PROJECT_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(f"claims_at_{commit}")
    exec(compile(source, f"{commit}:dagster_project/storage/claims.py", "exec"), module.__dict__)
    return module


def judgments_query(module: types.ModuleType) -> str:
    """The SELECT of `module`'s claim_judgments view over this checkout's registry."""
    create = module.judgments_sql(module.load_claims())
    return create.split(f"CREATE OR REPLACE VIEW {claims.JUDGMENTS_VIEW} AS\n", 1)[1].rstrip().rstrip(";")


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def same_judgments(first: list[tuple], second: list[tuple]) -> bool:
    """Equal verdicts and n, values within TOLERANCE, row for row (both sorted by claim, model, corpus)."""

    def close(a: float | None, b: float | None) -> bool:
        return a == b or (a is not None and b is not None and abs(a - b) <= TOLERANCE)

    return len(first) == len(second) and all(
        a[:3] == b[:3] and a[6:] == b[6:] and all(close(x, y) for x, y in zip(a[3:6], b[3:6]))
        for a, b in zip(first, second)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE_COMMIT)
    args = parser.parse_args()
    conn = duckdb.connect(args.warehouse, read_only=True)
    arms = {"baseline": judgments_query(baseline_module(args.baseline)), "current": judgments_query(claims)}
    order = "ORDER BY claim, model_id, corpus"
    columns = "claim, model_id, corpus, value, value_low, value_high, verdict, n"
    plans: dict[str, list[float]] = {arm: [] for arm in arms}
    reads: dict[str, list[float]] = {arm: [] for arm in arms}
    rows: dict[str, list[tuple]] = {}
    for _ in range(args.repeats):
        for arm, query in arms.items():
            plans[arm].append(timed(lambda query=query: conn.execute(f"EXPLAIN {query}").fetchall())[0])
            seconds, rows[arm] = timed(
                lambda query=query: conn.execute(f"SELECT {columns} FROM ({query}) {order}").fetchall()
            )
            reads[arm].append(seconds)
    print(f"{len(claims.load_claims())} claims, {len(rows['current'])} judgments, {args.repeats} repeats")
    for name, measured in (("plan", plans), ("read", reads)):
        baseline, current = (statistics.median(measured[arm]) for arm in ("baseline", "current"))
        print(f"{name:5} baseline {baseline:6.2f} s  current {current:6.2f} s  ratio {current / baseline:.2f}")
    print("same judgments:", same_judgments(rows["baseline"], rows["current"]))


if __name__ == "__main__":
    main()
