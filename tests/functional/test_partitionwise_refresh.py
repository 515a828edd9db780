"""Stacked queries recomputed by partition (ViewClass.PER_PARTITION): "latest row per key" then
aggregated, a window over another window's result, a window over groups (GROUP BY ALL too), an aggregate of an
aggregating CTE, DISTINCT in a CTE, a partition column the view does not select; over several
tables: a window over a join, an aggregating CTE LEFT joined back, a LEFT JOIN grouped or windowed by a column
of its null-supplying side whose NULL rows the query discards (read as an inner join), a UNION ALL aggregated (and grouped with a column of one table by
its key), a table joined by its key to another column or to an expression (a lookup), a FULL JOIN grouped by its key, a UNION, an
outer join filtered on its null-supplying side (partitioned by the orders' key); semi and anti joins
(EXISTS, NOT EXISTS, IN by a column and by an expression, NOT IN; IN selected, EXISTS under OR), FULL JOINs USING one column, a chain of lookups, constant rows (a
stub, labels joined), lookups windowed and grouped by the column matching them, a table
joined on its whole key (adding no key to the rows), LATERAL VIEW and SELECT generators, scalar
subqueries correlated by equalities, a star over USING, windows over rows without a key, a FULL JOIN nothing groups, unsorted
collections (over a window too), a partition column selected up from a CTE, an outermost ORDER BY.
A refresh recomputes the partitions its changes touch; exact after every randomized round (NULL
partition keys, rows moving between partitions, every row deleted, ties broken by the key)."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.depth import views
from tests.functional.test_aggregate_refresh import SRC, ShopViews
from tests.functional.util import rows

DEFINED = {
    # the latest order per customer and status (dbt's dedup staging), then per customer
    "customer_latest_totals": (
        f"with latest as (select *, row_number() over (partition by customer_id, status "
        f"order by amount desc nulls last, order_id desc) as rn from {SRC['orders']}), "
        "deduplicated as (select customer_id, status, amount, quantity from latest where rn = 1) "
        "select customer_id, count(*) as statuses, sum(amount) as amount, max(quantity) as most "
        "from deduplicated group by customer_id"
    ),
    # a window over another window's result
    "gaps": (
        "select order_id, customer_id, gap, sum(gap) over (partition by customer_id) as total_gap from ("
        "select order_id, customer_id, order_id - lag(order_id) over (partition by customer_id order by order_id) as gap "
        f"from {SRC['orders']}) as t where gap is not null"
    ),
    # a ranking of the groups of an aggregate
    "status_ranks": (
        "select customer_id, status, count(*) as n, dense_rank() over (partition by customer_id order by count(*) desc) "
        f"as r from {SRC['orders']} group by customer_id, status"
    ),
    # an aggregating CTE aggregated again; DISTINCT in a CTE; the partition column not selected
    "busiest_status": (
        f"with per_status as (select customer_id, status, count(*) as n from {SRC['orders']} "
        "group by customer_id, status having count(*) > 0) "
        "select max(n) as most, count(*) as statuses from per_status group by customer_id"
    ),
    "distinct_quantities": (
        f"with d as (select distinct status, quantity from {SRC['orders']}) "
        "select status, count(quantity) as quantities, min(quantity) as smallest from d group by status"
    ),
    # a window over a join on the partition column (the customer's region selected)
    "ranked_customer_orders": (
        "select o.order_id, c.region_id, o.amount, "
        "row_number() over (partition by c.customer_id order by o.amount desc nulls last, o.order_id) as position "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id"
    ),
    # an aggregating CTE joined back to its key's table (LEFT: customers without orders), the key
    # not selected
    "customer_spend": (
        f"with per as (select customer_id, count(*) as n, sum(amount) as spent from {SRC['orders']} "
        "group by customer_id) "
        f"select c.segment, per.n, per.spent from {SRC['customers']} c left join per on per.customer_id = c.customer_id"
    ),
    # UNION ALL of two tables, aggregated per the column both branches carry
    "customer_activity": (
        f"with u as (select customer_id, amount from {SRC['orders']} "
        f"union all select customer_id, cast(region_id as decimal(10,2)) from {SRC['customers']}) "
        "select customer_id, count(*) as n, sum(amount) as amount from u group by customer_id"
    ),
    # grouped by the customers' key and their segment, which the UNION ALL joined on the key does not
    # have: partitioned by the key alone
    "customer_segment_activity": (
        f"with u as (select customer_id, amount from {SRC['orders']} "
        f"union all select customer_id, cast(region_id as decimal(10,2)) from {SRC['customers']}) "
        f"select c.customer_id, c.segment, count(u.customer_id) as n, sum(u.amount) as amount from {SRC['customers']} c "
        "left join u on u.customer_id = c.customer_id group by c.customer_id, c.segment"
    ),
    # GROUP BY ALL under a running total per customer
    "customer_status_running": (
        f"with a as (select customer_id, status, count(*) as n, sum(amount) as amount from {SRC['orders']} group by all) "
        "select customer_id, status, n, amount, sum(n) over (partition by customer_id order by status) as running from a"
    ),
    # jaffle shop's customers: the orders LEFT JOIN their customer grouped by the customer's region
    # (orders of no customer, customers of no region: a NULL group), joined to the regions on it
    # (which discards that group): the LEFT JOIN read as inner, the orders a lookup through customers
    "region_order_totals": (
        f"with region_orders as (select c.region_id, count(*) as n, sum(o.amount) as spent from {SRC['orders']} o "
        f"left join {SRC['customers']} c on o.customer_id = c.customer_id group by c.region_id), "
        f"region_customers as (select region_id, count(*) as customers from {SRC['customers']} group by region_id) "
        f"select r.region_id, r.region, rc.customers, ro.n, ro.spent from {SRC['regions']} r "
        "left join region_customers rc on r.region_id = rc.region_id left join region_orders ro on r.region_id = ro.region_id"
    ),
    # ... a window partitioned by the null-extended region, inner joined to the regions on it
    "region_order_ranks": (
        "with ranked as (select o.order_id, c.region_id, o.amount, row_number() over (partition by c.region_id "
        f"order by o.amount desc nulls last, o.order_id) as position from {SRC['orders']} o "
        f"left join {SRC['customers']} c on c.customer_id = o.customer_id) "
        f"select r.region, ranked.order_id, ranked.position from {SRC['regions']} r join ranked on ranked.region_id = r.region_id"
    ),
    # ... filtered by WHERE on the null-supplying side (which no null-extended row passes)
    "retail_region_orders": (
        "select o.order_id, c.region_id, count(*) over (partition by c.region_id) as n "
        f"from {SRC['orders']} o left join {SRC['customers']} c on o.customer_id = c.customer_id where c.segment = 'retail'"
    ),
    # a lookup joined by its key equal to an expression over the partitioned table's columns
    "customer_rank_regions": (
        "select c.customer_id, r.region, row_number() over (partition by c.segment order by c.customer_id) as position "
        f"from {SRC['customers']} c left join {SRC['regions']} r on r.region_id = coalesce(c.region_id, 0) % 3 + 1"
    ),
    # partitioned by status, the customers a lookup (joined by customer_id): a changed customer
    # recomputes the statuses of its orders
    "status_segments": (
        "select o.status, c.segment, count(*) as n, sum(o.amount) as amount, "
        "dense_rank() over (partition by o.status order by count(*) desc, c.segment) as r "
        f"from {SRC['orders']} o join {SRC['customers']} c on c.customer_id = o.customer_id group by o.status, c.segment"
    ),
    # a FULL JOIN grouped by COALESCE of its key's sides (customers without orders, orders of no
    # known customer), and a UNION (distinct) at the top
    "customer_order_counts": (
        "select coalesce(c.customer_id, o.customer_id) as customer_id, count(o.order_id) as orders, "
        f"count(c.customer_id) as known from {SRC['customers']} c full outer join {SRC['orders']} o "
        "on o.customer_id = c.customer_id group by coalesce(c.customer_id, o.customer_id)"
    ),
    "customer_statuses": (
        f"select customer_id, status from {SRC['orders']} union select customer_id, segment from {SRC['customers']}"
    ),
    # an outer join the join classes refuse (a filter on the null-supplying side): nothing
    # partitions the rows, so the orders' key does, the customers a lookup
    "retail_or_unknown_orders": (
        f"select o.order_id, o.amount, c.segment from {SRC['orders']} o left join {SRC['customers']} c "
        "on o.customer_id = c.customer_id where c.segment = 'retail' or c.segment is null"
    ),
    # a semi join by another column than the partition's: the orders a lookup matched by customer_id
    # (a changed order recomputes its customer's segment)
    "segments_with_open_orders": (
        f"select c.segment, count(*) as n, count(c.region_id) as with_region from {SRC['customers']} c "
        f"where exists (select 1 from {SRC['orders']} o where o.customer_id = c.customer_id and o.status = 'open') "
        "group by c.segment"
    ),
    # IN by the partition column, NOT EXISTS by another column, IN by an expression (regions twice,
    # lookups matched by quantity and by coalesce(quantity, 0) + 1)
    "filtered_customer_totals": (
        "select o.order_id, o.customer_id, o.amount, sum(o.amount) over (partition by o.customer_id) as customer_total "
        f"from {SRC['orders']} o where o.customer_id in (select customer_id from {SRC['customers']} "
        f"where segment = 'retail') and not exists (select 1 from {SRC['regions']} r where r.region_id = o.quantity "
        f"and r.region is null) and coalesce(o.quantity, 0) + 1 in (select region_id from {SRC['regions']} "
        "where region = 'north' or region is null)"
    ),
    # constant rows: a stub of an empty table (never changes), labels joined to the orders
    "empty_stub": "select cast(null as string) as command, 0 as n where 1 = 0",
    "labelled_orders": (
        "with labels as (select 'open' as status, 1 as rank union all select 'shipped', 2) "
        "select o.order_id, l.rank, row_number() over (partition by o.customer_id order by l.rank, o.order_id) as k "
        f"from {SRC['orders']} o join labels l on l.status = o.status"
    ),
    # NOT IN over a column with NULLs (a NULL region empties the view, a NULL status is kept only
    # while regions 3 and 4 do not exist) and by values that match: regions lookups whose every change
    # reaches the NULL values
    "statuses_not_regions": (
        "select o.customer_id, count(*) as n, sum(o.amount) as amount "
        f"from {SRC['orders']} o where o.status not in (select region from {SRC['regions']} where region_id in (3, 4)) "
        f"and o.quantity not in (select region_id from {SRC['regions']} where region = 'north') "
        "group by o.customer_id"
    ),
    # IN selected as flags (TRUE, FALSE or NULL: regions lookups NULLs and all), EXISTS under OR
    "flagged_orders": (
        f"select o.order_id, o.status in (select region from {SRC['regions']} where region_id in (3, 4)) as regional, "
        f"o.quantity in (select region_id from {SRC['regions']} where region = 'south') as southern, "
        f"count(*) over (partition by o.customer_id) as n from {SRC['orders']} o where o.amount > 0 or exists "
        f"(select 1 from {SRC['customers']} c where c.customer_id = o.customer_id and c.segment = 'retail')"
    ),
    # FULL JOINs USING one column (dbt's "union of sources by key"), each side grouped by it
    "customer_sources": (
        f"with a as (select customer_id, count(*) as orders, sum(amount) as amount from {SRC['orders']} "
        f"group by customer_id), b as (select customer_id, max(segment) as segment from {SRC['customers']} "
        f"group by customer_id), d as (select distinct customer_id from {SRC['orders']} where status = 'open') "
        "select customer_id, a.orders, a.amount, b.segment, d.customer_id is not null as has_open "
        "from a full outer join b using (customer_id) full outer join d using (customer_id)"
    ),
    # a chain of lookups: regions matched to customers, customers to orders partitioned by status
    "status_regions": (
        "select o.status, r.region, count(*) as n, rank() over (partition by o.status order by count(*) desc, r.region) "
        f"as k from {SRC['orders']} o join {SRC['customers']} c on c.customer_id = o.customer_id "
        f"join {SRC['regions']} r on r.region_id = c.region_id group by o.status, r.region"
    ),
    # customers partitioned by region, the orders lookups whose window and grouping partition them
    # by the customer matching them: a changed order recomputes its customer's region
    "regional_spend_ranks": (
        "with latest as (select *, row_number() over (partition by customer_id order by amount desc nulls last, "
        f"order_id desc) as rn from {SRC['orders']}), spend as (select customer_id, count(*) as n, "
        f"sum(amount) as spent from {SRC['orders']} group by customer_id) "
        "select c.customer_id, c.segment, l.order_id as latest_order, s.spent, "
        "rank() over (partition by c.region_id order by s.spent desc nulls last, c.customer_id) as place "
        f"from {SRC['customers']} c left join latest l on l.customer_id = c.customer_id and l.rn = 1 "
        "left join spend s on s.customer_id = c.customer_id"
    ),
    # the customers numbered per region by spend: the spend joined on its whole key (the rows of the
    # join are told apart by the customers' key alone), the orders a lookup grouped by the customer
    # matching them
    "region_customer_numbers": (
        f"with per as (select customer_id, count(*) as n, sum(amount) as spent from {SRC['orders']} "
        "group by customer_id), "
        f"b as (select c.*, per.spent from {SRC['customers']} c left join per on per.customer_id = c.customer_id) "
        "select *, row_number() over (partition by region_id order by spent desc nulls last, customer_id) as k from b"
    ),
    # rows generated from each row: a LATERAL VIEW OUTER posexplode (nothing partitions: each order
    # its own partition), an explode as a column of a derived table grouped per customer
    "order_status_parts": (
        "select o.order_id, o.customer_id, p.pos, p.part "
        f"from {SRC['orders']} o lateral view outer posexplode(split(o.status, 'e')) p as pos, part"
    ),
    "customer_status_letters": (
        f"select customer_id, letter, count(*) as n from (select customer_id, explode(split(status, '')) as letter "
        f"from {SRC['orders']}) s group by customer_id, letter"
    ),
    # scalar subqueries correlated by equalities: aggregates of each customer's orders (selected, in
    # WHERE under OR), a region looked up by its id
    "customer_scalars": (
        f"select c.customer_id, c.segment, (select sum(o.amount) from {SRC['orders']} o "
        "where o.customer_id = c.customer_id) as spent, "
        f"(select max(r.region) from {SRC['regions']} r where r.region_id = c.region_id) as region "
        f"from {SRC['customers']} c where c.segment = 'retail' or (select count(*) from {SRC['orders']} o "
        "where o.customer_id = c.customer_id and o.status = 'open') > 0"
    ),
    # a star over a join USING its key (the key once, first), windowed per customer
    "orders_using_customers": (
        f"select *, count(*) over (partition by customer_id) as n from {SRC['orders']} o "
        f"left join {SRC['customers']} c using (customer_id)"
    ),
    # windows over rows no key tells apart (the orders' key not selected): ties broken by every
    # column of the rows, equal rows interchangeable
    "customer_status_sequence": (
        "select customer_id, status, row_number() over (partition by customer_id order by status, quantity) as k, "
        "lag(status) over (partition by customer_id order by status, quantity) as previous, "
        "count(distinct status) over (partition by customer_id) as statuses "
        f"from (select customer_id, status, quantity from {SRC['orders']}) t"
    ),
    # a FULL JOIN nothing groups: partitioned by its key, stored hidden as the COALESCE of its sides
    "orders_full_customers": (
        f"select o.order_id, o.amount, c.segment from {SRC['orders']} o full outer join {SRC['customers']} c "
        "on c.customer_id = o.customer_id"
    ),
    # collections the query leaves unordered (sorted by their values by every build and refresh):
    # per customer (the aggregate class), per customer and segment under a window (per partition)
    "customer_collections": (
        f"select customer_id, collect_list(status) as statuses, collect_set(quantity) as quantities, "
        f"count(*) as n from {SRC['orders']} group by customer_id"
    ),
    "customer_segment_statuses": (
        "select o.customer_id, c.segment, collect_list(o.status) as statuses, "
        f"count(*) over (partition by o.customer_id) as segments from {SRC['orders']} o "
        f"left join {SRC['customers']} c on c.customer_id = o.customer_id group by o.customer_id, c.segment"
    ),
    # a partition column selected up to the outer query from where it is: through a CTE the outer
    # query reads with a star (written out), and from a grouped level's key through a star
    "customer_order_lines": (
        f"with final as (select o.order_id || '-' || row_number() over (partition by o.customer_id order by "
        f"o.amount desc nulls last, o.order_id) as line, c.segment from {SRC['orders']} o left join "
        f"{SRC['customers']} c on c.customer_id = o.customer_id) select * from final"
    ),
    "busy_customer_spend": (
        f"select n, most from (select * from (select count(*) as n, max(amount) as most from {SRC['orders']} "
        "group by customer_id) a where n > 1) b"
    ),
    # an unsorted collection over a window (sorted by value); an outermost ORDER BY (ignored)
    "customer_status_sets": (
        f"select order_id, collect_set(status) over (partition by customer_id) as statuses from {SRC['orders']} "
        "order by order_id"
    ),
}
# at the CI's depth about half of them, another half for each commit (tests/depth.py): those the
# test reads by name, 18 others drawn by the run's seed
VIEWS = views(DEFINED, 18, "partitionwise views", always=("customer_latest_totals", "statuses_not_regions", "busiest_status"))
# what views are compared with where Spark cannot run their SQL as written, or leaves an order to
# its reading order: the query the product runs (a distinct count over a window as the size of the
# set, the collections sorted)
EXPECTED = {
    name: VIEWS[name]
    .replace("collect_list(status)", "array_sort(collect_list(status))")
    .replace("collect_set(quantity)", "array_sort(collect_set(quantity))")
    .replace("collect_list(o.status)", "array_sort(collect_list(o.status))")
    .replace(
        "collect_set(status) over (partition by customer_id)", "array_sort(collect_set(status) over (partition by customer_id))"
    )
    .replace(
        "count(distinct status) over (partition by customer_id)", "size(collect_set(status) over (partition by customer_id))"
    )
    for name in ("customer_collections", "customer_segment_statuses", "customer_status_sequence", "customer_status_sets")
    if name in VIEWS
}


class TestPartitionwiseRefresh(ShopViews):
    VIEWS = VIEWS
    EXPECTED = EXPECTED

    @pytest.mark.parametrize("seed", [53])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)
        self.refreshed_by_partitions(workload)
        # NOT IN's NULLs: a NULL region among regions 3 and 4 empties statuses_not_regions, and with
        # neither of them the orders of a NULL status come in (the partitions of every row's value)
        regions = f"{project.test_schema}.regions"
        project.run_sql(f"delete from {regions} where region_id in (3, 4)")
        project.run_sql(f"insert into {regions} values (3, null), (4, 'north')")
        self.refreshed(workload)
        project.run_sql(f"delete from {regions} where region_id in (3, 4)")
        self.refreshed(workload)
        assert rows(project, f"select count(*) from {project.test_schema}.statuses_not_regions") != [(0,)]
        workload.delete_every_row("orders")
        self.refreshed(workload)
        assert rows(project, f"select count(*) from {project.test_schema}.customer_latest_totals") == [(0,)]
        workload.round(12, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: busiest_status}"])
        assert "per partition (the query as written, recomputed by partition" in log, log
