"""The mark step's probe (refresh/phases/mark.py, logs/sql.py key_probe): the view's net images, their
keys as literals, the ranges of the first key column; no Spark."""

from __future__ import annotations

import datetime
import json

import sqlglot

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.phases import mark

SPEC = LogSpec("logs", "logs.mlog_orders", "orders", "shop.orders", ("order_id",), True)


def test_the_probe_nets_images_by_the_columns_the_view_reads_in_one_read_of_the_log():
    probe = log_sql.KeyProbe(("order_id",), ("amount", "order_id"), literal_key=True, buckets=("integer", 1.0, 2.0))
    sql = log_sql.key_probe(SPEC, 7, 3, probe)
    parsed = sqlglot.parse_one(sql, read="spark")
    assert sum(1 for t in parsed.find_all(sqlglot.exp.Table) if t.name == "mlog_orders") == 1
    assert "group by `amount`, `order_id` having sum(" in sql  # an update of other columns cancels out
    assert "to_json(slice(collect_list(struct(`order_id` as `k0`, `i`)), 1, 201)) as marked_keys" in sql
    assert "cast(floor((cast(`order_id` as double) - cast('1.0' as double)) / cast('2.0' as double)) as int)" in sql
    # a log that lacks a column the view reads: each image counts, nothing nets out
    plain = log_sql.key_probe(SPEC, 7, 3, log_sql.KeyProbe(("order_id",)))
    assert "having" not in plain and "cast(null as string) as marked_keys" in plain
    sqlglot.parse_one(plain, read="spark")


def test_the_net_images_keep_the_raw_images_of_the_columns_that_changed():
    sql = log_sql.net_marked_changes(SPEC, 7, 3, 9, ["order_id"], ["amount", "order_id"])
    assert "explode(sequence(1, abs(`_mv_net`)))" in sql and "group by `amount`, `order_id`" in sql
    sqlglot.parse_one(sql, read="spark")


def test_few_keys_come_back_as_sorted_literals_with_whether_they_have_an_after_image():
    text = json.dumps([{"k0": 9, "k1": "b", "i": True}, {"k0": 2, "k1": None, "i": False}, {"k0": 2, "k1": "a", "i": True}])
    keys, inserted, patched = mark.marked_keys(text, ("bigint", "string"))
    assert keys == ((2, "a"), (2, None), (9, "b")) and inserted == ((2, "a"), (9, "b"))
    dates, _, _ = mark.marked_keys(json.dumps([{"k0": "2024-02-29", "i": False}]), ("date",))
    assert dates == ((datetime.date(2024, 2, 29),),)
    # more than Iceberg prunes by: not literals
    many = json.dumps([{"k0": i, "i": True} for i in range(log_sql.LITERAL_KEYS + 1)])
    assert mark.marked_keys(many, ("bigint",)) == (None, None, None)
    assert mark.marked_keys(None, ("bigint",)) == (None, None, None)


def test_occupied_buckets_become_disjoint_ranges_split_at_the_widest_gaps():
    # keys 1..1024 bucketed by 1: the oldest and the newest changed, two ranges
    buckets = ("integer", 1.0, 1.0)
    assert mark.key_ranges(json.dumps([0, 1, 2, 1020, 1021]), buckets) == ((1, 4), (1021, 1023))
    # more clusters than MAX_RANGES: merged across the narrowest gaps only
    spread = [i * 10 for i in range(mark.MAX_RANGES + 4)]
    ranges = mark.key_ranges(json.dumps(spread), buckets)
    assert len(ranges) == mark.MAX_RANGES
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(any(lo <= 1 + s <= hi for lo, hi in ranges) for s in spread)
    # dates are buckets of days
    days = ("date", float((datetime.date(2024, 1, 1) - mark.EPOCH).days), 1.0)
    assert mark.key_ranges("[0, 3]", days) == (
        (datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)), (datetime.date(2024, 1, 4), datetime.date(2024, 1, 5)),
    )
    assert mark.key_ranges(None, buckets) == () and mark.key_ranges("[]", buckets) == ()
    # each occupied bucket holds a distinct value at least
    assert mark.occupied_buckets(json.dumps([0, 1, 2, 1020, 1021, 2]), buckets) == 5
    assert mark.occupied_buckets(None, buckets) == 0 and mark.occupied_buckets("[1]", None) == 0


