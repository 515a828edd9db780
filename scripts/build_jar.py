"""Builds dbt_incremental_mv/jars/dbt-incremental-mv-hadoop.jar from java/ (see
dbt_incremental_mv/runtime/local_fs.py): ``.venv/bin/python scripts/build_jar.py``. Needs a JDK (javac,
jar) and PySpark installed (its Hadoop jars are the class path). Classes for Java 8 and later."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dbt_incremental_mv.runtime.local_fs import JAR, SOURCE_DIGEST, source_digest  # noqa: E402


def main() -> int:
    import pyspark

    java_root = REPO / "java"
    sources = sorted(str(p) for p in java_root.rglob("*.java"))
    hadoop_jars = Path(pyspark.__file__).parent / "jars" / "*"
    with tempfile.TemporaryDirectory() as work:
        classes = Path(work) / "classes"
        subprocess.run(["javac", "--release", "8", "-nowarn", "-cp", str(hadoop_jars), "-d", str(classes), *sources], check=True)
        manifest = Path(work) / "MANIFEST.MF"
        manifest.write_text(f"{SOURCE_DIGEST}: {source_digest(java_root)}\n")
        built = Path(work) / JAR.name
        subprocess.run(["jar", "--create", "--file", str(built), "--manifest", str(manifest), "-C", str(classes), "."], check=True)
        JAR.parent.mkdir(exist_ok=True)
        shutil.copyfile(built, JAR)
    print(f"built {JAR.relative_to(REPO)} from {len(sources)} source file(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
