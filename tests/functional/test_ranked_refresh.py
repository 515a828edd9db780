"""Views of the top rows of window partitions ("latest row per key"): a refresh recomputes the
partitions its changes touch, exact after every randomized round (NULL partition keys, ties broken
by the master's key, rows moving between partitions, filters before and after the ranking)."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.functional.differential import Workload, soak_factor
from tests.functional.test_aggregate_refresh import SRC, ShopViews, defining_query, visible_columns
from tests.functional.util import rows

VIEWS = {
    # the latest order per customer: ROW_NUMBER = 1 over a derived table, NULL customers one partition
    "latest_orders": (
        "select * from (select o.*, row_number() over (partition by o.customer_id order by o.amount desc, o.order_id desc) as rn "
        f"from {SRC['orders']} o) as ranked_orders where rn = 1"
    ),
    # ties broken by the master's key (weight alone leaves them), a filter before the ranking
    "heaviest_open_orders": (
        "with ranked as (select order_id, customer_id, weight, status, "
        "row_number() over (partition by status order by weight desc nulls last) as position "
        f"from {SRC['orders']} where status <> 'cancelled') "
        "select order_id, customer_id, weight, status from ranked where position <= 2"
    ),
    # RANK keeps ties; a partition expression; a filter on the ranked rows
    "top_quantities": (
        "select order_id, quantity, status from ("
        "select order_id, quantity, status, amount, rank() over (partition by coalesce(status, 'none') order by quantity desc) as r "
        f"from {SRC['orders']}) as t where r < 3 and amount > 0"
    ),
    # DENSE_RANK over a dimension, written with QUALIFY
    "first_customers_per_region": (
        "select customer_id, region_id, segment "
        f"from {SRC['customers']} qualify dense_rank() over (partition by region_id order by segment) = 1"
    ),
}


QUALIFY_FREE = {
    "first_customers_per_region": (
        "select customer_id, region_id, segment from (select customer_id, region_id, segment, "
        "dense_rank() over (partition by region_id order by segment) as _r "
        f"from {SRC['customers']}) where _r = 1"
    ),
}


class QualifyFreeViews(ShopViews):
    """Views some of which are written with QUALIFY, each checked against the query it equals
    (``QUALIFY_FREE``, by name): Spark 3.5 reads no QUALIFY."""

    QUALIFY_FREE: dict[str, str] = {}

    def check_all(self, workload):
        for name, sql in self.VIEWS.items():
            sql = self.QUALIFY_FREE.get(name, sql)
            workload.check(name, defining_query(workload.project, sql), visible_columns(workload.project, name))


class TestRankedRefresh(QualifyFreeViews):
    VIEWS = VIEWS
    QUALIFY_FREE = QUALIFY_FREE

    @pytest.mark.parametrize("seed", [31])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)
        self.refreshed_by_partitions(workload)
        merged = 0  # refreshes of new rows alone: ranked among the view's, the master not read
        for kinds in (("insert",), ("delete",), ("update_key", "update"), ("insert",)):
            workload.round(10, kinds=kinds)
            merged += self.refreshed(workload).count("steps run: MERGE")
        assert merged >= 3, merged
        workload.delete_every_row("orders")
        self.refreshed(workload)
        assert rows(project, f"select count(*) from {project.test_schema}.latest_orders") == [(0,)]
        workload.round(12, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)


STACKED = {
    # dbt's staging pattern: the latest version of each order ...
    "stg_orders": (
        "with versions as (select o.*, row_number() over (partition by o.customer_id, o.status "
        "order by o.amount desc nulls last) as version from {{ source('shop', 'orders') }} o) "
        "select order_id, customer_id, status, amount from versions where version = 1"
    ),
    # ... joined again in a mart (a view over the view above, its change log captured)
    "customer_orders": (
        "select s.order_id, s.status, s.amount, c.customer_id, c.segment "
        "from {{ ref('stg_orders') }} s join {{ source('shop', 'customers') }} c on s.customer_id = c.customer_id"
    ),
}
STACKED_LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_stg_orders
        meta: {mv_log: {master: stg_orders, key: [order_id], capture: true}}
"""


class TestRankedStagingModel(ShopViews):
    VIEWS = STACKED

    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": f"{{{{ config({self.CONFIG}) }}}}\n" + sql for name, sql in STACKED.items()}
        files["sources.yml"] = Workload.sources_yml(self.MASTERS) + STACKED_LOGS
        return files

    def check_all(self, workload):
        schema = workload.project.test_schema
        for name, sql in STACKED.items():
            sql = defining_query(workload.project, sql.replace("{{ source('shop', 'orders') }}", SRC["orders"]))
            sql = sql.replace("{{ source('shop', 'customers') }}", f"{schema}.customers")
            sql = sql.replace("{{ ref('stg_orders') }}", f"{schema}.stg_orders")
            workload.check(name, sql, visible_columns(workload.project, name))

    @pytest.mark.parametrize("seed", [37])
    def test_a_mart_over_a_deduplicated_staging_model(self, project, seed):
        workload = self.built(project, seed)
        for round_number in range(2 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload)
            assert log.count("fast refresh:") == len(STACKED) or "nothing marked" in log, log
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: stg_orders}"])
        assert "ranked (the first row of each partition by versions.customer_id, versions.status by row_number" in log, log
        assert "ranked by the master's key (versions.order_id)" in log, log
