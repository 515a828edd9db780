"""Four refresher processes and a writer on one catalog (issue 37, item 5).

Four separate dbt processes refresh overlapping selections of the example project's views
(every view class, a view over a view written at refresh time, change logs shared by several
views) in a loop through one Spark Thrift Server (one JVM, as on a cluster; refreshers in separate
JVMs are test_change_logs.py's TestRefreshersInSeparateProcesses), while a writer commits random single statements to the
masters (inserts, deletes, updates of keys, join keys, group keys and measures, NULLs).

Every refresh either publishes or fails cleanly naming the other refresh that won (no other
error, no Java stack trace), and is retried by the next pass of its loop. At the end of each
epoch the writer stops, the refreshers finish, one more refresh runs, and every view must equal
its defining query recomputed on the masters: a change applied twice, or a log row purged before
every view consumed it, shows there as a wrong row. A purge that lost a race leaves what every
view consumed to the next refresh with changes (a refresh with none runs no statement): after one
more insert into each master and one more refresh, uncontended, the logs hold nothing.

CI runs one epoch of ``DBT_MV_CONCURRENCY_SECONDS`` (default 60 s); by hand, for 30 minutes:
``DBT_MV_CONCURRENCY_SECONDS=1800 pytest -m thrift tests/functional/thrift/test_thrift_concurrency.py -s``
(epochs of ``DBT_MV_CONCURRENCY_EPOCH`` seconds, default 300; ``DBT_MV_CONCURRENCY_SUMMARY=<file>``
writes the summary table there).
"""

import os
import random
import re
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt
from pyhive import hive

from tests.functional.thrift.test_thrift_fast_refresh import MODELS, VIEWS, ExampleProject
from tests.functional.util import DBT, LOST_RACE, assert_views_match_queries, rows

pytestmark = pytest.mark.thrift

SECONDS = float(os.environ.get("DBT_MV_CONCURRENCY_SECONDS", "60"))
EPOCH = float(os.environ.get("DBT_MV_CONCURRENCY_EPOCH", "300"))
SEED = int(os.environ.get("DBT_MV_CONCURRENCY_SEED", "4"))
# overlapping selections: every view refreshed by two processes at least, the view over a view
# (repeat_customers... reads customer_orders' log) refreshed apart from its master view too
SELECTIONS = (
    VIEWS,
    ["customer_orders", "orders_by_country_status", "orders_per_country", "repeat_customers"],
    ["order_lines_with_products", "sales_by_product", "revenue_by_country", "orders_by_country_status"],
    VIEWS,
)


@dataclass
class Tally:
    """What the refresher processes said: views published and lost per view, anything else."""

    runs: int = 0
    published: Counter = field(default_factory=Counter)
    lost: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)  # of the published: nothing to apply
    unclean: list = field(default_factory=list)

    def read(self, output: str, selection: list[str]) -> None:
        self.runs += 1
        for view in selection:
            succeeded = re.search(rf"OK created sql fast_refresh model \S+\.{view}\b.*", output)
            if succeeded:
                self.published[view] += 1
                self.unchanged[view] += "NO CHANGES" in succeeded.group(0)
            elif re.search(rf"ERROR creating sql fast_refresh model \S+\.{view}\b", output):
                self.lost[view] += 1
        errors = len(re.findall(r"ERROR creating sql fast_refresh model", output))
        clean = (len(re.findall(r"Runtime Error in model", output)) == errors
                 and output.count(LOST_RACE) >= errors and "\tat org.apache" not in output)
        if not clean or (errors == 0 and "Completed successfully" not in output):
            self.unclean.append(_outcomes(output))

    def table(self, epochs: int, seconds: float, statements: int) -> str:
        lines = [f"{epochs} epoch(s) in {seconds:.0f} s: {statements} writer statements, {self.runs} refresher runs "
                 f"(dbt run of its selection), {len(self.unclean)} unclean failures; after each epoch every view "
                 "equal to its query and no log holding an unconsumed change", "",
                 "| view | refreshes that succeeded | of them with nothing to apply | lost to another refresh (retried) |",
                 "|---|---|---|---|"]
        lines += [f"| {view} | {self.published[view]} | {self.unchanged[view]} | {self.lost[view]} |" for view in VIEWS]
        return "\n".join(lines) + "\n"


def _outcomes(output: str) -> str:
    """What a process said of each view (its log lines and errors), for a failure's message."""
    wanted = re.compile(r"|".join(VIEWS) + r"|Error|error|committed while|refused|Done\.")
    return "\n".join(line for line in output.splitlines() if wanted.search(line))[-6000:]


