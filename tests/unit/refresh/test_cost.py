"""refresh_method='force''s cost model, without Spark: what each statement reads (table
references, their snapshots and the range filters Iceberg prunes files by), the two estimates,
the choice at both ends of the change sizes, and the calibration shipped as package data."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.views import aggregate_view, join_view
from dbt_incremental_mv.refresh.views.statement import WriteKind
from dbt_incremental_mv.refresh import cost
from dbt_incremental_mv.refresh.marked_log import MarkedLog

ORDERS = MasterTable(
    "shop.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "decimal(10,2)")), ("order_id",)
)
CUSTOMERS = MasterTable("shop.customers", (("customer_id", "bigint"), ("country", "string")), ("customer_id",))
MASTERS = {m.name: m for m in (ORDERS, CUSTOMERS)}
JOIN = (
    "select o.order_id, o.amount, c.country from shop.orders o join shop.customers c on o.customer_id = c.customer_id"
)
BY_COUNTRY = (
    "select c.country, count(*) as n, sum(o.amount) as amount from shop.orders o "
    "join shop.customers c on o.customer_id = c.customer_id group by c.country"
)
MIN_MAX = "select customer_id, count(*) as n, min(amount) as low, max(amount) as high from shop.orders group by customer_id"

MB = 1024**2
PRICES = cost.Calibration(
    seconds_per_statement=0.5, seconds_per_gb_read=20.0, seconds_per_gb_scanned=20.0, seconds_per_gb_written=20.0,
    seconds_per_million_changes=10.0, seconds_per_gb_captured=60.0, seconds_per_capture=1.0, fast_fixed_seconds=0.2,
    complete_fixed_seconds=0.2,
)


def marked(master: MasterTable, inserts: int = 0, deletes: int = 0, **fields) -> MarkedLog:
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    return dataclasses.replace(MarkedLog(spec, 11, 5, 9, inserts, deletes, 123), **fields)


class Sizes:
    """Table sizes (bytes, records) by relation; a range filter reads ``pruned`` of a table."""

    def __init__(self, sizes: dict[str, tuple[int, int]], pruned: dict[str, int] | None = None) -> None:
        self.sizes = sizes
        self.pruned = pruned or {}
        self.filters: list[tuple] = []

    def table_size(self, name, snapshot=None):
        return self.sizes.get(name)

    def scan_size(self, name, snapshot, range_filter):
        self.filters.append((name, snapshot, range_filter))
        return self.pruned.get(name)


SIZES = {
    "shop.orders": (1000 * MB, 10_000_000),
    "shop.customers": (50 * MB, 1_000_000),
    "shop.v": (800 * MB, 10_000_000),
    "logs.mlog_orders": (1 * MB, 10_000),
    "logs.mlog_customers": (1 * MB, 1_000),
}


def test_table_reads_name_each_table_reference_with_its_snapshot_and_its_pruning_ranges():
    view = analyze_view(JOIN, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, 3, 2, key_ranges=((10, 20),)),
        "shop.customers": marked(CUSTOMERS),
    }
    statement = join_view.refresh_statement(view, "shop.v", logs, {})
    delete, insert = (w.sql for w in statement.writes)
    # the DELETE reads the view (its write branch) within the marked keys' range, and the log
    images = ("or", (("range", "_mv_op", "I", "I"), ("range", "_mv_op", "D", "D")))  # an IN list is points
    assert cost.table_reads(delete, "shop.v") == [
        cost.TableRead("shop.v", None, ("range", "_mv_o_order_id", 10, 20)),
        cost.TableRead("logs.mlog_orders", 11, images),
    ]
    # the INSERT's target is written, not read; the changed master is read within the range,
    # the other one whole, both at the snapshot the refresh reflects
    reads = cost.table_reads(insert, "shop.v")
    assert cost.TableRead("shop.orders", 123, ("range", "order_id", 10, 20)) in reads
    assert cost.TableRead("shop.customers", 123, None) in reads
    assert all(r.relation != "shop.v" for r in reads)


def test_range_filters_combine_by_and_and_or_and_anything_else_prunes_nothing():
    import sqlglot

    def where(sql):
        return cost.range_filter(sqlglot.parse_one(f"select * from t where {sql}", read="spark").args["where"].this)

    assert where("a between 1 and 5") == ("range", "a", 1, 5)
    assert where("d between date '2024-01-01' and date '2024-02-01'") == (
        "range", "d", datetime.date(2024, 1, 1), datetime.date(2024, 2, 1)
    )
    assert where("s between 'a' and 'c' and x in (select 1)") == ("range", "s", "a", "c")
    assert where("(a between 1 and 5 and b in (select 1)) or (c between 2 and 3)") == (
        "or", (("range", "a", 1, 5), ("range", "c", 2, 3))
    )
    assert where("a between 1 and 5 or b in (select 1)") is None  # the right side may match any file
    assert where("a between b and 5") is None
    assert where("a = b") is None


def test_a_few_changes_in_a_big_view_are_fast_and_the_estimate_says_why():
    view = analyze_view(JOIN, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, 50, 50, key_ranges=((10, 20),)),
        "shop.customers": marked(CUSTOMERS),
    }
    statement = join_view.refresh_statement(view, "shop.v", logs, {})
    # the range prunes the view and the orders to a few files
    sizes = Sizes(SIZES, pruned={"shop.v": 8 * MB, "shop.orders": 10 * MB})
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, PRICES)
    complete = cost.estimate_complete([("shop.orders", 123), ("shop.customers", 123)], "shop.v", sizes, PRICES)
    assert fast.statements == 2 and fast.changes == 100
    # view 8 MB + log 1 MB (twice: DELETE and INSERT) + orders 10 MB + customers 50 MB
    assert fast.bytes_read == (8 + 1 + 1 + 10 + 50) * MB
    assert complete.bytes_read == 1050 * MB and complete.bytes_written == 800 * MB
    choice = cost.choose(fast, complete)
    assert choice.method == "fast"
    assert choice.why.startswith(f"estimated {fast.seconds:.1f} s fast vs {complete.seconds:.1f} s complete: ")
    # each statement takes the log's distinct keys; the DELETE's EXISTS, the INSERT's join
    assert [cost.statement_stages(w.sql) for w in statement.writes] == [2, 2] and fast.stages == 4
    assert "fast 2 statements (4 stages), reads 0.07 GB" in choice.why and "100 changes" in choice.why
    assert "complete 1 statement, reads 1.03 GB, writes 0.78 GB" in choice.why


def test_half_of_a_master_changed_is_recomputed():
    view = analyze_view(JOIN, MASTERS)
    logs = {"shop.orders": marked(ORDERS, 5_000_000, 5_000_000), "shop.customers": marked(CUSTOMERS)}
    statement = join_view.refresh_statement(view, "shop.v", logs, {})
    sizes = Sizes(SIZES)  # no range: every scan reads its whole table
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, PRICES)
    complete = cost.estimate_complete([("shop.orders", 123), ("shop.customers", 123)], "shop.v", sizes, PRICES)
    assert fast.changes == 10_000_000
    choice = cost.choose(fast, complete)
    assert choice.method == "complete"
    assert fast.largest_read == ("shop.orders", 1.0)  # read whole: no range bounds the changes
    assert "(100% of shop.orders)" in choice.why


def test_a_changed_dimension_makes_the_fast_refresh_read_the_fact_whole():
    view = analyze_view(BY_COUNTRY, MASTERS)
    logs = {"shop.orders": marked(ORDERS), "shop.customers": marked(CUSTOMERS, 10, 10)}
    statement = aggregate_view.refresh_statement(view, "shop.v", logs, {})
    sizes = Sizes({**SIZES, "shop.v": (1 * MB, 200)})
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, PRICES)
    assert fast.bytes_read >= SIZES["shop.orders"][0]  # the orders of the changed customers: a scan of orders


def test_a_min_max_view_with_deletes_is_priced_reading_its_master_where_it_recomputes_groups_as_a_rule():
    only_inserts = {"shop.orders": marked(ORDERS, 10, 0)}
    with_deletes = {"shop.orders": marked(ORDERS, 10, 10)}
    sizes = Sizes(SIZES)

    def read(sql, logs):
        return cost.estimate_fast(aggregate_view.refresh_statement(analyze_view(sql, MASTERS), "shop.v", logs, {}), "shop.v", logs, sizes, PRICES).bytes_read

    # a global MIN/MAX keeps no reserve: a removed extreme is recomputed from the master
    global_min_max = "select min(amount) as low, max(amount) as high from shop.orders"
    assert read(global_min_max, with_deletes) >= read(global_min_max, only_inserts) + SIZES["shop.orders"][0]
    # a grouped one recomputes a group only when its reserve runs out: in the INSERT's fallback, not priced
    assert read(MIN_MAX, with_deletes) < read(MIN_MAX, only_inserts) + SIZES["shop.orders"][0]


def test_without_a_size_in_the_metadata_force_stays_fast():
    view = analyze_view(JOIN, MASTERS)
    logs = {"shop.orders": marked(ORDERS, 5_000_000, 5_000_000), "shop.customers": marked(CUSTOMERS)}
    statement = join_view.refresh_statement(view, "shop.v", logs, {})
    sizes = Sizes({k: v for k, v in SIZES.items() if k != "shop.customers"})
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, PRICES)
    complete = cost.estimate_complete([("shop.orders", 123), ("shop.customers", 123)], "shop.v", sizes, PRICES)
    choice = cost.choose(fast, complete)
    assert choice.method == "fast"
    assert choice.why == "fast whenever possible: no size in the metadata of shop.customers"


def test_the_calibration_is_package_data_with_every_price():
    prices = cost.calibration()
    for field in dataclasses.fields(cost.Calibration):
        if field.name != "measured":
            assert getattr(prices, field.name) > 0, field.name
    assert prices.measured


@pytest.mark.parametrize("missing", ["seconds_per_statement", "seconds_per_gb_read"])
def test_a_calibration_without_a_price_is_refused(missing):
    import json

    document = {"prices": {f.name: 1.0 for f in dataclasses.fields(cost.Calibration) if f.name != "measured"}}
    del document["prices"][missing]
    with pytest.raises(KeyError):
        cost.Calibration.from_json(json.dumps(document))


def test_prices_of_your_own_come_from_the_file_the_environment_names(tmp_path, monkeypatch):
    import json

    package = cost.calibration()
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"prices": {**{k: 1.0 for k in (
        "seconds_per_statement", "seconds_per_gb_read", "seconds_per_gb_scanned", "seconds_per_gb_written", "seconds_per_million_changes",
        "seconds_per_gb_captured", "seconds_per_capture", "fast_fixed_seconds")}, "complete_fixed_seconds": 99.0}}))
    monkeypatch.setenv(cost.CALIBRATION_ENV, str(mine))
    assert cost.calibration().complete_fixed_seconds == 99.0
    monkeypatch.setenv(cost.CALIBRATION_ENV, str(tmp_path / "missing.json"))
    try:
        cost.calibration()
    except ValueError as exc:
        assert "DBT_INCREMENTAL_MV_CALIBRATION=" in str(exc) and "not a calibration file" in str(exc)
    else:
        raise AssertionError("a missing calibration file must be refused")
    monkeypatch.delenv(cost.CALIBRATION_ENV)
    assert cost.calibration() == package


GB = cost.GB


def test_a_capture_is_shared_by_the_views_that_read_its_log():
    """A log is captured once for every view of it: each view's fast estimate carries its share."""
    base = cost.Estimate("fast", 1.0, 2, 0, 0)
    alone = cost.with_capture(base, [(GB // 2, 1)], PRICES)
    shared = cost.with_capture(base, [(GB // 2, 4)], PRICES)
    capture = PRICES.seconds_per_statement + PRICES.seconds_per_capture + PRICES.seconds_per_gb_captured / 2
    assert alone.seconds == pytest.approx(1.0 + capture)
    assert shared.seconds == pytest.approx(1.0 + capture / 4)
    assert (shared.statements, shared.bytes_captured) == (3, GB // 2)
    assert "after a capture of 0.50 GB of changed master files" in shared.describe()


def test_a_statement_is_priced_by_the_stages_of_its_plan():
    """Joins (EXISTS too), grouped and DISTINCT selects, windows and unions: each a shuffle or a sort."""
    assert cost.statement_stages("select a from t") == 0
    assert cost.statement_stages("select a, count(*) from t join u on t.k = u.k group by a") == 2
    assert cost.statement_stages("select distinct a from t union all select a from u") == 2
    assert cost.statement_stages("select a, row_number() over (partition by b order by c) from t") == 1
    assert cost.statement_stages("delete from t where exists (select 1 from u where u.k = t.k)") == 1
    prices = dataclasses.replace(PRICES, seconds_per_stage=0.25)
    flat = cost.fast_seconds(prices, [0, 0], 0, 0, 0)
    assert cost.fast_seconds(prices, [3, 1], 0, 0, 0) == pytest.approx(flat + 4 * 0.25)


def test_a_complete_refresh_is_priced_by_its_joins_and_the_rankings_of_its_reserves():
    """A MIN/MAX view's rebuild ranks the fact's values twice (its reserves): several times the
    plain aggregate's price, which force must not take for the rebuild's."""
    assert cost.query_stages(analyze_view(JOIN, MASTERS)) == (1, 0)
    assert cost.query_stages(analyze_view(BY_COUNTRY, MASTERS)) == (2, 0)
    assert cost.query_stages(analyze_view(MIN_MAX, MASTERS)) == (1, 2)
    prices = dataclasses.replace(PRICES, seconds_per_gb_shuffled=5.0, seconds_per_gb_sorted=30.0)
    sizes = Sizes(SIZES)
    plain = cost.estimate_complete([("shop.orders", 123)], "shop.v", sizes, prices, (1, 0))
    ranked = cost.estimate_complete([("shop.orders", 123)], "shop.v", sizes, prices, (1, 2))
    read = SIZES["shop.orders"][0] / GB
    assert ranked.seconds == pytest.approx(plain.seconds + 2 * 30.0 * read)
    assert ranked.describe().startswith("1 statement (3 stages), reads 0.98 GB")


def test_a_calibration_file_of_an_earlier_version_prices_the_stages_at_nothing():
    import json

    earlier = {f.name: 1.0 for f in dataclasses.fields(cost.Calibration) if f.name != "measured"}
    for added in ("seconds_per_stage", "seconds_per_gb_shuffled", "seconds_per_gb_sorted", "seconds_per_gb_rebuilt"):
        del earlier[added]
    prices = cost.Calibration.from_json(json.dumps({"prices": earlier}))
    assert (prices.seconds_per_stage, prices.seconds_per_gb_shuffled, prices.seconds_per_gb_sorted) == (0, 0, 0)
    assert prices.seconds_per_statement == 1.0
    # the view written again is priced as any write
    rebuilt = dataclasses.replace(prices, seconds_per_gb_rebuilt=5.0)
    assert cost.complete_seconds(prices, 0, 0, 0, GB) == pytest.approx(cost.complete_seconds(prices, 0, 0, 0, 0) + 1.0)
    assert cost.complete_seconds(rebuilt, 0, 0, 0, GB) == pytest.approx(cost.complete_seconds(prices, 0, 0, 0, 0) + 5.0)


def test_a_ranked_view_reads_its_master_whole_to_recompute_the_partitions_touched():
    from dbt_incremental_mv.refresh.views import ranked_view

    view = analyze_view(
        "select * from (select o.*, row_number() over (partition by o.customer_id order by o.amount desc) as rn "
        "from shop.orders o) as latest where rn = 1",
        MASTERS,
    )
    logs = {"shop.orders": marked(ORDERS, 3, 2, key_values=((1,), (2,), (3,)), logged=("order_id", "customer_id"))}
    statement = ranked_view.refresh_statement(view, "shop.v", logs, {})
    fast = cost.estimate_fast(statement, "shop.v", logs, Sizes(SIZES), PRICES)
    complete = cost.estimate_complete([("shop.orders", 123)], "shop.v", Sizes(SIZES), PRICES, cost.query_stages(view))
    # the partitions' rows are found by a semi join: a scan of orders (and of the view to delete)
    assert SIZES["shop.orders"][0] <= fast.bytes_read
    assert fast.bytes_written < complete.bytes_written  # it rewrites the partitions touched, not the view


# ---------------------------------------------------------------- the compaction a fast refresh makes due


def _join_statement():
    view = analyze_view(JOIN, MASTERS)
    logs = {"shop.orders": marked(ORDERS, 50, 50, key_ranges=((10, 20),)), "shop.customers": marked(CUSTOMERS)}
    return join_view.refresh_statement(view, "shop.v", logs, {}), logs


def test_a_fast_refresh_adds_a_delete_file_per_data_file_its_deletes_plan_and_a_data_file_per_insert():
    from dbt_incremental_mv.layout import ViewFiles

    statement, _ = _join_statement()
    assert [w.kind for w in statement.writes] == ["delete", "insert"]
    # the DELETE's key range prunes the 800 MB view (40 files of 20 MB) to 50 MB: 3 files
    sizes = Sizes(SIZES, pruned={"shop.v": 50 * MB})
    now = ViewFiles(40, 2, 800 * MB)
    assert cost.files_after(now, statement, "shop.v", 2 * MB, sizes) == ViewFiles(41, 5, 802 * MB)
    # at most one per data file (Iceberg's file-granular deletes); at least one per DELETE
    assert cost.files_after(ViewFiles(40, 39, 800 * MB), statement, "shop.v", 0, Sizes(SIZES)).delete_files == 41
    assert cost.files_after(now, statement, "shop.v", 0, Sizes({})).delete_files == 3
    assert cost.files_after(dataclasses.replace(now, partitioned=True), statement, "shop.v", 0, sizes).partitioned
    # a write that replaces the view's rows leaves no delete file to compact
    overwrite = dataclasses.replace(statement, writes=(dataclasses.replace(statement.writes[0], kind=WriteKind.OVERWRITE),))
    assert cost.files_after(now, overwrite, "shop.v", 0, sizes) is None


def test_the_compaction_rewrites_the_data_files_with_deletes_and_the_small_ones():
    from dbt_incremental_mv.layout import ViewFiles

    statement, logs = _join_statement()
    sizes = Sizes(SIZES, pruned={"shop.v": 8 * MB, "shop.orders": 10 * MB})
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, PRICES)
    prices = dataclasses.replace(PRICES, seconds_per_gb_compacted=100.0)
    after = ViewFiles(40, 4, 800 * MB)  # 20 MB per file: not small; 4 of them with deletes
    compacted = cost.with_compaction(fast, statement, "shop.v", after, 2, sizes, prices)
    assert compacted.bytes_compacted == 4 * 20 * MB + fast.bytes_written
    assert compacted.seconds == pytest.approx(
        fast.seconds + 2 * 0.5 + 100.0 * compacted.bytes_compacted / cost.GB
    )
    assert compacted.compaction_statements == 2
    assert compacted.describe().endswith("then compacts the view (0.08 GB rewritten)")
    # files averaging under the small-file size are all rewritten
    small = cost.with_compaction(fast, statement, "shop.v", ViewFiles(400, 4, 800 * MB), 2, sizes, prices)
    assert small.bytes_compacted == 800 * MB
    # every file with deletes: the whole view, at most
    every = cost.with_compaction(fast, statement, "shop.v", ViewFiles(40, 40, 800 * MB), 2, sizes, prices)
    assert every.bytes_compacted == 800 * MB
    # its delete files merged (layout.compaction_kind): its statement, no data file rewritten
    from dbt_incremental_mv.layout import CompactionKind

    merged = cost.with_compaction(
        fast, statement, "shop.v", ViewFiles(4, 300, 800 * MB), 1, sizes, prices, CompactionKind.DELETE_FILES
    )
    assert merged.bytes_compacted == 0 and merged.seconds == pytest.approx(fast.seconds + 0.5)
    assert merged.describe().endswith("then merges the view's delete files")
    # without its own price, a compaction is priced as a rebuild's write
    rebuilt = dataclasses.replace(PRICES, seconds_per_gb_rebuilt=50.0)
    assert cost.with_compaction(fast, statement, "shop.v", after, 2, sizes, rebuilt).seconds == pytest.approx(
        fast.seconds + 1.0 + 50.0 * compacted.bytes_compacted / cost.GB
    )


def test_a_compaction_of_most_of_a_big_view_makes_force_recompute_it():
    from dbt_incremental_mv.layout import ViewFiles

    statement, logs = _join_statement()
    # the orders pruned to the changed keys, the view not: its DELETE plans it whole, as would the compaction
    sizes = Sizes(SIZES, pruned={"shop.orders": 10 * MB})
    prices = dataclasses.replace(PRICES, seconds_per_gb_compacted=40.0)
    fast = cost.estimate_fast(statement, "shop.v", logs, sizes, prices)
    complete = cost.estimate_complete([("shop.orders", 123), ("shop.customers", 123)], "shop.v", sizes, prices)
    assert cost.choose(fast, complete).method == "fast"
    compacted = cost.with_compaction(fast, statement, "shop.v", ViewFiles(40, 40, 800 * MB), 2, sizes, prices)
    choice = cost.choose(compacted, complete)
    assert choice.method == "complete"
    assert "then compacts the view (0.78 GB rewritten)" in choice.why
