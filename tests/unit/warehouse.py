"""A warehouse without Spark for the unit tests of a refresh: masters, their capture-managed logs
and one view (fake_iceberg.py stands in for the catalog and the SQL), refreshed as the
materialization does."""

from __future__ import annotations

from dbt_incremental_mv.refresh.engine import FastRefreshEngine, Refresh
from tests.unit.fake_iceberg import LOG_COLUMNS, FakeIceberg, statement_kinds


ORDERS = [("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "decimal(10,2)")]
CUSTOMERS = [("customer_id", "bigint"), ("name", "string"), ("country", "string")]

VIEWS = {
    "join": "select o.order_id, o.amount, c.customer_id, c.country from shop.orders o "
            "join shop.customers c on o.customer_id = c.customer_id",
    "outer_join": "select c.customer_id, c.name, o.order_id, o.amount from shop.customers c "
                  "left join shop.orders o on o.customer_id = c.customer_id",
    "aggregate": "select customer_id, count(*) as n, sum(amount) as total from shop.orders group by customer_id",
    # a join branch and an aggregate branch: their writes combined (one DELETE, one INSERT)
    "union_all": "select o.customer_id, o.amount from shop.orders o "
                 "union all select customer_id, sum(amount) from shop.orders group by customer_id",
}

# refused as one view, fast refreshed in two (analysis/states.py): the latest order of each customer,
# counted by amount
SPLIT_IN_TWO = (
    "with ranked as (select o.customer_id, o.order_id, o.amount, row_number() over "
    "(partition by o.customer_id order by o.order_id desc) as rn from shop.orders o), "
    "latest as (select customer_id, order_id, amount from ranked where rn = 1) "
    "select l.amount, count(*) as customers from latest l join shop.customers c "
    "on l.customer_id = c.customer_id group by l.amount"
)


def graph(view_sql: str) -> tuple[dict, dict]:
    sources = {}
    for name in ("orders", "customers"):
        sources[f"source.p.shop.{name}"] = {
            "resource_type": "source", "source_name": "shop", "name": name, "schema": "shop", "identifier": name,
        }
        key = "order_id" if name == "orders" else "customer_id"
        sources[f"source.p.change_logs.mlog_{name}"] = {
            "resource_type": "source", "source_name": "change_logs", "name": f"mlog_{name}", "schema": "shop",
            "identifier": f"mlog_{name}", "meta": {"mv_log": {"master": f"shop.{name}", "key": [key], "capture": True}},
        }
    masters = [m for m in ("orders", "customers") if f"shop.{m}" in view_sql]
    model = {
        "resource_type": "model", "name": "v", "schema": "shop", "alias": "v",
        "config": {"materialized": "fast_refresh"},
        "depends_on": {"nodes": [f"source.p.shop.{m}" for m in masters]},
    }
    return model, {"nodes": {"model.p.v": model}, "sources": sources}


class Warehouse:
    """Masters, their capture-managed logs and one view, refreshed as the materialization does."""

    def __init__(self, view_class: str) -> None:
        self.view_class = view_class
        self.sql = VIEWS[view_class]
        self.model, self.graph = graph(self.sql)
        self.fake = FakeIceberg()
        self.fake.table("shop.orders", ORDERS)
        self.fake.table("shop.customers", CUSTOMERS)
        for name, columns in (("orders", ORDERS), ("customers", CUSTOMERS)):
            log = self.fake.table(f"shop.mlog_{name}", columns + LOG_COLUMNS, {"format-version": "3"})
            master = self.fake.tables[f"shop.{name}"].refs["main"]
            self.fake.log_rows(log.name, "W", commit=master)
            self.fake.tables[log.name].properties["dbt_incremental_mv.capture"] = (
                f'{{"log": {log.refs["main"]}, "master": {master}}}'
            )

    def refresh(self) -> str:
        fake = self.fake
        engine = FastRefreshEngine(fake.query, fake.execute, fake.metadata())
        existing = "table" if "shop.v" in fake.tables else None
        run = engine.plan(self.model, self.sql, "shop.v", existing, False, self.graph)
        propagation = Refresh(engine, run).prepare()

        def create(query: str) -> str:  # the table made here: the fake catalog runs no DDL
            columns = [(c, "string") for c in run.plan.definition.stored_columns]
            fake.table("shop.v", columns, dict(run.plan.tblproperties))
            return f"create or replace table shop.v as {query}"

        engine.execute(run, propagation, engine.runner(run, fake.execute, create))
        line = engine.finish(run, propagation, self.graph, lambda name: name in fake.tables)
        self.last = (engine, run, propagation, line)  # what the refresh kept (its history row)
        return line

    def keep_own_log(self) -> None:
        """mv_log=true, with the view's log declared and in step with the built view."""
        fake, view = self.fake, self.fake.tables["shop.v"]
        log = fake.table("shop.mlog_v", fake.columns("shop.v") + LOG_COLUMNS, {"format-version": "3"})
        fake.log_rows(log.name, "W", commit=view.refs["main"])
        log.properties["dbt_incremental_mv.capture"] = f'{{"log": {log.refs["main"]}, "master": {view.refs["main"]}}}'
        self.model["config"]["mv_log"] = True
        self.graph["sources"]["source.p.model_logs.mlog_v"] = {
            "resource_type": "source", "source_name": "model_logs", "name": "mlog_v", "schema": "shop",
            "identifier": "mlog_v", "meta": {"mv_log": {"master": "v", "key": ["customer_id"]}},
        }

    def change(self, master: str) -> None:
        self.fake.commit(f"shop.{master}", "overwrite")

    def measured(self):
        self.fake.statements.clear()
        self.fake.settings.clear()
        self.fake.trace.clear()
        self.fake.commits.clear()
        line = self.refresh()
        return line, statement_kinds(self.fake.statements), list(self.fake.commits)
