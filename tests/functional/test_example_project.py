"""The example project as a newcomer runs it: the dbt CLI in a fresh process."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DBT = str(Path(sys.executable).with_name("dbt"))
JAVA_FRAME = re.compile(r"^\s+at [\w$.]+\(")


def dbt(project_dir, *args):
    env = {**os.environ, "DBT_PROFILES_DIR": str(project_dir), "DBT_MV_WAREHOUSE": str(project_dir / "warehouse")}
    done = subprocess.run([DBT, *args], cwd=project_dir, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    noise = [line for line in output.splitlines() if JAVA_FRAME.match(line) or re.search(r"\bWARN\b(?!=)|Traceback|Exception", line)]
    assert not noise, "a normal run printed JVM or Python noise:\n" + "\n".join(noise[:20])
    return output


def test_build_run_and_full_refresh_are_clean(tmp_path):
    project = tmp_path / "shop"
    shutil.copytree(REPO / "integration_tests", project, ignore=shutil.ignore_patterns("target", "logs", "warehouse"))

    assert "Done. PASS=11 WARN=0 ERROR=0" in dbt(project, "build")
    second = dbt(project, "run")
    assert "Done. PASS=4 WARN=0 ERROR=0" in second
    assert "customer_orders: complete" in second
    assert "Done. PASS=4 WARN=0 ERROR=0" in dbt(project, "run", "--full-refresh")

    litter = {"metastore_db", "derby.log", "spark-warehouse"} & {p.name for p in project.iterdir()}
    assert not litter
    assert (project / "warehouse" / "shop" / "customer_orders" / "metadata").is_dir()
