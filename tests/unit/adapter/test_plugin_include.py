"""The plugin's include path holds its macros in a source checkout and in a wheel (no symlink), and
the plugin fails to load, saying what is missing and what to do, when neither has them."""

import shutil
from pathlib import Path

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.adapter import INCLUDE_PATH, MATERIALIZATION, PACKAGE, Plugin, _macro_dirs, find_include_path

REPO = PACKAGE.parent


def package_copy(tmp_path, macros_where):
    """A copy of the package's include/ layout: macros at the top level (a source checkout), in
    include/macros (a wheel) or nowhere."""
    root = tmp_path / "site"
    package = root / "dbt_incremental_mv"
    shutil.copytree(PACKAGE / "include", package / "include", ignore=shutil.ignore_patterns("macros"))
    if macros_where == "checkout":
        shutil.copytree(REPO / "macros", root / "macros")
    elif macros_where == "wheel":
        shutil.copytree(REPO / "macros", package / "include" / "macros")
        shutil.rmtree(package / "include" / "checkout")  # the wheel leaves it out
    return package


def test_the_plugin_include_path_holds_the_macros_without_a_symlink():
    assert Plugin.include_path == INCLUDE_PATH
    macro_dirs = _macro_dirs(Path(INCLUDE_PATH))
    assert any((d / MATERIALIZATION).is_file() for d in macro_dirs), macro_dirs
    assert not (PACKAGE / "include" / "macros").is_symlink()


def test_a_source_checkout_uses_the_top_level_macros(tmp_path):
    package = package_copy(tmp_path, "checkout")
    assert find_include_path(package) == str(package / "include" / "checkout")


def test_a_wheel_uses_its_copy_of_the_macros(tmp_path):
    package = package_copy(tmp_path, "wheel")
    assert find_include_path(package) == str(package / "include")


def test_missing_macros_fail_at_plugin_load_saying_where_and_what_to_do(tmp_path):
    package = package_copy(tmp_path, None)
    with pytest.raises(DbtRuntimeError) as missing:
        find_include_path(package)
    message = str(missing.value)
    assert "cannot find its macros: no materializations/fast_refresh.sql in" in message
    assert f"{package / 'include' / 'macros'} (the installed package)" in message
    assert f"{tmp_path / 'site' / 'macros'} (a source checkout)" in message
    assert "'fast_refresh' materialization" in message
    assert "pip install --force-reinstall" in message and "macros/" in message