def test_the_view_counts_replace_the_logs_and_the_skipped_updates_are_counted():
    probe = log_sql.KeyProbe(("order_id",), ("amount", "order_id"), literal_key=True)
    stats = {"inserts": 10, "deletes": 10, "net_inserts": 4, "net_deletes": 6, "marked_keys": '[{"k0": 1, "i": true}]',
             "key_buckets": None}
    fields = mark.probed(stats, probe, ("bigint",))
    assert (fields["inserts"], fields["deletes"], fields["skipped"]) == (4, 6, 5)
    assert fields["consolidated"] == ("amount", "order_id") and fields["key_values"] == ((1,),)
    # nothing cancelled out: the raw images are the net ones, read as they are
    stats.update(net_inserts=10, net_deletes=10)
    assert mark.probed(stats, probe, ("bigint",))["consolidated"] is None
    # netted all the same: an INS step may read its rows from the after images (marked.py)
    assert mark.probed(stats, probe, ("bigint",))["netted_by"] == ("amount", "order_id")
    assert mark.probed(stats, None, ("bigint",)) == {}


def test_few_images_are_listed_by_the_counting_statement_and_netted_here():
    probe = log_sql.KeyProbe(("order_id",), ("amount", "order_id"), listed=True)
    sql = log_sql.log_stats(SPEC, 7, 3, listed=probe)
    assert "to_json(collect_list(struct(`_mv_op` as `o`, struct(`order_id` as `k0`) as `k`, struct(`amount` as `v0`, " \
        "`order_id` as `v1`) as `v`)) filter (where `_mv_op` in ('I', 'D') and `_last_updated_sequence_number` > 3)) as images" in sql
    assert sum(1 for t in sqlglot.parse_one(sql, read="spark").find_all(sqlglot.exp.Table)) == 1  # the same scan
    images = [
        {"o": "D", "k": {"k0": 1}, "v": {"v0": 5.0, "v1": 1}}, {"o": "I", "k": {"k0": 1}, "v": {"v0": 5.0, "v1": 1}},  # no change
        {"o": "D", "k": {"k0": 2}, "v": {"v0": 5.0, "v1": 2}}, {"o": "I", "k": {"k0": 2}, "v": {"v1": 2}},  # amount -> NULL
        {"o": "I", "k": {"k0": 9}, "v": {"v0": 1.5, "v1": 9}},  # new
        {"o": "D", "k": {"k0": 4}, "v": {"v0": 2.0, "v1": 4}},  # gone
    ]
    fields = mark.listed(json.dumps(images), probe, ("bigint",), raw=6)
    assert (fields["inserts"], fields["deletes"], fields["skipped"]) == (2, 2, 1)
    assert fields["key_values"] == ((2,), (4,), (9,)) and fields["insert_key_values"] == ((2,), (9,))
    assert fields["key_ranges"] == ((2, 2), (4, 4), (9, 9)) and fields["consolidated"] is None
    assert fields["key_range_values"] == 3  # the distinct values of the first key column
    # a log without the view's columns: every image counts, nothing is skipped
    plain = mark.listed(json.dumps([{k: v for k, v in i.items() if k != "v"} for i in images]),
                        log_sql.KeyProbe(("order_id",), listed=True), ("bigint",), raw=6)
    assert (plain["inserts"], plain["deletes"], plain["skipped"]) == (3, 3, 0)
    assert fields["netted_by"] == ("amount", "order_id") and plain["netted_by"] is None
    # a key inserted then updated: its first after image and the update's before image cancel, and
    # the view's expressions must not see that passing state (ANSI: a cast it could fail), so the
    # images are netted downstream although the keys are listed
    passing = images + [{"o": "I", "k": {"k0": 7}, "v": {"v0": 1.0, "v1": 7}}, {"o": "D", "k": {"k0": 7}, "v": {"v0": 1.0, "v1": 7}},
                        {"o": "I", "k": {"k0": 7}, "v": {"v0": 3.0, "v1": 7}}]
    fields = mark.listed(json.dumps(passing), probe, ("bigint",), raw=9)
    assert fields["key_values"] == ((2,), (4,), (7,), (9,)) and fields["consolidated"] == ("amount", "order_id")


