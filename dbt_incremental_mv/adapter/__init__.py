"""The ``spark_mv`` dbt adapter plugin: dbt-spark plus the fast_refresh materialization."""

from pathlib import Path

import yaml
from dbt.adapters.base import AdapterPlugin
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager, SparkMVCredentials  # noqa: F401
from dbt_incremental_mv.adapter.impl import SparkMVAdapter

PACKAGE = Path(__file__).resolve().parent.parent
MATERIALIZATION = Path("materializations") / "fast_refresh.sql"


def _macro_dirs(project: Path) -> list[Path]:
    """The macro directories of the dbt project in ``project`` (its ``macro-paths``), [] if none."""
    try:
        config = yaml.safe_load((project / "dbt_project.yml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    return [(project / path).resolve() for path in config.get("macro-paths") or ["macros"]]


def find_include_path(package: Path = PACKAGE) -> str:
    """The plugin's include path: the dbt project whose macros dbt loads as the plugin's package.

    The macros live in the repository's top-level ``macros/``. An installed wheel stores them in
    ``include/macros`` (pyproject.toml, force-include): the project is ``include/``. A source
    checkout (editable install, PYTHONPATH) has them only at the top level: the project is
    ``include/checkout/``, whose ``macro-paths`` is ``../../../macros``. No symlink either way.
    Fails, naming the directories looked in, when neither holds the fast_refresh materialization
    (without it dbt would say only that the materialization does not exist).
    """
    include = package / "include"
    looked_in = []
    for project, what in ((include, "the installed package"), (include / "checkout", "a source checkout")):
        for macros in _macro_dirs(project):
            if (macros / MATERIALIZATION).is_file():
                return str(project)
            looked_in.append(f"{macros} ({what})")
    places = " nor in ".join(looked_in) or f"{include} (no dbt_project.yml)"
    raise DbtRuntimeError(
        f"dbt-incremental-mv cannot find its macros: no {MATERIALIZATION.as_posix()} in {places}, so "
        "dbt would have no 'fast_refresh' materialization. Reinstall the plugin (pip install "
        "--force-reinstall --no-deps dbt-incremental-mv, or `pip install .` from a source checkout); "
        "in a source checkout, restore the repository's top-level macros/ directory (git checkout -- macros)."
    )


INCLUDE_PATH = find_include_path()

Plugin = AdapterPlugin(
    adapter=SparkMVAdapter,  # type: ignore[arg-type]  # as dbt-spark's own Plugin: not an AdapterProtocol
    credentials=SparkMVCredentials,
    include_path=INCLUDE_PATH,
    dependencies=["spark"],
    project_name="dbt_spark_mv",
)
