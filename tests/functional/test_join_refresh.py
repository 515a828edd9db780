"""Join-only fast refresh: single-table views, inner joins of 2 and 3 masters, a self-join."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_incremental_mv.refresh.views import join_view
from tests.functional.differential import Column, Master, Workload, keys_read_from_logs, randomized_rounds, soak_factor
from tests.functional.util import data_files_of_last_commit, rows

REGIONS = ["north", "south", None]
MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1009)), columns=[
        Column("name", "string", ["ada", "alan", "grace", None]),
        Column("region_id", "bigint", [1, 2, 3, None]),
        Column("referrer_id", "bigint", [1001, 1002, 1003, 1004, None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, 1005, 1006, None]),
        Column("amount", "decimal(10,2)", [1.5, 2.25, 10.0, None]),
        Column("status", "string", ["open", "shipped", "cancelled"]),
    ]),
    Master("regions", "region_id", key_pool=(1, 2, 3, 4), columns=[Column("region", "string", REGIONS)]),
]

VIEWS = {
    "open_orders": (
        "select o.order_id, o.customer_id, o.amount * 2 as double_amount, upper(o.status) as status "
        "from {{ source('shop', 'orders') }} o where o.status <> 'cancelled'",
        ["order_id", "customer_id", "double_amount", "status"],
    ),
    "order_customers": (
        "select o.order_id, o.amount, c.customer_id, c.name from {{ source('shop', 'orders') }} o "
        "join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id",
        ["order_id", "amount", "customer_id", "name"],
    ),
    "order_regions": (
        "select o.order_id, c.name, r.region from {{ source('shop', 'orders') }} o, "
        "{{ source('shop', 'customers') }} c, {{ source('shop', 'regions') }} r "
        "where o.customer_id = c.customer_id and c.region_id = r.region_id and o.status = 'shipped'",
        ["order_id", "name", "region"],
    ),
    "referrals": (
        "select c.customer_id, c.name, r.customer_id as referrer_id, r.name as referrer_name "
        "from {{ source('shop', 'customers') }} c join {{ source('shop', 'customers') }} r "
        "on c.referrer_id = r.customer_id",
        ["customer_id", "name", "referrer_id", "referrer_name"],
    ),
}


def one_view(name):
    """The models of a project of one of VIEWS, fast refreshed."""
    sql, _ = VIEWS[name]
    return {
        f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql,
        "sources.yml": Workload.sources_yml(MASTERS),
    }


def defining_query(project, sql):
    schema = project.test_schema
    for name in ("orders", "customers", "regions"):
        sql = sql.replace(f"{{{{ source('shop', '{name}') }}}}", f"{schema}.{name}")
    return sql


class TestJoinRefresh:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, (sql, _) in VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS)
        return files

    def check_all(self, workload):
        for name, (sql, columns) in VIEWS.items():
            workload.check(name, defining_query(workload.project, sql), columns)

    @pytest.mark.parametrize("seed", [11])
    def test_randomized_workload(self, project, seed, monkeypatch):
        # order_regions' INS steps folded into one query (regions, customers and orders changed),
        # here whatever the keys (when they are scattered: unit tests)
        folded = []
        fold = join_view._folded_query
        monkeypatch.setattr(join_view, "_folded_query", lambda *args: folded.append(args[4]) or fold(*args))
        monkeypatch.setattr(join_view, "_scattered", lambda log: True)
        # the other views' INS steps of one master read its changed rows from the log's after images
        from_images = []
        read_images = join_view.inserted_rows_from_log

        def inserted_rows(view, log, alias):
            found = read_images(view, log, alias)
            if found is not None:
                from_images.append(log.spec.master_relation.split(".")[-1])
            return found

        monkeypatch.setattr(join_view, "inserted_rows_from_log", inserted_rows)
        # the customers' and regions' updates patched in place (their rows read from the view:
        # below, and in random rounds whose changes of a master are all updates)
        patched = []
        patches_of = join_view._patches
        patch = join_view._patched_rows
        monkeypatch.setattr(join_view, "_patched_rows", lambda *args: patched.append(dict(args[5])) or patch(*args))
        # orders is an Iceberg v3 table (row lineage: its changed files' rows are told apart by
        # _row_id), customers and regions v2 (compared by value)
        masters = [replace(m, rows={}, properties=V3 if m.name == "orders" else ()) for m in MASTERS]
        workload = Workload(project, masters, seed)
        workload.create(initial_rows=10)
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        self.check_all(workload)

        results, log = run_dbt_and_capture(["run"])  # nothing changed: no capture, no mark, no write
        assert log.count("nothing marked (no master commit or log change since the last refresh); no write") == len(VIEWS), log
        self.check_all(workload)

        compared = set()
        for round_number in range(randomized_rounds(4)):
            # even rounds without patches (every changed customer re-joined: the fold above)
            monkeypatch.setattr(join_view, "_patches", patches_of if round_number % 2 else lambda view, marked: {})
            workload.alternating_round(round_number)
            with keys_read_from_logs(round_number % 2 == 1):  # and literal keys in the others
                results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            assert "fast refresh:" in log
            compared |= {how for how in ("told apart by row lineage", "compared by value") if f"rows {how}" in log}
            self.check_all(workload)
        assert compared == {"told apart by row lineage", "compared by value"}, compared
        assert "c" in folded, folded
        monkeypatch.setattr(join_view, "_patches", patches_of)
        assert {"orders", "customers"} <= set(from_images), from_images

        workload.round(4, kinds=("insert",))
        results, log = run_dbt_and_capture(["run"])
        assert "insert-only" in log and "skipped: DEL" in log
        self.check_all(workload)

        workload.round(3, masters=["orders"], kinds=("delete",))
        results, log = run_dbt_and_capture(["run"])
        assert "delete-only" in log
        self.check_all(workload)

        # customers renamed with their regions in one refresh: order_regions' rows holding both are
        # patched once, with the new customer and the new region
        schema = project.test_schema
        project.run_sql(f"update {schema}.customers set name = concat(coalesce(name, ''), '+') where region_id is not null")
        project.run_sql(f"update {schema}.regions set region = concat(coalesce(region, ''), '+')")
        # and a new customer whose key no data file of the orders spans: in no view row, no INS step
        project.run_sql(f"insert into {schema}.customers values (9001, 'new', 1, null)")
        patched.clear()
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert len(patched) == 2 and any({"c", "r"} <= set(patches) for patches in patched), patched
        [line] = [line for line in log.splitlines() if "order_customers: fast refresh:" in line]
        assert "steps run: DEL c, PATCH c;" in line, line
        self.check_all(workload)
        # a new customer alone: nothing to write, the view's position recorded; then an order of it
        project.run_sql(f"insert into {schema}.customers values (9002, 'newer', 2, null)")
        results, log = run_dbt_and_capture(["run"])
        [line] = [line for line in log.splitlines() if "order_customers: fast refresh:" in line]
        assert "nothing to apply" in line and "the view's position recorded" in line, line
        self.check_all(workload)
        project.run_sql(f"insert into {schema}.orders values (99001, 9002, 5.00, 'shipped')")
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        self.check_all(workload)

        # changes of rows outside a view's filters of their master (open_orders: status <>
        # 'cancelled', order_regions: status = 'shipped') are dropped before they are netted: no
        # DEL or INS step for them; order_customers, unfiltered, applies them
        orders = f"{project.test_schema}.orders"
        project.run_sql(f"update {orders} set status = 'cancelled' where order_id in (select min(order_id) from {orders})")
        run_dbt(["run"])
        self.check_all(workload)
        project.run_sql(f"update {orders} set amount = coalesce(amount, 0) + 1 where status = 'cancelled'")
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        outside = [line for line in log.splitlines() if "outside the view's filters" in line]
        assert len(outside) == 2, log
        # nothing to write: a commit of no rows records the view's position past those changes,
        # so that the purge below removes them
        assert all("nothing to apply (" in line and "the view's position recorded" in line for line in outside), log
        self.check_all(workload)
        _, explained = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: open_orders}"])
        assert "changes of rows failing `status` <> 'cancelled' before and after are dropped" in explained, explained
        _, explained = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: order_customers}"])
        patched_line = "its updates that keep a row in the view are written from the view's own rows (PATCH)"
        [customers] = [line for line in explained.splitlines() if "master shop.customers " in line]
        assert patched_line in customers and patched_line not in explained.replace(customers, ""), explained

        # every consumed change is purged: only the newest capture watermark stays in each log
        for master in ("orders", "customers", "regions"):
            ops = rows(project, f"select _mv_op from {project.test_schema}.mlog_{master}")
            assert ops == [("W",)], (master, ops)


V3 = (("format-version", "3"),)


def merge_on_read(format_version: int) -> tuple:
    """Row-level writes that add delete files (v2: position deletes; v3: deletion vectors)."""
    return (("format-version", str(format_version)), *(
        (f"write.{kind}.mode", "merge-on-read") for kind in ("delete", "update", "merge")
    ))


MOR_VIEWS = {name: VIEWS[name] for name in ("open_orders", "order_customers", "referrals")}


class TestMergeOnReadMasters:
    """Masters whose updates and deletes write delete files (Iceberg's changelog scan refuses
    them): captured by the data files that changed, deletion vectors (v3) and position deletes
    (v2), single-statement and batched rounds."""

    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, (sql, _) in MOR_VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS[:2])
        return files

    def test_randomized_workload(self, project):
        masters = [
            replace(MASTERS[0], rows={}, properties=merge_on_read(2)),
            replace(MASTERS[1], rows={}, properties=merge_on_read(3)),
        ]
        workload = Workload(project, masters, 23)
        workload.create(initial_rows=10)
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        for round_number in range(4):
            workload.alternating_round(round_number)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            assert "fast refresh:" in log
            # the delete files are read with the data files they apply to, not whole snapshots
            assert "files (" in log and "data file(s) read once" in log, log
            assert "diff (" not in log
            for name, (sql, columns) in MOR_VIEWS.items():
                workload.check(name, defining_query(project, sql), columns)
        deletes = rows(project, f"select count(*) from {project.test_schema}.orders.delete_files")
        assert deletes[0][0] > 0  # the masters really were written merge-on-read


class TestCompactionMergesDeleteFiles:
    """A refresh whose commit leaves the view due for compaction with many delete files over few data
    files merges them (layout.compaction_kind, unit-tested: here it is made to choose so, a view of
    a few rows never has many): Iceberg's rewrite of the position delete files run by the refresh
    after its publish leaves the view's rows as they were, and the next refreshes read through its
    commit."""

    @pytest.fixture(scope="class")
    def models(self):
        return one_view("open_orders")

    def test_delete_files_are_merged(self, project, monkeypatch):
        from dbt_incremental_mv import layout
        from dbt_incremental_mv.refresh.phases import compact

        monkeypatch.setattr(layout, "COMPACT_EXTRA_FILES", 1)  # due at one delete file or one data file more
        monkeypatch.setattr(layout, "COMPACT_EXTRA_PER_FILE", 0)
        monkeypatch.setattr(compact, "compaction_kind", lambda *args: layout.CompactionKind.DELETE_FILES)
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], 5)
        workload.create(initial_rows=20)
        sql, columns = VIEWS["open_orders"]
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        merges = []
        for round_number in range(3):
            workload.round(4, masters=["orders"], kinds=("delete", "update", "insert"))
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            workload.check("open_orders", defining_query(project, sql), columns)
            merges += [line for line in log.splitlines() if " delete files into " in line]
        assert len(merges) >= 2 and all("compacted" not in line for line in merges), merges
        snapshots = project.run_sql(f"select operation from {project.test_schema}.open_orders.snapshots", fetch="all")
        assert ("replace",) in [tuple(s) for s in snapshots], snapshots


class TestAJoinsInsertIsOneDataFile:
    """A join's INSERT reads the master it joins the changes to in a scan task per split (the
    changes broadcast to them), and wrote a data file per task holding a row: rebalanced, the
    rows of a small change are one data file (statement.rebalanced)."""

    @pytest.fixture(scope="class")
    def models(self):
        return one_view("order_customers")

    def test_new_customers_with_orders_in_many_files_are_one_file(self, project):
        schema = project.test_schema
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], 7)
        workload.create(initial_rows=0)
        # orders written by a statement each: a data file each, read in a scan task each (as a
        # large master's are: here a split is at most one file), of customers not there yet; the
        # larger side of the join (the changes are broadcast to it)
        for customer in range(1001, 1009):
            project.run_sql(
                f"insert into {schema}.orders select id, {customer}, cast(id % 100 as decimal(10,2)), 'open' "
                f"from range({customer * 1000}, {customer * 1000 + 500})"
            )
        project.run_sql(
            f"alter table {schema}.orders set tblproperties "
            "('read.split.target-size'='1', 'read.split.adaptive-size.enabled'='false')"
        )
        project.run_sql(f"insert into {schema}.customers values (1, 'first', 1, null)")
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        # the customers come: their orders are read from the facts (INS c), in eight tasks
        project.run_sql(
            f"insert into {schema}.customers values "
            + ", ".join(f"({customer}, 'c{customer}', 1, null)" for customer in range(1001, 1009))
        )
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        sql, columns = VIEWS["order_customers"]
        workload.check("order_customers", defining_query(project, sql), columns)
        assert rows(project, f"select count(*) from {schema}.order_customers") == [(4000,)]
        added = data_files_of_last_commit(project, f"{schema}.order_customers")
        assert added == [("append", "1")], added