# the masters' keys, as their change logs declare them
KEYS = {"customers": ("customer_id",), "products": ("product_id",), "orders": ("order_id",),
        "order_lines": ("order_id", "line_no")}


class Writer:
    """Random single-statement commits to the example's masters (each its own Iceberg commit),
    keeping the keys the change logs declare unique. It knows which keys exist, so it deletes
    and updates rows that are there, and inserts keys that are not."""

    def __init__(self, connection, schema: str, seed: int):
        self.cursor, self.s, self.random = connection.cursor(), schema, random.Random(seed)
        self.keys = {table: set(map(tuple, self.query(f"select {', '.join(key)} from {schema}.{table}")))
                     for table, key in KEYS.items()}
        self.next_id = 1000
        self.statements = 0

    def query(self, sql):
        self.cursor.execute(sql)
        return self.cursor.fetchall()

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def new_key(self, table) -> int:
        """A key ``table`` does not hold, from now on among its keys (a one-column key)."""
        key = self.new_id()
        self.keys[table].add((key,))
        return key

    def delete(self, table, key) -> str:
        self.keys[table].discard(key)
        return f"delete from {self.s}.{table} where {self.where(table, key)}"

    def where(self, table, key) -> str:
        return " and ".join(f"{column} = {value}" for column, value in zip(KEYS[table], key))

    def some(self, table):
        return self.random.choice(sorted(self.keys[table])) if self.keys[table] else None

    def ref(self, table):
        """A key of ``table`` that exists (mostly), one that does not, or NULL: a foreign key."""
        roll = self.random.random()
        existing = self.some(table)
        if roll < 0.75 and existing:
            return existing[0]
        return "null" if roll < 0.88 else self.random.randint(1, 9) + 900

    def statement(self) -> str:
        r, s = self.random, self.s
        table = r.choice(["orders", "orders", "order_lines", "order_lines", "customers", "products"])
        action = r.choice(["insert", "insert", "update", "update", "delete"]) if len(self.keys[table]) > 3 else "insert"
        status = r.choice(["'shipped'", "'open'", "'cancelled'", "null"])
        if table == "orders":
            if action == "insert":
                order = self.new_key("orders")
                return f"insert into {s}.orders values ({order}, {self.ref('customers')}, date'2026-03-{r.randint(1, 28):02d}', {status})"
            (order,) = self.some("orders")
            if action == "delete":
                return self.delete("orders", (order,))
            change = r.choice(["status", "customer", "key"])
            if change == "key":  # a key update: the order moves to a new key, its lines stay behind
                moved = self.new_id()
                self.keys["orders"] = (self.keys["orders"] - {(order,)}) | {(moved,)}
                return f"update {s}.orders set order_id = {moved} where order_id = {order}"
            value = f"status = {status}" if change == "status" else f"customer_id = {self.ref('customers')}"
            return f"update {s}.orders set {value} where order_id = {order}"
        if table == "order_lines":
            if action == "insert":
                order = self.ref("orders")
                order = order if order != "null" else self.new_id()
                line = r.randint(1, 9)
                if (order, line) in self.keys["order_lines"]:
                    return f"update {s}.order_lines set quantity = quantity + 1 where order_id = {order} and line_no = {line}"
                self.keys["order_lines"].add((order, line))
                price = r.choice(["null", f"{r.randint(1, 30000) / 100:.2f}"])
                return (f"insert into {s}.order_lines values ({order}, {line}, {self.ref('products')}, "
                        f"{r.choice(['null', r.randint(0, 5)])}, {price})")
            order, line = self.some("order_lines")
            if action == "delete":
                return self.delete("order_lines", (order, line))
            value = r.choice([f"product_id = {self.ref('products')}", f"quantity = {r.choice(['null', r.randint(0, 5)])}",
                              "unit_price = unit_price * 2"])
            return f"update {s}.order_lines set {value} where {self.where('order_lines', (order, line))}"
        if table == "customers":
            if action == "insert":
                customer = self.new_key("customers")
                return (f"insert into {s}.customers values ({customer}, 'C{customer}', "
                        f"{r.choice(['null', repr('UK'), repr('FR'), repr('US')])}, 'consumer')")
            (customer,) = self.some("customers")
            if action == "delete":
                return self.delete("customers", (customer,))
            return f"update {s}.customers set country = {r.choice(['null', repr('UK'), repr('DE')])} where customer_id = {customer}"
        if action == "insert":
            product = self.new_key("products")
            return f"insert into {s}.products values ({product}, 'P{product}', {r.choice(['null', repr('merch')])}, 1.00)"
        (product,) = self.some("products")
        if action == "delete":
            return self.delete("products", (product,))
        return f"update {s}.products set category = {r.choice(['null', repr('hardware'), repr('other')])} where product_id = {product}"

    def one_insert_per_master(self) -> None:
        """A new row in each master: the next ``dbt run`` refreshes (and purges for) every view."""
        order, customer, product = self.new_key("orders"), self.new_key("customers"), self.new_key("products")
        self.keys["order_lines"].add((order, 1))
        for sql in (f"insert into {self.s}.customers values ({customer}, 'C{customer}', 'UK', 'consumer')",
                    f"insert into {self.s}.orders values ({order}, {customer}, date'2026-03-01', 'open')",
                    f"insert into {self.s}.products values ({product}, 'P{product}', 'merch', 1.00)",
                    f"insert into {self.s}.order_lines values ({order}, 1, {product}, 1, 1.00)"):
            self.cursor.execute(sql)
            self.statements += 1

    def run(self, stop: threading.Event, errors: list) -> None:
        while not stop.is_set():
            sql = self.statement()
            try:
                self.cursor.execute(sql)
                self.statements += 1
            except Exception as error:  # noqa: BLE001 - reported by the test
                errors.append(f"{sql}: {error}")
                return


