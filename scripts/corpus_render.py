#!/usr/bin/env python3
"""Build the corpus that scripts/corpus_acceptance.py measures: public dbt projects, compiled.

Each project in PROJECTS is exported from a bare git snapshot (the search tool's ``fetch``
puts them under /work/.mirror/<owner>+<name>/repo; github.com itself is not reachable from the
build machine), its dbt packages are exported the same way straight into ``dbt_packages/``
(the dbt hub is not reachable either, so ``dbt deps`` is not run and the project's
packages.yml / dependencies.yml / package-lock.yml are removed), and ``dbt compile`` is run
against a local duckdb profile written here. Nothing is executed against data: a model that
needs introspection of a relation that does not exist (``dbt_utils.star``,
``get_column_values``, ...) either compiles to what the macro returns for "no relation" or
fails; failures are recorded, not retried.

Output, under --out (default /work/corpus/rendered):

* ``<project>/<model>.sql``: the compiled SQL of each model of the project itself (not of its
  packages), with ephemeral models inlined as dbt inlines them (``__dbt__cte__<name>``);
* ``<project>/corpus.json``: where it came from (repository, commit, sub-directory), the dialect
  the SQL is written in (``dialect``: the warehouse the project's hand-written SQL targets; the
  macros were rendered for duckdb), each model's status (``compiled`` or ``error`` with dbt's
  message), and the relations the project knows (sources and models: ``schema.table`` ->
  documented columns from its YAML);
* ``manifest.json``: the list of projects, with the same provenance.

Before the compile that counts, every source is created as an empty duckdb table with the
columns its YAML documents (databases other than the profile's attached as separate files), and
for the fivetran packages their ``staging/tmp`` models (``select * from <source>`` or a union of
them) are ``dbt run`` as views over those: otherwise their macros (``union_data``,
``fill_staging_columns`` over ``get_columns_in_relation``) render the "no relation" placeholder
(``select null ... limit 0``) and columns as ``cast(null as ...)``.

Runs with any Python 3.10+ (standard library only); dbt-core and dbt-duckdb live in a separate
virtualenv (--dbt, default /work/corpus/venv/bin/dbt), made with
``python3 -m venv /work/corpus/venv && /work/corpus/venv/bin/pip install 'dbt-core>=1.9,<1.11'
'dbt-duckdb>=1.9,<1.11'`` (dbt-core 2.x downloads a parser from github.com at install time).

Usage: ``nice -n 19 python3 scripts/corpus_render.py [--only PROJECT ...]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MIRROR = Path("/work/.mirror")
MAX_ATTEMPTS = 25  # compiles per project (each failure excludes one model)

# name -> (snapshot dir under MIRROR, ref); the ref is a tag or branch of the snapshot.
PACKAGES = {
    "dbt_utils": ("dbt-labs+dbt-utils", "1.3.0"),
    "dbt_utils_0_8": ("dbt-labs+dbt-utils", "0.8.4"),
    "fivetran_utils": ("fivetran+dbt_fivetran_utils", "releases/v0.4.latest"),
    "spark_utils": ("dbt-labs+spark-utils", "0.3.3"),
    "dbt_date": ("godatadriven+dbt-date", "0.17.1"),
    "audit_helper": ("dbt-labs+dbt-audit-helper", "HEAD"),
    "codegen": ("dbt-labs+dbt-codegen", "0.13.1"),
    "dbt_project_evaluator": ("dbt-labs+dbt-project-evaluator", "HEAD"),
    "dbt_snowflake_query_tags": ("get-select+dbt-snowflake-query-tags", "HEAD"),
}
FIVETRAN = ("fivetran_utils", "spark_utils", "dbt_utils")

# project -> snapshot, ref (default HEAD), sub-directory holding dbt_project.yml, dialect of its SQL,
# packages (PACKAGES keys), extra --vars, run_first: models to `dbt run` (on the empty source
# tables) before compiling, so that macros introspecting them see their columns. The fivetran packages are taken at their last commit
# before they called fivetran_utils.union_connections, which no snapshot of fivetran_utils here has
# (dbt_github has its own copy of it, and is taken at HEAD).
PROJECTS: dict[str, dict] = {
    "jaffle-shop": {"repo": "dbt-labs+jaffle-shop", "dialect": "duckdb",
                    "packages": ("dbt_utils", "dbt_date", "audit_helper")},
    "jaffle_shop_duckdb": {"repo": "dbt-labs+jaffle_shop_duckdb", "dialect": "duckdb", "packages": ()},
    "dbt-project-evaluator": {"repo": "dbt-labs+dbt-project-evaluator", "dialect": "duckdb",
                              "packages": ("dbt_utils",)},
    "dbt_artifacts": {"repo": "brooklyn-data+dbt_artifacts", "dialect": "duckdb", "packages": ()},
    "fivetran-stripe": {"run_first": "path:models/staging/tmp", "ref": "922ae62", "repo": "fivetran+dbt_stripe", "dialect": "duckdb", "packages": FIVETRAN},
    "fivetran-hubspot": {"run_first": "path:models/staging/tmp", "ref": "ce0ab86", "repo": "fivetran+dbt_hubspot", "dialect": "duckdb", "packages": FIVETRAN},
    "fivetran-salesforce": {"repo": "fivetran+dbt_salesforce", "dialect": "duckdb", "packages": FIVETRAN},
    "fivetran-zendesk": {"run_first": "path:models/staging/tmp", "ref": "0baeb69", "repo": "fivetran+dbt_zendesk", "dialect": "duckdb", "packages": FIVETRAN},
    "fivetran-github": {"run_first": "path:models/staging/tmp", "repo": "fivetran+dbt_github", "dialect": "duckdb", "packages": FIVETRAN},
    "mattermost-analytics": {"repo": "mattermost+mattermost-data-warehouse", "subdir": "transform/mattermost-analytics",
                             "dialect": "snowflake",
                             "packages": ("dbt_utils", "codegen", "dbt_project_evaluator", "dbt_snowflake_query_tags")},
    "mattermost-snowflake-dbt": {"repo": "mattermost+mattermost-data-warehouse", "subdir": "transform/snowflake-dbt",
                                 "dialect": "snowflake", "packages": ("dbt_utils_0_8", "codegen")},
}

PROFILE = """corpus:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: {path}
      database: corpus
      schema: main
      threads: 1
