"""Views whose rows carry window functions over a common partition (LEAD/LAG, running and
partition-wide aggregates, ROW_NUMBER kept as a column, QUALIFY): a refresh recomputes the
partitions its changes touch, exact after every randomized round (NULL partition keys, rows moving
between partitions, filters before the windows and after them)."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.functional.test_aggregate_refresh import SRC
from tests.functional.test_ranked_refresh import QualifyFreeViews

VIEWS = {
    # each order with the customer's next one, its total and the order's recency; NULL customers
    # are one partition; a filter before the windows
    "order_sequence": (
        "select order_id, customer_id, amount, "
        "lead(order_id) over (partition by customer_id order by order_id) as next_order, "
        "sum(amount) over (partition by customer_id) as customer_total, "
        "row_number() over (partition by customer_id order by order_id desc) as recency "
        f"from {SRC['orders']} where status <> 'cancelled' or status is null"
    ),
    # dbt's import-CTE style: the windows in one CTE, a filter on them after (a status change)
    "status_changes": (
        f"with source as (select * from {SRC['orders']}), "
        "windowed as (select order_id, customer_id, status, quantity, "
        "lag(status) over (partition by customer_id order by order_id) as previous_status, "
        "count(*) over (partition by customer_id, quantity) as same_quantity from source), "
        "final as (select order_id, customer_id, status, previous_status, same_quantity from windowed "
        "where previous_status is null or previous_status <> status) "
        "select * from final"
    ),
    # a running total over a ROWS frame, partitioned by an expression
    "running_quantities": (
        "select order_id, status, quantity, sum(quantity) over (partition by coalesce(status, 'none') "
        "order by order_id rows between unbounded preceding and current row) as running_quantity "
        f"from {SRC['orders']}"
    ),
    # QUALIFY on a window that is not a rank: customers sharing their region
    "shared_regions": (
        f"select customer_id, region_id, segment from {SRC['customers']} "
        "qualify count(*) over (partition by region_id) > 1"
    ),
}

QUALIFY_FREE = {
    "shared_regions": (
        "select customer_id, region_id, segment from (select customer_id, region_id, segment, "
        f"count(*) over (partition by region_id) as _n from {SRC['customers']}) where _n > 1"
    ),
}


class TestWindowedRefresh(QualifyFreeViews):
    VIEWS = VIEWS
    QUALIFY_FREE = QUALIFY_FREE

    @pytest.mark.parametrize("seed", [41])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)
        self.refreshed_by_partitions(workload)
        workload.delete_every_row("orders")
        self.refreshed(workload)
        workload.round(12, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: status_changes}"])
        assert "windowed (windows partitioned by" in log, log
