"""Aggregate views with HAVING: the view holds the groups that pass; a refresh applies the delta
to the groups it holds and recomputes from the masters the groups of the delta it does not hold
(they failed the filter or did not exist), so groups enter and leave the view as changes arrive."""

import re

import pytest

from tests.functional.differential import soak_factor
from tests.functional.test_aggregate_refresh import SRC, ShopViews
from tests.functional.util import rows

VIEWS = {
    # customers with three orders or more: a customer enters and leaves as orders come and go
    "frequent_customers": (
        "select o.customer_id, count(*) as n, sum(o.amount) as total "
        f"from {SRC['orders']} o group by o.customer_id having count(*) >= 3"
    ),
    # a HAVING over selected aggregates (SUM, MAX) and a select alias, NULLs in the filter
    "big_statuses": (
        "select o.status, count(*) as n, sum(o.amount) as total, max(o.amount) as max_amount, min(o.weight) as min_weight "
        f"from {SRC['orders']} o group by o.status having total > 3 or max(o.amount) >= 10 or n > 6"
    ),
    # over a join; COUNT(*) not selected (the hidden count) and a group key in the HAVING
    "busy_regions": (
        "select c.region_id, sum(o.quantity) as quantity, avg(o.amount) as avg_amount "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id "
        "group by c.region_id having count(*) > 2 and c.region_id is not null"
    ),
    # over a LEFT JOIN: segments whose customers have at least two orders
    "ordering_segments": (
        "select c.segment, count(o.order_id) as orders, count(*) as n "
        f"from {SRC['customers']} c left join {SRC['orders']} o on o.customer_id = c.customer_id "
        "group by c.segment having count(o.order_id) >= 2"
    ),
}


class TestHavingRefresh(ShopViews):
    VIEWS = VIEWS
    CONFIG = "materialized='fast_refresh', refresh_method='fast', refresh_stats=true"

    @pytest.mark.parametrize("seed", [23])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)

        moved = {"entered": 0, "left": 0}

        def refresh():
            log = self.refreshed(workload)
            for inserted, deleted in ((int(a), int(b)) for a, b in _group_counts(log)):
                moved["entered"] += inserted
                moved["left"] += deleted
            return log

        for round_number in range(2 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            log = refresh()
            assert log.count("fast refresh:") == len(VIEWS) and "HAVING: recompute" in log, log

        # by kind: inserts only (groups enter), deletes only (they leave), updates and key changes
        for kinds in (("insert",), ("delete",), ("update_key", "update")):
            workload.round(10, kinds=kinds)
            refresh()

        # every order goes: no group passes
        workload.delete_every_row("orders")
        refresh()
        assert rows(project, f"select count(*) from {project.test_schema}.frequent_customers") == [(0,)]

        workload.round(12, masters=["orders"], kinds=("insert",))
        refresh()
        assert moved["entered"] and moved["left"], f"groups entered and left the views: {moved}"


def _group_counts(log):
    return re.findall(r"groups inserted: (\d+), groups updated: \d+, groups deleted: (\d+)", log)
