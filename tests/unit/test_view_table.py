import pytest

from dbt_incremental_mv.config import ConfigError
from dbt_incremental_mv.view_table import contract_types, enforce_contract, partition_spec


def test_partition_by_then_clustered_columns_as_bucket_transforms():
    assert partition_spec("v", {}) == []
    assert partition_spec("v", {"partition_by": "days(ts)"}) == ["days(ts)"]
    spec = partition_spec("v", {"partition_by": ["region"], "clustered_by": ["order`id"], "buckets": 4})
    assert spec == ["region", "bucket(4, `order``id`)"]


@pytest.mark.parametrize("config", [{"clustered_by": "a"}, {"buckets": 4}, {"clustered_by": "a", "buckets": 0},
                                    {"clustered_by": "a", "buckets": "4"}, {"clustered_by": "a", "buckets": True}])
def test_incomplete_bucketing_is_refused_naming_both_configs(config):
    with pytest.raises(ConfigError, match="clustered_by=.*buckets=.*Set both, or neither"):
        partition_spec("v", config)


def test_contract_types_only_when_enforced_and_checked():
    model = {"name": "v", "config": {"contract": {"enforced": True}},
             "columns": {"a": {"name": "a", "data_type": "DECIMAL(10, 2)"}, "b": {"name": "b"}}}
    assert contract_types(model) == {"a": "DECIMAL(10, 2)"}
    assert contract_types({**model, "config": {}}) is None
    bad = {**model, "columns": {"a": {"name": "a", "data_type": "bigint); drop table x; --"}}}
    with pytest.raises(ConfigError, match="column a .* not a Spark type"):
        contract_types(bad)


def test_contract_casts_contracted_columns_and_keeps_hidden_ones():
    sql = enforce_contract("select 1", ["a", "_mv_o_id"], {"A": "bigint"})
    assert sql.startswith("select cast(`a` as bigint) as `a`, `_mv_o_id`\nfrom (\nselect 1\n)")
    assert enforce_contract("select 1", None, None) == "select 1"