def refresher(command: list[str], selection: list[str], tally: Tally, stop: threading.Event) -> None:
    """``dbt run`` of ``selection`` again and again until ``stop``: a lost refresh is retried by
    the next pass."""
    while not stop.is_set():
        done = subprocess.run([*command, "--select", *selection], capture_output=True, text=True, timeout=900)
        tally.read(done.stdout + done.stderr, selection)


class TestFourRefreshersAndAWriter(ExampleProject):
    def test_every_refresh_publishes_or_fails_cleanly_and_the_views_stay_exact(self, project, profiles_root, thrift_server, tmp_path):
        run_dbt(["build"])
        writer = Writer(hive.connect(host=thrift_server.host, port=thrift_server.port), project.test_schema, SEED)
        tally, writer_errors, epochs = Tally(), [], max(1, round(SECONDS / EPOCH))
        started = time.time()
        for epoch in range(epochs):
            stop_writer, stop_refreshers = threading.Event(), threading.Event()
            threads = [threading.Thread(target=writer.run, args=(stop_writer, writer_errors))]
            for number, selection in enumerate(SELECTIONS):
                folder = tmp_path / f"refresher{number}"  # its own target (partial parse) and logs
                command = [DBT, "run", "--project-dir", str(project.project_root), "--profiles-dir", str(profiles_root),
                           "--target-path", str(folder / "target"), "--log-path", str(folder / "logs")]
                threads.append(threading.Thread(target=refresher, args=(command, selection, tally, stop_refreshers)))
            for thread in threads:
                thread.start()
            time.sleep(SECONDS / epochs)
            stop_writer.set()
            stop_refreshers.set()  # each finishes the refresh it is in
            for thread in threads:
                thread.join()
            assert not writer_errors, writer_errors
            assert not tally.unclean, "\n\n".join(tally.unclean[:3])

            run_dbt(["run"])  # picks up what the refreshes did not apply (the writer's last changes), once
            assert_views_match_queries(project, MODELS)
            # a purge that lost a race to a capture leaves what every view consumed to the next
            # refresh with changes (a refresh with none runs no statement): one more, uncontended
            writer.one_insert_per_master()
            run_dbt(["run"])
            assert_views_match_queries(project, MODELS)
            for log in ("mlog_orders", "mlog_customers", "mlog_order_lines", "mlog_products", "mlog_customer_orders"):
                pending = rows(project, f"select count(*) from {project.test_schema}.{log} where _mv_op in ('I', 'D')")
                assert pending == [(0,)], (epoch, log, pending)
        summary = tally.table(epochs, time.time() - started, writer.statements)
        print(summary)
        if os.environ.get("DBT_MV_CONCURRENCY_SUMMARY"):
            Path(os.environ["DBT_MV_CONCURRENCY_SUMMARY"]).write_text(summary)
        assert writer.statements >= 20 and all(tally.published[view] >= epochs for view in VIEWS), (writer.statements, tally)
        assert sum(tally.lost.values()) > 0 or SECONDS < 60, "no refresh ever lost: the refreshers never raced"
