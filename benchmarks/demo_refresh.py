"""The example project's small refresh, timed: the demo's second ``dbt run``.

    .venv/bin/python benchmarks/demo_refresh.py [--runs 3] [--threads 2]

Builds the example project (``integration_tests/``, copied to a scratch folder with its own
warehouse), applies ``dbt run-operation shop_changes`` and keeps a copy of the warehouse. Then,
``--runs`` times: restores that copy and times ``dbt run`` (the same data and the same changes
every time), through ``dbt_timed.py`` so that each model's statements and phases are known.

Prints, per run, the wall time of the command (JVM start, dbt's parsing and Spark's shutdown
included) and each model's ``execution_time`` with its statement count, then the medians and the
slowest statements of the median run. Issue 17's targets: each model <= 3 s, the command <= 25 s.
The machine's load average is printed before and after: two dbt threads load two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from dbt_runs import TIMED_LOG, model_runs  # noqa: E402

PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "models", "seeds", "macros")


def _dbt(project: Path, step: str, *args: str, threads: int | None) -> dict:
    """``dbt <args>`` in ``project`` through dbt_timed.py. One target directory for every step, so
    that dbt's partial parsing works as it does for a user (the runs parse nothing again)."""
    log_dir, target_dir = project / "logs" / step, project / "target"
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(HERE / "dbt_timed.py"), *args, "--log-path", str(log_dir),
           "--log-format-file", "json", "--log-level-file", "debug", "--target-path", str(target_dir)]
    if args[0] in ("run", "build") and threads:
        cmd += ["--threads", str(threads)]
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "DBT_MV_WAREHOUSE": str(project / "warehouse"),
           "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
           "BENCH_PHASE_LOG": str(log_dir / TIMED_LOG)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (project / "logs" / f"{step}.stdout").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"dbt {' '.join(args)} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    models = model_runs(log_dir, target_dir) if args[0] in ("run", "build") else {}
    return {"wall_s": round(wall, 2), "models": models}


def _change_profile(profiles: Path, fields: dict[str, str], settings: dict[str, str]) -> None:
    """The copied profile's session target with ``fields`` set and ``settings`` in its server_side_parameters."""
    import yaml

    document = yaml.safe_load(profiles.read_text())
    output = document["integration_tests"]["outputs"]["session"]
    output.update(fields)
    if settings:
        output.setdefault("server_side_parameters", {}).update(settings)
    profiles.write_text(yaml.safe_dump(document, sort_keys=False))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="dbt threads (default: the profile's, 2)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch project")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting added to the profile's server_side_parameters (repeatable)")
    parser.add_argument("--profile", action="append", default=[], metavar="KEY=VALUE",
                        help="a field of the profile's session target, e.g. jit=peak (repeatable)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="mv-demo-"))
    project = scratch / "project"
    project.mkdir()
    for name in PROJECT_FILES:
        source = REPO / "integration_tests" / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    if args.conf or args.profile:
        _change_profile(project / "profiles.yml", dict(item.split("=", 1) for item in args.profile),
                        dict(item.split("=", 1) for item in args.conf))
    print(f"scratch project {project}; load average {_load()}; profile {args.profile + args.conf or 'as is'}",
          flush=True)
    built = _dbt(project, "build", "build", "--full-refresh", threads=args.threads)
    print(f"dbt build --full-refresh: {built['wall_s']} s", flush=True)
    changed = _dbt(project, "changes", "run-operation", "shop_changes", threads=None)
    print(f"dbt run-operation shop_changes: {changed['wall_s']} s", flush=True)
    saved = scratch / "warehouse.saved"
    shutil.copytree(project / "warehouse", saved)

    runs = []
    for number in range(1, args.runs + 1):
        shutil.rmtree(project / "warehouse")
        shutil.copytree(saved, project / "warehouse")
        before = _load()
        run = _dbt(project, f"run{number}", "run", threads=args.threads)
        run["load"] = f"{before} -> {_load()}"
        runs.append(run)
        per_model = ", ".join(
            f"{name} {m['execution_time_s']} s / {m.get('n_statements', '?')} stmts" for name, m in run["models"].items()
        )
        print(f"run {number}: wall {run['wall_s']} s (load {run['load']}): {per_model}", flush=True)

    walls = [r["wall_s"] for r in runs]
    print(f"\nwall: {', '.join(map(str, walls))} -> median {statistics.median(walls)} s")
    for name in runs[0]["models"]:
        times = [r["models"][name]["execution_time_s"] for r in runs]
        print(f"  {name}: {', '.join(map(str, times))} -> median {statistics.median(times)} s")
    middle = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    print("\nslowest statements of the median run:")
    rows = [(s["seconds"], name, s["phase"], " ".join(s["sql"].split())[:110])
            for name, m in middle["models"].items() for s in m.get("statements", [])]
    for seconds, name, phase, sql in sorted(rows, reverse=True)[:15]:
        print(f"  {seconds:6.2f} s  {name:28s} {phase:8s} {sql}")
    for name, m in middle["models"].items():
        print(f"  {name}: phases {m.get('phases')}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    if not args.keep:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
