"""The suite's own scheduling (tests/conftest.py): the test groups two test processes split between
them, and the table that starts the longest first."""
import ast
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import EXPECTED_SECONDS, expected_seconds, group_of, pytest_xdist_make_scheduler

REPO = Path(__file__).resolve().parents[2]


def test_a_class_a_module_and_the_thrift_tests_are_each_one_group():
    assert group_of("tests/functional/test_a.py::TestA::test_one[x::y]") == "tests/functional/test_a.py::TestA"
    assert group_of("tests/functional/test_a.py::TestA::test_two") == "tests/functional/test_a.py::TestA"
    assert group_of("tests/functional/test_a.py::test_f[1]") == "tests/functional/test_a.py"
    assert group_of("tests/functional/thrift/test_t.py::TestT::test_x") == "thrift"
    assert group_of("tests/functional/thrift/test_u.py::test_y") == "thrift"
    # the suffix xdist's loadgroup writes (pytest before 9.2) is not part of the group
    assert group_of("tests/unit/test_b.py::test_g@tests/unit/test_b.py") == "tests/unit/test_b.py"
    assert group_of("tests/unit/test_b.py::test_g[a@b]") == "tests/unit/test_b.py"


def test_every_ranked_group_names_a_test_module_or_class():
    for group in EXPECTED_SECONDS:
        if group == "thrift":
            assert (REPO / "tests/functional/thrift").is_dir()
            continue
        path, _, cls = group.partition("::")
        module = REPO / path
        assert module.is_file(), group
        if cls:
            classes = {node.name for node in ast.walk(ast.parse(module.read_text())) if isinstance(node, ast.ClassDef)}
            assert cls in classes, group


def test_functional_groups_not_ranked_run_before_the_unit_tests():
    assert expected_seconds("tests/functional/test_listing.py::TestListingInOneStatement") > expected_seconds(
        "tests/unit/test_config.py"
    ) == 0


def test_with_loadgroup_the_scheduler_splits_by_group_and_keeps_the_collection_order():
    def config(dist):
        values = {"dist": dist, "tx": ["2*popen"]}
        return SimpleNamespace(getvalue=values.get, option=SimpleNamespace(loadscopereorder=True))

    other = config("load")
    assert pytest_xdist_make_scheduler(other, None) is None and other.option.loadscopereorder
    grouped = config("loadgroup")
    scheduler = pytest_xdist_make_scheduler(grouped, None)
    thrift = {scheduler._split_scope(f"tests/functional/thrift/test_{n}.py::TestT::test_x") for n in "ab"}
    assert thrift == {"thrift"}
    assert scheduler._split_scope("tests/functional/test_a.py::TestA::test_one[1]") == "tests/functional/test_a.py::TestA"
    assert grouped.option.loadscopereorder is False  # xdist would reorder the groups by their test counts