"""


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True).stdout


def export(repo: str, ref: str, subdir: str | None, dest: Path) -> str:
    """Export ``ref`` (or its sub-directory) of a snapshot into dest; return the commit."""
    git_dir = MIRROR / repo / "repo"
    commit = git(git_dir, "rev-parse", f"{ref}^{{commit}}").strip()
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    # Snapshots lack files of 4 MiB and more (seed data): leave out the blobs that are absent.
    listing = git(git_dir, "ls-tree", "-r", "-z", commit, *([subdir] if subdir else [])).split("\0")
    entries = [line.split("\t", 1) for line in listing if line]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    check = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-check"], check=True,
                           capture_output=True, text=True, input="".join(f"{sha}\n" for sha, _ in blobs)).stdout
    missing = [path for (_, path), line in zip(blobs, check.splitlines()) if line.endswith("missing")]
    pathspecs = ([subdir] if subdir else ["."]) + [f":(exclude,literal){path}" for path in missing]
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", commit, "--", *pathspecs],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)] + (["--strip-components", str(subdir.count("/") + 1)] if subdir else []),
                   input=archive, check=True)
    return commit


def package_name(path: Path) -> str:
    for line in (path / "dbt_project.yml").read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise ValueError(f"no name in {path}/dbt_project.yml")


def relation_key(relation_name: str | None) -> str | None:
    """``"db"."schema"."table"`` -> ``schema.table`` (lowercase; the catalog is dropped)."""
    if not relation_name:
        return None
    parts = [p.strip().strip('"`[]') for p in relation_name.replace("`", '"').split(".")]
    return ".".join(parts[-2:]).lower() if len(parts) >= 2 else None


DUCKDB_TYPES = [
    (r"^(tiny|small|big)?int(eger)?\d*$|^int64$|^long$", "BIGINT"),
    (r"^(numeric|decimal|number)(\(.*\))?$|^float\d*$|^double( precision)?$|^real$", "DOUBLE"),
    (r"^bool(ean)?$", "BOOLEAN"),
    (r"^date$", "DATE"),
    (r"^timestamp.*$|^datetime$", "TIMESTAMP"),
]

MAKE_SOURCES = """
import duckdb, json, sys
spec = json.loads(sys.stdin.read())
con = duckdb.connect(spec["main"])
for alias, path in spec["attach"].items():
    con.execute(f"ATTACH '{path}' AS {alias}")
for statement in spec["statements"]:
    con.execute(statement)
