"""Aggregates over LEFT and RIGHT joins: fast refreshed by the affected slices of the anchor, old
state minus new state, as signed rows (refresh/views/outer_aggregate.py); and outer joins a
condition no NULL satisfies makes inner, maintained as inner joins."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.depth import sample
from tests.functional.differential import randomized_rounds, soak_factor
from tests.functional.test_aggregate_refresh import SRC, ShopViews
from tests.functional.util import rows

VIEWS = {
    # an ON condition on both sides beside the equality (a range, issue 65): slices recomputed
    "customer_orders_in_range": (
        "select c.customer_id, count(o.order_id) as n_orders, coalesce(sum(o.amount), 0) as total "
        f"from {SRC['customers']} c left join {SRC['orders']} o on o.customer_id = c.customer_id "
        "and o.quantity <= c.region_id group by c.customer_id"
    ),
    # a customer's orders, zero for customers without any: COUNT(x) of the null-supplying side
    "customer_orders": (
        "select c.customer_id, c.segment, count(*) as n_rows, count(o.order_id) as n_orders, "
        "sum(o.amount) as total, avg(o.weight) as avg_weight, min(o.amount) as min_amount, max(o.quantity) as max_quantity "
        f"from {SRC['customers']} c left join {SRC['orders']} o on o.customer_id = c.customer_id "
        "group by c.customer_id, c.segment"
    ),
    # grouped by a null-supplying column (the NULL group: orders of no known customer), three
    # masters, the second outer join hanging off the first one's null-supplying side
    "orders_by_region": (
        "select r.region, count(*) as n, sum(o.amount) as total, max(o.amount) as max_amount, "
        "count(c.customer_id) as known_customers "
        f"from {SRC['orders']} o left join {SRC['customers']} c on o.customer_id = c.customer_id "
        f"left join {SRC['regions']} r on c.region_id = r.region_id group by r.region"
    ),
    # RIGHT JOIN, residual ON conditions, a WHERE on the anchor
    "open_orders_per_customer": (
        "select c.region_id, count(o.order_id) as open_orders, sum(o.quantity) as quantity, "
        "min(c.customer_id) as first_customer, max(c.customer_id) as last_customer "
        f"from {SRC['orders']} o right join {SRC['customers']} c on o.customer_id = c.customer_id and o.status = 'open' "
        "and (o.amount is null or o.amount > 0) where c.segment is null or c.segment <> 'corporate' group by c.region_id"
    ),
    # a global aggregate; a LEFT JOIN with a filter of its own in ON (row by row: the filter
    # decides which changed rows count and which join values go from some rows to none)
    "region_totals": (
        "select count(*) as n, count(c.customer_id) as customers, max(c.segment) as max_segment, avg(c.region_id) as avg_region "
        f"from {SRC['regions']} r left join {SRC['customers']} c on c.region_id = r.region_id and c.segment <> 'corporate'"
    ),
    # outer joins whose null-extended rows a condition discards, maintained as the inner joins they
    # are (analysis/null_rejection.py): a WHERE on the null-supplying side under an aggregate, an
    # inner join reading it, a RIGHT JOIN whose preserved rows the WHERE discards
    "retail_orders_by_region": (
        "select c.region_id, count(*) as n, sum(o.amount) as total "
        f"from {SRC['orders']} o left join {SRC['customers']} c on o.customer_id = c.customer_id "
        "where c.segment = 'retail' group by c.region_id"
    ),
    "orders_with_region": (
        "select o.order_id, o.amount, c.segment, r.region "
        f"from {SRC['orders']} o left join {SRC['customers']} c on o.customer_id = c.customer_id "
        f"join {SRC['regions']} r on r.region_id = c.region_id"
    ),
    "customers_with_known_status": (
        "select c.customer_id, o.order_id, o.amount "
        f"from {SRC['orders']} o right join {SRC['customers']} c on o.customer_id = c.customer_id "
        "where o.status is not null"
    ),
    # SELECT DISTINCT over a LEFT JOIN
    "segment_statuses": (
        "select distinct c.segment, o.status "
        f"from {SRC['customers']} c left join {SRC['orders']} o on o.customer_id = c.customer_id"
    ),
}


class TestOuterJoinAggregateRefresh(ShopViews):
    VIEWS = VIEWS

    @pytest.mark.parametrize("seed", [11])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed, initial_rows=8)

        rounds = randomized_rounds(2)
        for round_number in range(rounds):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload, from_logs=round_number % 2 == 1 or rounds == 1)
            assert log.count("fast refresh:") == len(VIEWS), log

        # by kind: inserts only (a null-extended row goes when the first partner comes), deletes
        # only (it comes back when the last one goes), updates and key changes (all three at full
        # depth, one drawn by the run's seed in CI: tests/depth.py)
        for kinds in sample((("insert",), ("delete",), ("update_key", "update")), 1, "outer aggregate kinds"):
            workload.round(12, kinds=kinds)
            log = self.refreshed(workload)
            assert "SLICES" in log

        # every order goes: customers keep their zero rows
        workload.delete_every_row("orders")
        self.refreshed(workload)
        assert rows(project, f"select count(*) from {project.test_schema}.customer_orders where n_orders <> 0") == [(0,)]

        workload.round(8, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)

        # explain says which outer joins it reads as inner joins, and why
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: orders_with_region}"])
        assert "LEFT JOIN c read as inner: a condition no NULL satisfies discards the rows it null-extends" in log, log