def test_listed_images_are_compared_by_their_json_text_so_equal_nan_floats_and_structs_cancel():
    probe = log_sql.KeyProbe(("order_id",), ("score", "tags"), listed=True)
    # an update that changed no column the view reads, its values a NaN double and an array of structs
    text = ('[{"o": "D", "k": {"k0": 1}, "v": {"v0": NaN, "v1": [{"a": 1}]}},'
            ' {"o": "I", "k": {"k0": 1}, "v": {"v0": NaN, "v1": [{"a": 1}]}},'
            ' {"o": "D", "k": {"k0": 2}, "v": {"v0": 0.0, "v1": []}},'
            ' {"o": "I", "k": {"k0": 2}, "v": {"v0": -0.0, "v1": []}}]')
    fields = mark.listed(text, probe, ("bigint",), raw=4)
    # key 1 cancels out; key 2 changed (-0.0 is not 0.0 to the text, as before listing compared them)
    assert (fields["inserts"], fields["deletes"], fields["skipped"]) == (1, 1, 1)
    assert fields["key_values"] == ((2,),)


def test_exact_ranges_split_the_keys_at_their_widest_gaps():
    assert mark.exact_ranges([1, 2, 3, 1000, 1001, 5]) == ((1, 1), (2, 2), (3, 3), (5, 5), (1000, 1000), (1001, 1001))
    many = list(range(1, 40)) + list(range(10_000, 10_050)) + [500_000]
    ranges = mark.exact_ranges(many)
    assert len(ranges) <= mark.MAX_RANGES and ranges[-1] == (500_000, 500_000)
    assert all(any(lo <= v <= hi for lo, hi in ranges) for v in many)
    day = datetime.date(2024, 1, 1)
    assert mark.exact_ranges([day]) == ((day, day),) and mark.exact_ranges([]) == ()


def test_the_images_of_the_keys_left_are_read_whatever_columns_a_statement_wants():
    from dbt_incremental_mv.refresh.marked_log import MarkedLog

    log = MarkedLog(SPEC, 7, 3, 9, 2, 2, 123, skipped=1, key_values=((2,), (9,)), insert_key_values=((9,),))
    images = log.images(["amount"])
    assert images.startswith("select `amount`, `_mv_op` from (\nselect `amount`, `order_id`, `_mv_op` from `logs`.`mlog_orders`")
    assert images.endswith(") where `order_id` in (2, 9)")
    sqlglot.parse_one(images, read="spark")


def test_images_failing_the_views_filters_are_dropped_before_they_are_netted_listed_or_counted():
    relevant = "`status` = 'open'"
    netted = log_sql.KeyProbe(("order_id",), ("amount", "order_id", "status"), literal_key=True, relevant=relevant)
    sql = log_sql.key_probe(SPEC, 7, 3, netted)
    assert "and `_last_updated_sequence_number` > 3 and (`status` = 'open')\n)\ngroup by" in sql
    sqlglot.parse_one(sql, read="spark")
    listed = log_sql.KeyProbe(("order_id",), ("amount", "order_id", "status"), listed=True, relevant=relevant)
    stats = log_sql.log_stats(SPEC, 7, 3, listed=listed)
    assert "and `_last_updated_sequence_number` > 3 and (`status` = 'open'))) as images" in stats
    assert "count_if(`_mv_op` in ('I', 'D') and `_last_updated_sequence_number` > 3 and (`status` = 'open')) as relevant_images" in stats
    assert sum(1 for t in sqlglot.parse_one(stats, read="spark").find_all(sqlglot.exp.Table)) == 1  # the same scan
    assert "cast(null as bigint) as relevant_images" in log_sql.log_stats(SPEC, 7, 3)
    # 20 images, 12 of them kept: the 8 others are outside the view's filters, not skipped updates
    counts = {"inserts": 10, "deletes": 10, "relevant_images": 12, "net_inserts": 4, "net_deletes": 6,
              "marked_keys": None, "key_buckets": None}
    fields = mark.probed(counts, netted, ("bigint",))
    assert (fields["inserts"], fields["deletes"], fields["skipped"], fields["outside"]) == (4, 6, 1, 8)
    assert fields["relevant"] == relevant
    images = [{"o": "I", "k": {"k0": 9}, "v": {"v0": 1.5, "v1": 9, "v2": "open"}}]
    fields = mark.probed({"inserts": 2, "deletes": 1, "relevant_images": 1, "images": json.dumps(images)}, listed,
                         ("bigint",))
    assert (fields["inserts"], fields["deletes"], fields["skipped"], fields["outside"]) == (1, 0, 0, 2)
    assert fields["key_values"] == ((9,),) and fields["relevant"] == relevant