con.close()
"""


def make_sources(manifest: dict, db_dir: Path, attach: list[str], python: str) -> None:
    """Create every source of the manifest as an empty table: its YAML columns (VARCHAR unless the
    YAML data_type is plainly numeric/boolean/date/timestamp), or one ``id`` column if it documents none."""
    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'
    statements = []
    for source in sorted(manifest["sources"].values(), key=lambda n: n["unique_id"]):
        database = (source.get("database") or "corpus").lower()
        schema, table = source["schema"], source.get("identifier") or source["name"]
        columns = []
        for column in source.get("columns", {}).values():
            declared = (column.get("data_type") or "").strip().lower()
            kind = next((t for pattern, t in DUCKDB_TYPES if re.match(pattern, declared)), "VARCHAR")
            if column["name"].lower() not in {c[0].lower() for c in columns}:
                columns.append((column["name"], kind))
        columns = columns or [("id", "VARCHAR")]
        statements.append(f"CREATE SCHEMA IF NOT EXISTS {q(database)}.{q(schema)}")
        statements.append(f"CREATE TABLE IF NOT EXISTS {q(database)}.{q(schema)}.{q(table)} ("
                          + ", ".join(f"{q(c)} {t}" for c, t in columns) + ")")
    spec = {"main": str(db_dir / "corpus.duckdb"), "attach": {a: str(db_dir / f"{a}.duckdb") for a in attach},
            "statements": statements}
    subprocess.run([python, "-c", MAKE_SOURCES], input=json.dumps(spec), text=True, check=True)


def render(name: str, spec: dict, work: Path, out: Path, dbt: str) -> dict:
    src = work / "src" / name
    commit = export(spec["repo"], spec.get("ref", "HEAD"), spec.get("subdir"), src)
    for f in ("packages.yml", "dependencies.yml", "package-lock.yml"):
        (src / f).unlink(missing_ok=True)
    package_commits = {}
    for key in spec["packages"]:
        repo, ref = PACKAGES[key]
        tmp = work / "pkg_tmp" / key
        package_commits[key] = f"{repo}@{ref} ({export(repo, ref, None, tmp)[:10]})"
        target = src / "dbt_packages" / package_name(tmp)
        target.parent.mkdir(exist_ok=True)
        shutil.move(str(tmp), str(target))
    profiles = work / "profiles" / name
    profiles.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work / "db" / name, ignore_errors=True)  # a fresh, empty catalog each time
    (work / "db" / name).mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DBT_VERSION_CHECK="false", DO_NOT_TRACK="1")
    # dbt compile stops at the first model whose compilation fails (a missing macro, an
    # introspection query that fails): exclude that model and compile again, until none fails.
    # Databases other than the profile's (Snowflake's RAW, ANALYTICS) are attached empty, so that
    # introspection of their information_schema finds nothing instead of failing.
    excluded: dict[str, str] = {}
    attach: list[str] = []
    sources_made = False
    python = str(Path(dbt).parent / "python")
    log = []
    for _attempt in range(MAX_ATTEMPTS):
        profile = PROFILE.format(path=work / "db" / name / "corpus.duckdb")
        if attach:
            profile += "      attach:\n" + "".join(
                f"        - path: '{work / 'db' / name / a}.duckdb'\n          alias: {a}\n" for a in attach)
        (profiles / "profiles.yml").write_text(profile)
        cmd = [dbt, "compile", "--project-dir", str(src), "--profiles-dir", str(profiles), "--profile", "corpus",
               "--target", "dev", "--threads", "1", "--select", "resource_type:model"]
        if excluded:
            cmd += ["--exclude", *sorted(excluded)]
        if spec.get("vars"):
            cmd += ["--vars", json.dumps(spec["vars"])]
        proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
        text = proc.stdout + proc.stderr
        log.append(" ".join(cmd) + "\n" + text)
        manifest_path = src / "target" / "manifest.json"
        if not attach and manifest_path.exists():
            nodes = json.loads(manifest_path.read_text())
            databases = {n.get("database") for n in [*nodes["sources"].values(), *nodes["nodes"].values()]}
            attach = sorted({d.lower() for d in databases if d and d.lower() != "corpus"})
        if not sources_made and manifest_path.exists():
            # Every source becomes an empty table with its documented columns, so that
            # adapter.get_relation / get_columns_in_relation find it as they would in a warehouse.
            sources_made = True
            make_sources(json.loads(manifest_path.read_text()), work / "db" / name, attach, python)
            if spec.get("run_first"):
                run = subprocess.run([dbt, "run", *cmd[2:cmd.index("--select")], "--select", spec["run_first"]],
                                     cwd=src, env=env, capture_output=True, text=True)
                log.append("dbt run --select " + spec["run_first"] + "\n" + run.stdout + run.stderr)
            continue
        failed = re.search(r"Encountered an error:\s*\n.*?(?:Error) in model (\S+) \((\S+)\)\s*\n(.*)", text, re.S)
        if proc.returncode == 0 or not failed or failed.group(1) in excluded:
            break
        excluded[failed.group(1)] = " ".join(failed.group(3).split())[:300]
    (work / "logs" / f"{name}.log").write_text("\n\n".join(log))
    project_out = out / name
    if project_out.exists():
        shutil.rmtree(project_out)
    project_out.mkdir(parents=True)
    info = {"project": name, "repository": spec["repo"].replace("+", "/"), "commit": commit,
            "subdir": spec.get("subdir", ""), "dialect": spec["dialect"], "packages": package_commits,
            "dbt_exit_code": proc.returncode, "attached": attach, "models": [], "relations": {}}
    manifest_path = src / "target" / "manifest.json"
    if not manifest_path.exists():
        tail = [line for line in text.splitlines() if line.strip()][-5:]
        info["project_error"] = "\n".join(tail)
        (project_out / "corpus.json").write_text(json.dumps(info, indent=1, sort_keys=True))
        return info
    manifest = json.loads(manifest_path.read_text())
    results = {}
    run_results = src / "target" / "run_results.json"
    if run_results.exists():
        for r in json.loads(run_results.read_text())["results"]:
            results[r["unique_id"]] = r
    root = manifest["metadata"].get("project_name") or package_name(src)
    for kind, nodes in (("source", manifest["sources"]), ("model", manifest["nodes"])):
        for node in nodes.values():
            if kind == "model" and node["resource_type"] != "model":
                continue
            key = relation_key(node.get("relation_name"))
            if key is None:
                continue
            columns = [{"name": c["name"], "data_type": c.get("data_type")} for c in node.get("columns", {}).values()]
            entry = info["relations"].setdefault(key, {"kind": kind, "name": node["name"], "columns": []})
            known = {c["name"].lower() for c in entry["columns"]}
            entry["columns"] += [c for c in columns if c["name"].lower() not in known]
    for uid, node in sorted(manifest["nodes"].items()):
        if node["resource_type"] != "model" or node["package_name"] != root:
            continue
        model = {"name": node["name"], "unique_id": uid, "original_file_path": node["original_file_path"],
                 "materialized": node["config"].get("materialized"), "relation": relation_key(node.get("relation_name"))}
        code = node.get("compiled_code")
        result = results.get(uid)
        if code and (result is None or result["status"] in ("success", "pass")):
            model["status"] = "compiled"
            model["file"] = f"{node['name']}.sql"
            (project_out / model["file"]).write_text(code)
        else:
            model["status"] = "error"
            model["message"] = excluded.get(node["name"]) or (result or {}).get("message") or "not compiled (no result)"
        info["models"].append(model)
    (project_out / "corpus.json").write_text(json.dumps(info, indent=1, sort_keys=True))
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/work/corpus/rendered", type=Path)
    parser.add_argument("--work", default="/work/corpus/work", type=Path)
    parser.add_argument("--dbt", default="/work/corpus/venv/bin/dbt")
    parser.add_argument("--only", nargs="*", help="projects to (re)render; the others' output is kept")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(PROJECTS)
    for name in names:
        info = render(name, PROJECTS[name], args.work, args.out, args.dbt)
        compiled = sum(m["status"] == "compiled" for m in info["models"])
        print(f"{name}: {compiled}/{len(info['models'])} models compiled" + (
            f"; project error: {info['project_error']}" if "project_error" in info else ""), flush=True)
    projects = []
    for name in PROJECTS:
        path = args.out / name / "corpus.json"
        if path.exists():
            info = json.loads(path.read_text())
            projects.append({k: info[k] for k in ("project", "repository", "commit", "subdir", "dialect", "packages")}
                            | {"models": len(info["models"]),
                               "compiled": sum(m["status"] == "compiled" for m in info["models"])})
    (args.out / "manifest.json").write_text(json.dumps({"projects": projects}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
