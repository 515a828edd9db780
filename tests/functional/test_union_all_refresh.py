"""UNION ALL views: each branch is maintained by its own class on its own rows (the hidden
``_mv_branch``), the changed branches' writes combined into one DELETE and one INSERT."""

import pytest

from tests.functional.differential import randomized_rounds, soak_factor
from tests.functional.test_aggregate_refresh import SRC, ShopViews
from tests.functional.util import rows

O, C = SRC["orders"], SRC["customers"]
VIEWS = {
    # join branches over the same master under the same alias (a row can be in both), the second
    # joined to customers, its expression named by the first branch
    "order_channels": (
        f"select o.order_id, o.amount, o.status as channel from {O} o where o.status = 'open' or o.amount > 2 "
        "union all "
        f"select o.order_id, o.amount * 2, c.segment from {O} o join {C} c on o.customer_id = c.customer_id "
        "where c.region_id is not null"
    ),
    # aggregate branches: a GROUP BY with AVG and MIN, a HAVING over a join, a DISTINCT
    "status_and_region_totals": (
        f"select o.status as k, count(*) as n, avg(o.amount) as avg_amount, min(o.weight) as min_weight from {O} o "
        "group by o.status "
        "union all "
        "select cast(c.region_id as string), count(*), avg(o.amount) as a, max(o.weight) "
        f"from {O} o join {C} c on o.customer_id = c.customer_id group by cast(c.region_id as string) having count(*) > 1 "
        "union all "
        f"select distinct c.segment, cast(1 as bigint), cast(null as decimal(14,6)), cast(null as double) from {C} c"
    ),
    # a join branch, an outer join branch and an aggregate (MAX) branch labelled by a constant
    "customer_lines": (
        f"select o.customer_id as id, o.status as label, o.amount as value from {O} o where o.status = 'open' "
        "union all "
        f"select c.customer_id, c.segment, o.amount from {C} c left join {O} o on o.customer_id = c.customer_id "
        "union all "
        f"select o.customer_id, 'max', max(o.amount) from {O} o group by o.customer_id"
    ),
    # an outer join branch and an aggregate branch selecting a negative integer constant (a group
    # key, which Spark read as a position in GROUP BY: GROUP_BY_POS_OUT_OF_RANGE at the build)
    "segment_orders": (
        f"select c.segment, o.order_id, o.amount from {C} c left join {O} o on o.customer_id = c.customer_id "
        "union all "
        f"select c.segment, -1 as order_id, sum(o.amount) from {O} o join {C} c on o.customer_id = c.customer_id "
        "group by c.segment"
    ),
}


class TestUnionAllRefresh(ShopViews):
    VIEWS = VIEWS
    CONFIG = "materialized='fast_refresh', refresh_method='fast', refresh_stats=true"

    @pytest.mark.parametrize("seed", [41])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)
        schema = project.test_schema
        assert rows(project, f"select distinct _mv_branch from {schema}.customer_lines order by 1") == [(1,), (2,), (3,)]

        rounds = randomized_rounds(2)
        for round_number in range(rounds):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload, from_logs=round_number % 2 == 1 or rounds == 1)
            assert log.count("fast refresh:") == len(VIEWS), log

        # by kind, one master at a time: a change reaches only the branches reading it
        for masters, kinds in ((["customers"], ("insert", "update")), (["orders"], ("delete", "update_key"))):
            workload.round(8, masters=masters, kinds=kinds)
            self.refreshed(workload)

        # every order goes, then new ones
        workload.delete_every_row("orders")
        self.refreshed(workload)
        workload.round(10, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)
