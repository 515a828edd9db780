"""A model refused as one view, and its query split as the refusal says (analysis/states.py): the CTE
it names a fast_refresh model of its own with mv_log=true, that model's log declared with the key
the advice gives, the rest of the query reading it with ref(). The stack is fast refreshed, level by
level, and its top equals the original query recomputed on the masters, under randomized changes."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.functional.differential import Workload, soak_factor
from tests.functional.test_aggregate_refresh import MASTERS, visible_columns

ORDERS, CUSTOMERS = "{{ source('shop', 'orders') }}", "{{ source('shop', 'customers') }}"
# the latest order of each customer (ties cannot happen: ordered by the key), counted by amount and region
LATEST = (
    "with ranked as (select o.customer_id, o.order_id, o.amount, row_number() over "
    f"(partition by o.customer_id order by o.order_id desc) as rn from {ORDERS} o) "
    "select customer_id, order_id, amount from ranked where rn = 1"
)
COUNTED = (
    "select l.amount, c.region_id, count(*) as customers from LATEST l join "
    f"{CUSTOMERS} c on l.customer_id = c.customer_id group by l.amount, c.region_id"
)
WHOLE = LATEST.replace(" select customer_id", ", latest as (select customer_id") + ") " + COUNTED.replace("LATEST", "latest")
ADVICE = (
    "It can be fast refreshed in 2 steps: make the CTE latest (a ranked view, key customer_id, with the CTE ranked it reads) "
    "a fast_refresh model of its own with mv_log=true"
)
MODELS = {
    "whole": "{{ config(materialized='fast_refresh') }}\n" + WHOLE,
    "latest": "{{ config(materialized='fast_refresh', refresh_method='fast', mv_log=true) }}\n" + LATEST,
    "latest_amounts": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
    + COUNTED.replace("LATEST", "{{ ref('latest') }}"),
}
LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_latest
        meta: {mv_log: {master: latest, key: [customer_id]}}
"""


class TestAQuerySplitAsItsRefusalSays:
    @pytest.fixture(scope="class")
    def models(self):
        return {**{f"{name}.sql": sql for name, sql in MODELS.items()}, "sources.yml": Workload.sources_yml(MASTERS[:2]) + LOGS}

    def check(self, workload):
        schema = workload.project.test_schema
        query = WHOLE.replace(ORDERS, f"{schema}.orders").replace(CUSTOMERS, f"{schema}.customers")
        for view in ("whole", "latest_amounts"):
            workload.check(view, query, visible_columns(workload.project, view))

    @pytest.mark.parametrize("seed", [41])
    def test_the_split_stack_is_fast_refreshed_and_equals_the_query(self, project, seed):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS[:2]], seed)
        workload.create(initial_rows=10)
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        self.check(workload)
        for round_number in range(2 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            # the model as written is recomputed, and its refusal names the split the other two follow
            assert "whole: complete (fast refresh impossible: cannot fast refresh: " in log and ADVICE in log, log
            assert "latest: fast refresh:" in log and "latest_amounts: fast refresh:" in log, log
            self.check(workload)