def test_every_read_of_the_marked_images_applies_the_views_filters():
    from dbt_incremental_mv.refresh.marked_log import MarkedLog

    kept = "and (`status` = 'open')"
    plain = MarkedLog(SPEC, 7, 3, 9, 2, 2, 123, relevant="`status` = 'open'", netted_by=("order_id", "status"))
    netted = MarkedLog(SPEC, 7, 3, 9, 2, 2, 123, relevant="`status` = 'open'", consolidated=("order_id", "status"))
    listed = MarkedLog(SPEC, 7, 3, 9, 2, 2, 123, relevant="`status` = 'open'", skipped=1, key_values=((2,),))
    for sql in (plain.images(["order_id"]), netted.images(["order_id"]), listed.images(["order_id"]),
                plain.inserted_rows({}), plain.changed_keys("inserts")):
        assert kept in sql, sql
        sqlglot.parse_one(sql, read="spark")


def test_the_updates_a_view_patches_in_place_are_told_by_their_images():
    # patch_by: the view patches the master's updates (analysis/patching.py); `region` is a join
    # column outside the key: an update's two images must agree on it
    probe = log_sql.KeyProbe(("order_id",), ("amount", "order_id", "region"), listed=True, patch_by=("region",))
    images = [
        {"o": "D", "k": {"k0": 1}, "v": {"v0": 5.0, "v1": 1, "v2": "n"}},
        {"o": "I", "k": {"k0": 1}, "v": {"v0": 6.0, "v1": 1, "v2": "n"}},  # patched: amount changed
        {"o": "D", "k": {"k0": 2}, "v": {"v0": 5.0, "v1": 2, "v2": "n"}},
        {"o": "I", "k": {"k0": 2}, "v": {"v0": 5.0, "v1": 2, "v2": "s"}},  # joins another row now
        {"o": "I", "k": {"k0": 3}, "v": {"v0": 1.0, "v1": 3, "v2": "n"}},  # new: its partners are not in the view
        {"o": "D", "k": {"k0": 4}, "v": {"v0": 1.0, "v1": 4, "v2": "n"}},  # gone
        # updated twice: netted to its first before and last after image
        {"o": "D", "k": {"k0": 5}, "v": {"v0": 1.0, "v1": 5, "v2": "n"}},
        {"o": "I", "k": {"k0": 5}, "v": {"v0": 2.0, "v1": 5, "v2": "n"}},
        {"o": "D", "k": {"k0": 5}, "v": {"v0": 2.0, "v1": 5, "v2": "n"}},
        {"o": "I", "k": {"k0": 5}, "v": {"v0": 3.0, "v1": 5, "v2": "n"}},
    ]
    fields = mark.listed(json.dumps(images), probe, ("bigint",), raw=len(images))
    assert fields["insert_key_values"] == ((1,), (2,), (3,), (5,))
    assert fields["patch_key_values"] == ((1,), (5,))
    # a view that patches none of them: not known, not empty
    assert mark.listed(json.dumps(images), log_sql.KeyProbe(("order_id",), ("amount", "order_id", "region"), listed=True),
                       ("bigint",), raw=len(images))["patch_key_values"] is None
    # read in SQL: each listed key says whether it is one
    sql = log_sql.key_probe(SPEC, 7, 3, log_sql.KeyProbe(("order_id",), ("amount", "order_id", "region"), literal_key=True,
                                                         patch_by=("region",)))
    assert ("(sum(greatest(`_mv_net`, 0)) = 1 and sum(greatest(-`_mv_net`, 0)) = 1 and "
            "size(collect_set(struct(`region`))) = 1) as `p`") in sql
    assert "struct(`order_id` as `k0`, `i`, `p`)" in sql
    sqlglot.parse_one(sql, read="spark")
    keys, inserted, patched = mark.marked_keys(json.dumps([{"k0": 1, "i": True, "p": True}, {"k0": 3, "i": True, "p": False}]),
                                               ("bigint",))
    assert inserted == ((1,), (3,)) and patched == ((1,),)


