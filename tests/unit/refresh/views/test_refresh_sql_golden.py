"""The SQL of every view class's refresh, for several shapes of marked changes, compared with the
committed text in ``golden/refresh_sql.txt``: a restructuring of the code must leave it unchanged
(issue 38). After a change meant to alter the SQL, rewrite the file with
``DBT_MV_UPDATE_GOLDEN=1 pytest tests/unit/refresh/views/test_refresh_sql_golden.py`` and review its diff."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.views import view_classes
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases.mark import netted_columns

GOLDEN = Path(__file__).parent / "golden" / "refresh_sql.txt"

ORDERS = MasterTable(
    "shop.orders",
    (("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "decimal(10,2)"), ("status", "string"), ("day", "date")),
    ("order_id",),
)
CUSTOMERS = MasterTable(
    "shop.customers", (("customer_id", "bigint"), ("name", "string"), ("region_id", "int"), ("manager_id", "bigint")),
    ("customer_id",),
)
REGIONS = MasterTable("shop.regions", (("region_id", "int"), ("region", "string")), ("region_id",))
MASTERS = {m.name: m for m in (ORDERS, CUSTOMERS, REGIONS)}

VIEWS = {
    "filter": "select o.order_id, o.amount * 2 as doubled from shop.orders o where o.status = 'open'",
    "join": "select o.order_id, o.amount, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
    "self_join": "select c.customer_id, m.name as manager from shop.customers c join shop.customers m "
                 "on c.manager_id = m.customer_id",
    "join3": "select o.order_id, c.name, r.region from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
             "join shop.regions r on c.region_id = r.region_id where o.amount > 10",
    "left_join": "select c.customer_id, c.name, o.order_id, o.amount from shop.customers c "
                 "left join shop.orders o on o.customer_id = c.customer_id",
    "outer_chain": "select r.region, c.name, o.order_id from shop.regions r left join shop.customers c "
                   "on c.region_id = r.region_id left join shop.orders o on o.customer_id = c.customer_id",
    "right_join": "select o.order_id, c.name from shop.orders o right join shop.customers c on o.customer_id = c.customer_id",
    "aggregate": "select customer_id, count(*) as n, count(status) as s, sum(amount) as total, avg(amount) as mean "
                 "from shop.orders group by customer_id",
    "global": "select count(*) as n, sum(amount) as total from shop.orders",
    "recomputed": "select customer_id, count(distinct status) as statuses, sum(amount) as total from shop.orders "
                  "group by customer_id",
    "min_max": "select customer_id, min(amount) as low, max(day) as last_day from shop.orders group by customer_id",
    "distinct": "select distinct status, customer_id from shop.orders",
    "having_join": "select c.region_id, sum(o.amount) as total from shop.orders o join shop.customers c "
                   "on o.customer_id = c.customer_id group by c.region_id having sum(o.amount) > 100",
    "outer_aggregate": "select c.customer_id, count(o.order_id) as orders, max(o.amount) as biggest from shop.customers c "
                       "left join shop.orders o on o.customer_id = c.customer_id group by c.customer_id",
    "union_all": "select o.customer_id, o.amount from shop.orders o where o.status = 'open' "
                 "union all select c.customer_id, sum(o.amount) from shop.orders o join shop.customers c "
                 "on o.customer_id = c.customer_id group by c.customer_id",
    "latest": "select * from (select o.*, row_number() over (partition by o.customer_id order by o.day desc) as rn "
              "from shop.orders o where o.status <> 'void') as latest where rn = 1",
    "top_ranked": "with r as (select order_id, amount, rank() over (partition by lower(status), day order by amount desc) as rk "
                  "from shop.orders) select order_id, amount from r where rk <= 2 and amount > 0",
    "windowed": "select order_id, customer_id, day, lead(day) over (partition by customer_id order by day) as next_day, "
                "sum(amount) over (partition by customer_id, status) as status_total from shop.orders where status <> 'void'",
    "windowed_filtered": "with h as (select order_id, status, day, lag(status) over (partition by customer_id order by day) as before "
                         "from shop.orders) select order_id, day from h where before is null or before <> status",
    "per_partition": "with latest as (select *, row_number() over (partition by customer_id, day order by amount desc) as rn "
                     "from shop.orders) select customer_id, count(*) as days, sum(amount) as top_amounts "
                     "from latest where rn = 1 group by customer_id",
}


def log(master: MasterTable, view, **fields) -> MarkedLog:
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    logged = tuple(c for c, _ in master.columns)
    base = MarkedLog(spec, 11, 5, 9, 0, 0, 123, logged=logged, netted_by=netted_columns(view, spec))
    return dataclasses.replace(base, **fields)


# name -> per master (by short name): the MarkedLog fields of its changes (absent: no change)
SHAPES = {
    "orders inserted, keys listed": {"orders": {"inserts": 3, "key_values": ((1,), (2,), (5,)),
                                                "insert_key_values": ((1,), (2,), (5,))}},
    "orders mixed, keys in ranges": {"orders": {"inserts": 40, "deletes": 30, "key_ranges": ((1, 900), (5000, 5999))}},
    "every master mixed, keys listed": {
        "orders": {"inserts": 2, "deletes": 1, "key_values": ((1,), (7,)), "insert_key_values": ((1,),)},
        "customers": {"inserts": 1, "deletes": 1, "key_values": ((3,),), "insert_key_values": ((3,),)},
        "regions": {"deletes": 1, "key_values": ((4,),), "insert_key_values": ()},
    },
    "customers updated, images netted": {"customers": {"inserts": 5, "deletes": 5, "skipped": 2, "key_ranges": ((1, 99),)}},
}


def rendered(name: str, shape: str, view_rows: int | None = None) -> str:
    view = analyze_view(VIEWS[name], MASTERS)
    changes = SHAPES[shape]
    marked = {}
    for master in MASTERS.values():
        fields = dict(changes.get(master.name.split(".")[1], {}))
        if fields.get("skipped"):
            fields["consolidated"] = netted_columns(view, LogSpec("logs", "x", master.name, master.name, master.key, True))
        marked[master.name] = log(master, view, **fields)
    statement = view_classes.refresh_statement(view, "shop.v", marked, {}, "mv_write_golden", view_rows)
    title = f"==== {name} | {shape}" + (f" | view_rows={view_rows}" if view_rows is not None else "")
    if statement is None:
        return f"{title}\n-- nothing to write\n"
    parts = [title, f"-- steps run: {', '.join(statement.steps_run)}", f"-- skipped: {', '.join(statement.steps_skipped)}"]
    parts += [f"-- cached {c.name}{' (lazily)' if c.lazy else ''}\n{c.sql}" for c in statement.cached]
    parts += [f"-- write {w.kind}\n{w.sql}" for w in statement.writes]
    for label, text in (("stats", statement.stats_sql), ("touched", statement.touched), ("deleted", statement.deleted)):
        if text is not None:
            parts.append(f"-- {label}\n{text}")
    return "\n".join(parts) + "\n"


def every_rendering() -> str:
    out = [rendered(name, shape) for name in VIEWS for shape in SHAPES]
    out += [rendered(name, "orders mixed, keys in ranges", view_rows=10) for name in ("aggregate", "min_max", "global")]
    return "\n".join(out)


def test_the_refresh_sql_of_every_view_class_is_unchanged():
    text = every_rendering()
    if os.environ.get("DBT_MV_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    expected = GOLDEN.read_text()
    if text != expected:  # name the first rendering that differs, not a 10,000-line diff
        found = text.split("\n==== ")
        wanted = expected.split("\n==== ")
        first = next((f.split("\n", 1)[0] for f, w in zip(found, wanted) if f != w), "the number of renderings")
        raise AssertionError(f"the refresh SQL changed, first at: {first} (DBT_MV_UPDATE_GOLDEN=1 rewrites it)")


def test_the_renderings_are_deterministic_and_cover_every_class():
    assert every_rendering() == every_rendering()
    classes = {analyze_view(sql, MASTERS).view_class for sql in VIEWS.values()}
    assert classes == set(view_classes.CLASSES)