def test_a_master_is_patched_only_where_its_images_were_tested_by_its_filters():
    from dbt_incremental_mv.analysis import analyze_view
    from tests.unit.analysis.conftest import MASTERS

    sql = ("select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
           "join shop.countries k on k.country = c.country")
    view = analyze_view(sql, MASTERS)
    customers = LogSpec("logs", "logs.mlog_customers", "customers", "shop.customers", ("customer_id",), True)
    read = ("country", "customer_id", "name")
    assert mark.patched_by(view, customers, read, None) == ("country",)
    # the join column is compared between the images: only when they are netted by the view's columns
    assert mark.patched_by(view, customers, None, None) is None
    # a filter of the customers: their images must have been tested by it (the log's `relevant`)
    filtered = analyze_view(sql + " where c.segment = 'B'", MASTERS)
    assert mark.patched_by(filtered, customers, (*read, "segment"), None) is None
    assert mark.patched_by(filtered, customers, (*read, "segment"), "`segment` = 'B'") == ("country",)


def test_new_keys_no_file_of_the_fact_can_hold_are_in_no_view_row():
    from types import SimpleNamespace

    from dbt_incremental_mv.analysis import analyze_view
    from dbt_incremental_mv.refresh.marked_log import MarkedLog
    from tests.unit.analysis.conftest import MASTERS

    view = analyze_view("select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
                        MASTERS)
    customers = LogSpec("logs", "logs.mlog_customers", "customers", "shop.customers", ("customer_id",), True)
    orders = LogSpec("logs", "logs.mlog_orders", "orders", "shop.orders", ("order_id",), True)
    logs = {
        "shop.customers": MarkedLog(customers, 1, 0, 5, 3, 1, 40, insert_key_values=((7,), (8,), (9,)),
                                    patch_key_values=((7,),)),
        "shop.orders": MarkedLog(orders, 1, 0, 5, 0, 0, 41),
    }
    asked = []

    def scan_size(name, snapshot, range_filter):
        asked.append((name, snapshot, range_filter))
        return held

    ctx = SimpleNamespace(metadata=SimpleNamespace(scan_size=scan_size))
    plan = SimpleNamespace(definition=view)
    held = 0  # no data file of the orders spans customers 8 and 9
    found = mark.with_unreferenced_keys(ctx, plan, logs)
    assert asked == [("shop.orders", 41, ("or", (("range", "customer_id", 8, 8), ("range", "customer_id", 9, 9))))]
    assert found["shop.customers"].unreferenced_key_values == ((8,), (9,)) and found["shop.customers"].inserts_patched
    held = 1024  # some file may hold one: their rows are found in the orders
    assert mark.with_unreferenced_keys(ctx, plan, logs)["shop.customers"].unreferenced_key_values == ()
    # over SQL (no scan plan): not known
    held = None
    assert not mark.with_unreferenced_keys(ctx, plan, logs)["shop.customers"].inserts_patched
    # the orders have no snapshot: not asked
    asked.clear()
    logs["shop.orders"] = MarkedLog(orders, 1, 0, 5, 0, 0, -1)
    assert not mark.with_unreferenced_keys(ctx, plan, logs)["shop.customers"].inserts_patched and not asked
