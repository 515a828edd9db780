"""The aggregate refresh statement, generated without Spark: shape, determinism, step skipping."""

import dataclasses

import pytest
import sqlglot

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.analysis.render import render_select
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.views import aggregate_view, outer_aggregate, view_classes
from dbt_incremental_mv.refresh.views.statement import WriteKind
from dbt_incremental_mv.refresh.marked_log import MarkedLog

LINES = MasterTable(
    "shop.lines",
    (("line_id", "bigint"), ("order_id", "bigint"), ("product_id", "bigint"), ("qty", "int"), ("price", "decimal(10,2)")),
    ("line_id",),
)
ORDERS = MasterTable("shop.orders", (("order_id", "bigint"), ("status", "string"), ("day", "date")), ("order_id",))
MASTERS = {m.name: m for m in (LINES, ORDERS)}

BY_PRODUCT = (
    "select product_id, count(*) as n, count(qty) as n_qty, sum(qty * price) as revenue, avg(price) as avg_price, "
    "min(qty) as min_qty, max(price) as max_price from shop.lines group by product_id"
)
BY_STATUS = (
    "select o.status, count(*) as n, sum(l.qty) as qty, max(o.day) as last_day "
    "from shop.orders o join shop.lines l on l.order_id = o.order_id where l.qty > 0 group by o.status"
)
GLOBAL = "select count(*) as n, sum(qty) as qty from shop.lines"


def marked(master, inserts=0, deletes=0):
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    return MarkedLog(spec, 11, 5, 9, inserts, deletes, 123)


def statement(sql, **changes):
    view = analyze_view(sql, MASTERS)
    logs = {name: marked(MASTERS[name], *changes.get(name, (0, 0))) for name in {o.master.name for o in view.occurrences}}
    return aggregate_view.refresh_statement(view, "shop.v", logs, {"n": "bigint", "avg_price": "decimal(14,6)"})


def delta_of(cached_sql: str) -> str:
    """The delta in the cached statement (which joins each of its groups with its stored row)."""
    return cached_sql.split("from (\n", 1)[1].split("\n) as `_mv_d`\nleft join (", 1)[0]


def test_nothing_marked_means_no_statement():
    assert statement(BY_PRODUCT) is None


def test_delete_of_the_changed_groups_then_insert_of_their_new_rows_deterministic_and_parseable():
    first = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    second = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    assert first.sql == second.sql
    delete, insert = first.writes
    assert isinstance(sqlglot.parse_one(delete.sql, read="spark"), sqlglot.exp.Delete)
    assert isinstance(sqlglot.parse_one(insert.sql, read="spark"), sqlglot.exp.Insert)
    # both go to the write branch; the second one is staged on it and published
    assert first.branch == "mv_write"
    assert delete.sql.startswith("delete from `shop`.`v`.`branch_mv_write` as `_mv_v`\nwhere (exists (select /*+ BROADCAST */ 1")
    assert delete.sql.endswith("\nand exists (select 1 from values (1))")  # never a metadata-only delete: it would not be staged
    assert insert.sql.startswith("insert into `shop`.`v`.`branch_mv_write` (")
    # groups are matched null-safely; the delta is broadcast wherever it filters the view
    assert delete.sql.endswith("as `_mv_k` where `_mv_k`.`product_id` <=> `_mv_v`.`product_id`))\nand exists (select 1 from values (1))")
    # the cached delta carries each group's stored row: the view read once, through a semi join
    # with the delta's groups broadcast (a join, not an EXISTS, so that Spark finds the cache):
    # the group keys of the delta's rows, not the delta again with its aggregations and reserves
    (cached,) = first.cached
    assert "select `_mv_d`.*, struct(`_mv_v`.*) as `_mv_t` from (\n" in cached.sql
    assert ("left join (\nselect `_mv_v`.* from `shop`.`v` as `_mv_v`\nleft semi join (select /*+ BROADCAST */ * from (\n"
            "select distinct `product_id` from (\n" in cached.sql
            ) and "as `_mv_v` on `_mv_d`.`product_id` <=> `_mv_v`.`product_id`\n) as `_mv_c`" in cached.sql
    # the log read by the delta (its sums, one read per MIN/MAX reserve) and once for the keys
    assert cached.sql.count("FROM `logs`.`mlog_lines`") == 1 + len(analyze_view(BY_PRODUCT, MASTERS).reserves) + 1
    # each MIN/MAX reserve is merged once per group, where the delta is cached: the writes read it
    assert "select `_mv_c`.*, slice(array_sort(" in cached.sql and cached.sql.count("map_zip_with(") == 2  # min_qty, max_price
    assert "map_zip_with(" not in insert.sql and "try_element_at(`_mv_s`.`_mv_nr_max_price`, 1).`v`" in insert.sql
    assert "`shop`.`v`" not in insert.sql.split("insert into", 1)[1].split("\n", 1)[1]  # the INSERT reads the cache only
    # a group whose rows all went is not inserted again
    assert insert.sql.endswith("\nwhere `_mv_s`.`_mv_n__mv_count` > 0\n) as `_mv_rebalanced`")
    # its rows come from the cached delta, which keeps the partitions of the shuffle that made it
    # (spark.sql.shuffle.partitions, a file each): rebalanced, the files follow the bytes written,
    # in each form of the INSERT
    for sql in (insert.sql, insert.fallback.sql):
        assert sql.split("\n", 2)[1] == "select /*+ REBALANCE */ * from (", sql
    # a group whose reserve ran out is rare: the INSERT runs without the recompute, a flagged group
    # stops it, and its fallback (the INSERT with the recompute) runs instead
    assert "select case when `_mv_s`.`_mv_flag` then raise_error('dbt-incremental-mv: " in insert.sql
    assert "`_mv_recompute`" not in insert.sql and insert.lean is None
    assert insert.fallback is not None and "`_mv_recompute` as (" in insert.fallback.sql
    assert insert.fallback.sql.endswith("else `_mv_s`.`_mv_n__mv_count` end > 0\n) as `_mv_rebalanced`")
    # the new counts and sums computed once per group where the delta is cached, read by name (an
    # average reads them many times), and whether the group is recomputed: the INSERT reads columns
    assert (
        "(coalesce(`_mv_d`.`_mv_t`.`_mv_count`, 0) + coalesce(`_mv_d`.`_mv_d__mv_count`, 0)) as `_mv_n__mv_count`"
    ) in cached.sql and "as `_mv_flag` from (\nselect `_mv_d`.*, (coalesce(" in cached.sql
    assert "coalesce(`_mv_d`.`_mv_t`.`_mv_count`, 0)" not in insert.sql
    # AVG is stored in its own type, from the hidden sum and count
    assert "as decimal(14,6)) as `avg_price`" in insert.sql
    assert "merge into" not in first.sql  # Spark takes no join hint in a MERGE


def test_single_master_reads_only_its_log():
    delta = delta_of(statement(BY_PRODUCT, **{"shop.lines": (3, 0)}).cached[0].sql)
    assert "`logs`.`mlog_lines` VERSION AS OF 11" in delta
    assert "`shop`.`lines`" not in delta


def test_insert_only_never_recomputes_min_max():
    insert_only = statement(BY_PRODUCT, **{"shop.lines": (3, 0)})
    assert "`_mv_recompute` as (" not in insert_only.sql
    assert "MIN/MAX recompute (insert-only)" in insert_only.steps_skipped
    # the new extreme is the first value of the reserve the delta's values are merged into
    assert "try_element_at(`_mv_s`.`_mv_nr_min_qty`, 1).`v`" in insert_only.sql
    assert "as `_mv_nr_min_qty`" in insert_only.cached[0].sql
    mixed = statement(BY_PRODUCT, **{"shop.lines": (3, 2)})
    recomputing = mixed.writes[1].fallback.sql  # (the INSERT's fallback: a reserve rarely runs out)
    assert "`_mv_recompute` as (" in recomputing and "`_mv_recompute` as (" not in mixed.sql
    assert "MIN/MAX from the reserves, recompute of groups whose reserve ran out" in mixed.steps_run
    # only groups whose reserve ran out while they still have values are recomputed
    flagged = recomputing.split("`_mv_flagged` as (", 1)[1].split("`_mv_recompute` as (", 1)[0]
    assert flagged == "\nselect `_mv_d`.`product_id` as `_mv_g0` from `_mv_delta` as `_mv_d`\nwhere `_mv_d`.`_mv_flag`\n), "
    flag = mixed.cached[-1].sql.split(" as `_mv_flag` from (", 1)[0]
    assert flag == (
        "select `_mv_d`.*, coalesce((size(`_mv_d`.`_mv_nr_min_qty`) = 0 and (coalesce(`_mv_d`.`_mv_t`.`_mv_cnt_min_qty`, 0) + "
        "coalesce(`_mv_d`.`_mv_d__mv_cnt_min_qty`, 0)) > 0) or (size(`_mv_d`.`_mv_nr_max_price`) = 0 and "
        "(coalesce(`_mv_d`.`_mv_t`.`_mv_cnt_avg_price`, 0) + coalesce(`_mv_d`.`_mv_d__mv_cnt_avg_price`, 0)) > 0), false)"
    )
    # recomputed from the flagged groups' rows only (a semi join below the ranking and the aggregation)
    recompute = recomputing.split("`_mv_recompute` as (", 1)[1]
    assert (
        "WHERE EXISTS(SELECT 1 FROM `_mv_flagged` AS `_mv_f` WHERE `_mv_f`.`_mv_g0` IS NOT DISTINCT FROM "
        "(`lines`.`product_id`))) AS `_mv_w` GROUP BY `_mv_w`.`_mv_c"
    ) in recompute


def test_an_insert_that_may_recompute_runs_without_the_recompute_when_no_group_is_flagged():
    # groups flagged often (HAVING: every changed group the view does not hold): counted first
    having = statement(BY_PRODUCT_HAVING, **{"shop.lines": (3, 2)})
    insert = having.writes[-1]
    assert "`_mv_recompute` as (" in insert.sql and insert.fallback is None
    # the count of flagged groups reads a column of the cached delta only: no master, no log, no view
    lean = insert.lean
    assert lean.needed == "select count_if(`_mv_flag`) from `mv_write_delta`"
    assert lean.omits == "its recompute of flagged groups"
    assert having.cached[-1].name == "mv_write_delta" and "as `_mv_flag` from (" in having.cached[-1].sql
    # the lean form: the same INSERT without the recompute (no master read, nothing recomputed)
    assert "`_mv_recompute`" not in lean.sql and "`_mv_flagged`" not in lean.sql and "VERSION AS OF" not in lean.sql
    assert lean.sql.split("\n", 1)[0] == insert.sql.split("\n", 1)[0]  # into the same columns
    assert "raise_error" not in lean.sql
    assert "\nselect /*+ REBALANCE */ * from (\n" in lean.sql and "\nselect /*+ REBALANCE */ * from (\n" in insert.sql
    # flagged rarely (a MIN/MAX reserve that ran out): the INSERT without the recompute, no count;
    # a flagged group stops it and the INSERT with the recompute runs instead
    mixed = statement(BY_PRODUCT, **{"shop.lines": (3, 2)})
    insert = mixed.writes[-1]
    assert insert.lean is None and insert.fallback is not None
    assert "`_mv_recompute`" not in insert.sql and "VERSION AS OF" not in insert.sql
    assert "case when `_mv_s`.`_mv_flag` then raise_error(" in insert.sql
    assert "`_mv_recompute` as (" in insert.fallback.sql and "raise_error" not in insert.fallback.sql
    assert insert.sql.split("\n", 1)[0] == insert.fallback.sql.split("\n", 1)[0]  # into the same columns
    assert "try_element_at(`_mv_s`.`_mv_nr_min_qty`, 1).`v`" in insert.sql
    for sql in (lean.needed, lean.sql, insert.sql, insert.fallback.sql):
        sqlglot.parse_one(sql, read="spark")
    # nothing to recompute: one form
    insert_only = statement(BY_PRODUCT, **{"shop.lines": (3, 0)}).writes[-1]
    assert insert_only.lean is None and insert_only.fallback is None and "raise_error" not in insert_only.sql


def test_a_reserve_takes_in_what_reaches_its_floor_and_the_delta_its_most_extreme_values():
    view = analyze_view(BY_PRODUCT, MASTERS)
    types = {"_mv_top_max_price": "array<struct<v:decimal(10,2),n:bigint>>"}
    mixed = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 3, 2)}, types)
    delta = mixed.cached[0].sql
    # per group, the argument's values netted, the RESERVE most extreme of each sign
    assert ("row_number() over (partition by `product_id`, `_mv_n` > 0 order by `_mv_v` desc) as `_mv_rk0`" in delta
            and "where `_mv_rk0` <= 4 group by `product_id`" in delta)
    # what reaches the stored floor (or everything, when the reserve holds all the group's values),
    # merged where the delta is cached
    assert ("(aggregate(coalesce(`_mv_c`.`_mv_t`.`_mv_top_max_price`, cast(array() as array<struct<v:decimal(10,2),n:bigint>>)), "
            "cast(0 as bigint), (`_mv_a`, `_mv_e`) -> `_mv_a` + `_mv_e`.`n`) = coalesce(`_mv_c`.`_mv_t`.`_mv_cnt_avg_price`, 0)) or "
            "`_mv_e`.`v` >= try_element_at(") in delta
    assert "map_zip_with(" in delta and "(`_mv_l`, `_mv_r`) -> case when `_mv_l`.`v` > `_mv_r`.`v` then -1" in delta
    for sql in (delta, *(w.sql for w in mixed.writes)):
        sqlglot.parse_one(sql, read="spark")


def test_a_global_aggregate_recomputes_its_extreme_when_a_removed_value_may_be_it():
    view = analyze_view("select count(*) as n, max(price) as max_price, min(qty) as min_qty from shop.lines", MASTERS)
    assert view.reserves == ()
    mixed = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 3, 2)}, {})
    assert "MIN/MAX recompute of groups whose extreme was removed" in mixed.steps_run
    # only a removed value reaching the stored extreme recomputes it: the others
    # (every removed value beyond the stored extreme, or a new value beyond every removed one) are safe
    stored = "`_mv_d`.`_mv_t`"  # the group's stored row, in the cached delta
    flag = mixed.cached[-1].sql
    assert (
        f"(`_mv_d`.`_mv_dn_max_price` is null or ({stored}.`max_price` is not null and `_mv_d`.`_mv_dn_max_price` < "
        f"{stored}.`max_price`) or `_mv_d`.`_mv_dn_max_price` < `_mv_d`.`_mv_dp_max_price`)"
    ) in flag
    assert (
        f"(`_mv_d`.`_mv_dn_min_qty` is null or ({stored}.`min_qty` is not null and `_mv_d`.`_mv_dn_min_qty` > "
        f"{stored}.`min_qty`) or `_mv_d`.`_mv_dn_min_qty` > `_mv_d`.`_mv_dp_min_qty`)"
    ) in flag
    insert_only = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 3, 0)}, {})
    assert "greatest(`_mv_s`.`_mv_t`.`max_price`" in insert_only.sql and "least(`_mv_s`.`_mv_t`.`min_qty`" in insert_only.sql


def test_no_min_max_no_recompute_even_with_deletes():
    sql = statement("select product_id, count(*) as n, sum(qty) as q from shop.lines group by product_id",
                    **{"shop.lines": (1, 4)}).sql
    assert "`_mv_recompute` as (" not in sql


def test_join_terms_only_for_changed_masters():
    only_orders = statement(BY_STATUS, **{"shop.orders": (1, 1)})
    assert only_orders.steps_run[0] == "DELTA o" and "DELTA l" in only_orders.steps_skipped
    both = statement(BY_STATUS, **{"shop.orders": (1, 1), "shop.lines": (2, 0)})
    assert both.steps_run[:2] == ("DELTA o", "DELTA l")
    delta = both.cached[0].sql
    assert delta.count("UNION ALL") + delta.count("union all") >= 1
    # the term for lines reads orders in its new state; the term for orders reads lines in its
    # old state: new rows minus the inserted keys (insert-only log)
    assert "LEFT ANTI JOIN" in delta.upper()
    assert "WHERE `l`.`qty` > 0" in delta


def test_global_aggregate_keeps_its_row():
    for changes in ((0, 3), (2, 1)):
        only = statement(GLOBAL, **{"shop.lines": changes})
        delete, insert = only.writes
        assert delete.sql.endswith("as `_mv_k` where true))\nand exists (select 1 from values (1))")  # its one row is replaced
        assert "> 0" not in insert.sql.rsplit("from `_mv_source` as `_mv_s`", 1)[1]  # ... even at count 0


def test_global_min_max_is_recomputed_only_when_flagged():
    sql = statement("select count(*) as n, max(qty) as top from shop.lines", **{"shop.lines": (1, 1)}).sql
    recompute = sql.split("`_mv_recompute` as (", 1)[1]
    # over no rows a global aggregate still has a row: the flag filters after the aggregation
    assert ") as `_mv_q`\nwhere exists (select 1 from `_mv_flagged`)" in recompute


def test_unlogged_column_blocks_fast_refresh():
    view = analyze_view(BY_PRODUCT, MASTERS)
    reason = view_classes.blocker(view, {"shop.lines": ["line_id", "product_id", "qty"]})
    assert reason is not None and "does not log price" in reason
    assert view_classes.blocker(view, {"shop.lines": [c for c, _ in LINES.columns]}) is None


@pytest.mark.parametrize("sql", [BY_PRODUCT, BY_STATUS, GLOBAL])
def test_identifiers_quoted_values_literal(sql):
    made = statement(sql, **{"shop.lines": (1, 1), "shop.orders": (1, 0)})
    text = "\n".join([*(c.sql for c in made.cached), made.sql])
    assert "VERSION AS OF 11" in text  # the marked log snapshot, as an integer literal
    for word in ("_mv_sign", "_mv_op", "_mv_action"):
        assert f" {word}" not in text.replace(f"`{word}`", "")


def test_the_delta_is_computed_once_and_both_writes_read_it():
    """Spark inlines a CTE at each reference: the delta (a union of joins of logs and masters) is
    cached once instead of being evaluated by the DELETE and five times by the INSERT."""
    made = statement(BY_STATUS, **{"shop.orders": (1, 1), "shop.lines": (2, 0)})
    # (with a MIN/MAX reserve over several masters, the delta's rows are cached first: the
    # delta reads them once more for the reserve)
    rows, cached = made.cached
    assert (rows.name, cached.name) == ("mv_write_terms", "mv_write_delta")
    assert "`mv_write_terms`" in cached.sql and "VERSION AS OF" not in cached.sql
    delete, insert = made.writes
    for write in (delete.sql, insert.sql):
        assert "`mv_write_delta`" in write
        assert "VERSION AS OF" not in write.split("`_mv_recompute`")[0]  # no log or master read before the recompute
    assert "union all" in rows.sql.lower()
    # statistics are read before the writes: they compute the delta themselves
    assert "`mv_write_delta`" not in made.stats_sql and rows.sql in made.stats_sql



# ---------------------------------------------------------------- aggregates over outer joins
CUSTOMERS = MasterTable("shop.customers", (("customer_id", "bigint"), ("segment", "string")), ("customer_id",))
SALES = MasterTable(
    "shop.sales", (("sale_id", "bigint"), ("customer_id", "bigint"), ("amount", "decimal(10,2)")), ("sale_id",)
)
OUTER_MASTERS = {m.name: m for m in (CUSTOMERS, SALES)}
PER_SEGMENT = (
    "select c.segment, count(*) as n, count(s.sale_id) as sales, sum(s.amount) as total, max(s.amount) as top "
    "from shop.customers c left join shop.sales s on s.customer_id = c.customer_id where c.segment <> 'x' "
    "group by c.segment"
)


def outer_statement(sql, logged=(), **changes):
    view = analyze_view(sql, OUTER_MASTERS)
    logs = {}
    for name in {o.master.name for o in view.occurrences}:
        log = marked(OUTER_MASTERS[name], *changes.get(name, (0, 0)))
        logs[name] = dataclasses.replace(log, logged=tuple(logged)) if logged else log
    return view, aggregate_view.refresh_statement(view, "shop.v", logs, {})


def test_an_aggregate_over_a_left_join_is_an_aggregate_view_sliced_by_its_anchor():
    view = analyze_view(PER_SEGMENT, OUTER_MASTERS)
    assert view.view_class.value == "aggregate" and view.null_supplying == {"s"}
    assert outer_aggregate.anchor(view) == "c" and view_classes.blocker(view) is None
    right = analyze_view(
        "select c.segment, count(s.sale_id) as n from shop.sales s right join shop.customers c "
        "on s.customer_id = c.customer_id group by c.segment", OUTER_MASTERS,
    )
    assert outer_aggregate.anchor(right) == "c"


def test_outer_aggregate_change_of_the_null_supplying_side_applies_row_by_row():
    first = outer_statement(PER_SEGMENT, **{"shop.sales": (2, 1)})[1]
    assert first.sql == outer_statement(PER_SEGMENT, **{"shop.sales": (2, 1)})[1].sql
    assert [c.name for c in first.cached] == ["mv_write_terms", "mv_write_delta"]  # no slices: row by row
    delta = first.cached[0].sql
    for sql in (delta, first.cached[1].sql, *(w.sql for w in first.writes), first.stats_sql):
        sqlglot.parse_one(sql, read="spark")
    changed, extended = delta.split("\nunion all\n")
    # the customers joined with the sales' signed images, where a sale is present
    assert "`s`.`_mv_s` AS `_mv_sign`" in changed and changed.endswith("WHERE `c`.`segment` <> 'x' AND NOT `s`.`_mv_s` IS NULL")
    # the null-extended rows of the customers whose sales went from some to none (+1) or back (-1):
    # the sales read as none, the customers joined with the transitions counted from the sales' new rows
    assert "`shop`.`sales` VERSION AS OF 123 WHERE FALSE) AS `s`" in extended
    assert "CASE WHEN COALESCE(`_mv_n`.`_mv_n`, 0) = 0 THEN 1 ELSE -1 END AS `_mv_t`" in extended
    assert "WHERE (COALESCE(`_mv_n`.`_mv_n`, 0) = 0) <> (COALESCE(`_mv_n`.`_mv_n`, 0) - `_mv_d`.`_mv_d` = 0)" in extended
    assert extended.endswith("AS `_mv_t` ON `c`.`customer_id` = `_mv_t`.`_mv_v0` WHERE `c`.`segment` <> 'x'")
    assert first.steps_run[0] == "ROWS s" and first.steps_skipped == ("DELTA c",)


def test_outer_aggregate_change_of_the_anchor_is_linear_with_the_other_side_read_for_its_keys():
    statement = outer_statement(PER_SEGMENT, **{"shop.customers": (1, 1), "shop.sales": (1, 1)})[1]
    *rows_terms, anchor_term = statement.cached[0].sql.split("\nunion all\n")
    # the null-supplying change first, row by row (linear in the customers: their old state is
    # signed rows), then the customers' signed images left joined with the sales' NEW rows (real
    # rows, no old state of the fact), read for the changed customers only
    assert len(rows_terms) == 2 and not any("_mv_net" in t for t in rows_terms)
    assert all(t.count(" * `c`.`_mv_sign` AS `_mv_sign`") == 1 for t in rows_terms)
    assert "`c`.`_mv_sign` AS `_mv_sign`" in anchor_term and "_mv_net" not in anchor_term
    assert "LEFT JOIN (SELECT * FROM `shop`.`sales` VERSION AS OF 123 WHERE (`customer_id`) IN (SELECT /*+ BROADCAST */" in anchor_term
    assert statement.steps_run[:2] == ("DELTA c", "ROWS s")


THREE = (
    "select r.name, count(*) as n, sum(s.amount) as total from shop.sales s "
    "left join shop.customers c on s.customer_id = c.customer_id "
    "left join shop.regions r on c.region_id = r.region_id group by r.name"
)


def test_outer_aggregate_by_slices_when_a_later_join_reads_the_changed_side():
    regions = MasterTable("shop.regions", (("region_id", "bigint"), ("name", "string")), ("region_id",))
    customers = MasterTable("shop.customers", (("customer_id", "bigint"), ("region_id", "bigint")), ("customer_id",))
    masters = {m.name: m for m in (SALES, customers, regions)}
    view = analyze_view(THREE, masters)
    logs = {name: marked(m, 1, 1) for name, m in masters.items()}
    statement = aggregate_view.refresh_statement(view, "shop.v", logs, {})
    # customers: the regions' join reads them, so their change recomputes the affected sales'
    # slices (new minus old); regions: a leaf, row by row
    assert statement.steps_run[:3] == ("DELTA s", "SLICES c", "ROWS r")
    slices, rows, delta = statement.cached
    assert slices.name == "mv_write_slices_c"
    # the anchor keys of the join's rows holding a changed customer, new state and old
    assert slices.sql.count("WHERE NOT `c`.`customer_id` IS NULL") == 2
    # the delta's rows (joins reading the masters) cached by the delta's statement, which reads
    # them twice (its groups, and their keys finding the stored rows): computed once
    assert rows.lazy and not slices.lazy and not delta.lazy
    assert rows.statement.startswith("cache lazy table `mv_write_terms` as\n")
    assert delta.sql.count("`mv_write_terms`") == 2
    terms = rows.sql.split("\nunion all\n")
    assert sum("FROM `mv_write_slices_c`" in t for t in terms) == 2
    assert "mv_write_slices_c" not in statement.stats_sql  # the statistics compute them inline


def test_outer_aggregate_old_state_by_log_kind():
    view = analyze_view(PER_SEGMENT, OUTER_MASTERS)
    columns = outer_aggregate.read_columns(view, "s")
    assert columns == ["amount", "customer_id", "sale_id"]
    log = marked(SALES, 2, 0)
    assert "LEFT ANTI JOIN".lower() in outer_aggregate.old_state(log, columns).lower()
    assert "_mv_net" not in outer_aggregate.old_state(log, columns)
    deleted = outer_aggregate.old_state(marked(SALES, 0, 2), columns)
    assert "union all" in deleted and "`_mv_op` = 'D'" in deleted and "_mv_net" not in deleted
    assert outer_aggregate.old_state(marked(SALES), columns) == "`shop`.`sales` version as of 123"


def test_outer_aggregate_min_max_checks_its_reserves_even_when_only_inserts_are_marked():
    # (a slice's unchanged rows come with both signs: they cancel out in the reserve's delta)
    _, statement = outer_statement(PER_SEGMENT, **{"shop.sales": (3, 0)})
    assert "MIN/MAX from the reserves, recompute of groups whose reserve ran out" in statement.steps_run


# ---------------------------------------------------------------- HAVING
BY_PRODUCT_HAVING = (
    "select product_id, count(*) as n, sum(qty * price) as revenue, max(price) as max_price from shop.lines "
    "group by product_id having count(*) > 2 and revenue > 10 and sum(qty * price) < 1000 and product_id <> 7"
)


def test_having_is_analysed_over_the_stored_columns():
    view = analyze_view(BY_PRODUCT_HAVING, MASTERS)
    assert view.view_class.value == "aggregate"
    assert ViewDefinition_sql(view.having) == (
        "`n` > 2 AND `revenue` > 10 AND `revenue` < 1000 AND `product_id` <> 7"
    )
    # the defining query: the groups that pass, filtered on the stored row (hidden count included)
    query = render_select(view)
    assert query.endswith("as `_mv_g`\nwhere `n` > 2 AND `revenue` > 10 AND `revenue` < 1000 AND `product_id` <> 7")
    sqlglot.parse_one(query, read="spark")
    # COUNT(*) not selected is the hidden row count
    hidden = analyze_view("select product_id, sum(qty) as q from shop.lines group by product_id having count(*) > 1", MASTERS)
    assert ViewDefinition_sql(hidden.having) == "`_mv_count` > 1"


def ViewDefinition_sql(expression):
    return expression.sql(dialect="spark", identify=True)


def test_having_recomputes_the_groups_the_view_does_not_hold_and_stores_only_those_that_pass():
    statement = aggregate_view.refresh_statement(
        analyze_view(BY_PRODUCT_HAVING, MASTERS), "shop.v", {"shop.lines": marked(LINES, 2, 0)}, {}
    )
    delete, insert = statement.writes
    for sql in (delete.sql, insert.sql, statement.stats_sql):
        sqlglot.parse_one(sql, read="spark")
    # insert-only: no MIN/MAX check, but the delta's groups missing from the view are recomputed
    assert "`_mv_negative`" not in insert.sql
    assert "`_mv_flagged` as (\nselect `_mv_d`.`product_id` as `_mv_g0` from `_mv_delta` as `_mv_d`\nwhere `_mv_d`.`_mv_flag`" in insert.sql
    assert "select `_mv_d`.*, coalesce((not `_mv_d`.`_mv_t`.`_mv_count` is not null), false) as `_mv_flag`" in statement.cached[-1].sql
    assert insert.sql.endswith(
        "as `_mv_h`\nwhere `n` > 2 AND `revenue` > 10 AND `revenue` < 1000 AND `product_id` <> 7\n) as `_mv_rebalanced`"
    )
    assert statement.steps_run == ("DELTA lines", "HAVING: recompute of groups the view does not hold")
    # with deletes, both kinds of flagged groups, each group once
    mixed = aggregate_view.refresh_statement(
        analyze_view(BY_PRODUCT_HAVING, MASTERS), "shop.v", {"shop.lines": marked(LINES, 2, 1)}, {}
    )
    flag = mixed.cached[-1].sql.split(" as `_mv_flag` from (", 1)[0]
    assert "(size(`_mv_d`.`_mv_nr_max_price`) = 0" in flag and flag.endswith(" or (not `_mv_d`.`_mv_t`.`_mv_count` is not null), false)")


def test_outer_aggregate_row_by_row_applies_the_joins_own_filter_to_images_and_counts():
    sql = ("select c.segment, count(s.sale_id) as sales from shop.customers c left join shop.sales s "
           "on s.customer_id = c.customer_id and s.amount > 0 group by c.segment")
    statement = outer_statement(sql, **{"shop.sales": (1, 1)})[1]
    changed, extended = statement.cached[0].sql.split("\nunion all\n")
    # an image failing the filter joins no customer (the ON keeps it), and neither the images'
    # net count nor the new rows' count of a customer includes rows failing it
    assert "ON `c`.`customer_id` = `s`.`customer_id` AND `s`.`amount` > 0" in changed
    assert extended.count("WHERE NOT `s`.`customer_id` IS NULL AND (`s`.`amount` > 0)") == 3  # net twice (values), counts once


def test_a_small_view_is_rewritten_whole_by_one_statement_reading_the_delta_once():
    view = analyze_view(BY_STATUS.replace(", max(o.day) as last_day", ""), MASTERS)
    logs = {"shop.lines": marked(LINES, 2, 1), "shop.orders": marked(ORDERS)}
    rewrite = aggregate_view.refresh_statement(view, "shop.v", logs, {"n": "bigint"}, view_rows=25)
    assert [w.kind for w in rewrite.writes] == ["overwrite"] and rewrite.cached == () and rewrite.branch is None
    sql = rewrite.writes[0].sql
    assert sql.startswith("insert overwrite `shop`.`v` (") and isinstance(sqlglot.parse_one(sql, read="spark"), sqlglot.exp.Insert)
    parsed = sqlglot.parse_one(sql, read="spark")
    assert sum(1 for t in parsed.find_all(sqlglot.exp.Table) if t.name == "mlog_lines") == 1  # the delta, once
    assert "full outer join `shop`.`v` as `_mv_t` on `_mv_s`.`status` <=> `_mv_t`.`status`" in sql
    # an unchanged group keeps its stored values; a group whose rows all went is not written
    assert "case when coalesce(`_mv_s`.`_mv_in_delta`, false) then " in sql and "else `_mv_t`.`qty` end as `qty`" in sql
    assert sql.endswith("where not `_mv_changed` or `_mv_new_count` > 0")
    assert rewrite.steps_run == ("DELTA l", "rewrite of the view") and rewrite.writes[0].fallback is None
    # bigger views (the plan passes no rows: config rewrite_rows): DELETE and INSERT
    assert [w.kind for w in aggregate_view.refresh_statement(view, "shop.v", logs, {}, view_rows=None).writes] == ["delete", "insert"]
    # a MIN/MAX with a reserve: inserts merged into it; after deletes too, a group whose reserve ran out
    # while it has values stops the rewrite and the rewrite recomputing it runs instead
    extremes = analyze_view(BY_PRODUCT, MASTERS)
    inserted = aggregate_view.refresh_statement(extremes, "shop.v", {"shop.lines": marked(LINES, 3, 0)}, {}, view_rows=5)
    assert [w.kind for w in inserted.writes] == ["overwrite"] and "_mv_guarded" not in inserted.writes[0].sql
    deleted = aggregate_view.refresh_statement(extremes, "shop.v", {"shop.lines": marked(LINES, 0, 1)}, {}, view_rows=5)
    (write,) = deleted.writes
    assert write.kind == "overwrite" and sqlglot.parse_one(write.sql, read="spark")
    # (merged for changed groups only: a CASE on the group being in the delta)
    assert "case when coalesce(`_mv_s`.`_mv_in_delta`, false) then try_element_at(slice(array_sort(" in write.sql
    guard = write.sql.split(" as `_mv_guarded`", 1)[0].rsplit(", coalesce(coalesce(`_mv_s`.`_mv_in_delta`, false) and (", 1)[1]
    assert guard.startswith("(size(slice(array_sort(") and guard.count("(size(") == 2, guard
    assert "(coalesce(`_mv_t`.`_mv_cnt_min_qty`, 0) + coalesce(`_mv_s`.`_mv_d__mv_cnt_min_qty`, 0)) > 0)" in guard
    assert "raise_error(" in write.sql
    recomputing = write.fallback.sql
    assert recomputing.startswith("insert overwrite `shop`.`v` (") and sqlglot.parse_one(recomputing, read="spark")
    assert "`_mv_recompute` as (" in recomputing and "(size(`_mv_d`.`_mv_nr_max_price`) = 0 and" in recomputing
    assert deleted.steps_run == (
        "DELTA lines", "MIN/MAX from the reserves, recompute of groups whose reserve ran out", "rewrite of the view"
    )
    # a global MIN/MAX has no reserve: its groups are recomputed as a rule, DELETE and INSERT
    overall = analyze_view("select count(*) as n, max(price) as top from shop.lines", MASTERS)
    everything = aggregate_view.refresh_statement(overall, "shop.v", {"shop.lines": marked(LINES, 0, 1)}, {}, view_rows=1)
    assert [w.kind for w in everything.writes] == ["delete", "insert"]


def test_a_min_and_a_max_of_one_column_share_the_netting_of_its_values():
    """One read of the delta's rows, one aggregation and one shuffle for both reserves' deltas
    (TPC-H's part_price_range: min and max of l_extendedprice)."""
    view = analyze_view(
        "select product_id, count(*) as n, min(price) as low, max(price) as high from shop.lines group by product_id",
        MASTERS,
    )
    statement = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 3, 2)})
    delta = delta_of(statement.cached[0].sql)
    assert delta.count("group by `product_id`, `_mv_x0` having") == 1, delta
    assert ("row_number() over (partition by `product_id`, `_mv_n` > 0 order by `_mv_v` asc) as `_mv_rk0`, "
            "row_number() over (partition by `product_id`, `_mv_n` > 0 order by `_mv_v` desc) as `_mv_rk1`") in delta
    assert ("collect_list(case when `_mv_rk0` <= 4 then named_struct('v', `_mv_v`, 'n', `_mv_n`) end) as `_mv_dr_low`, "
            "collect_list(case when `_mv_rk1` <= 4 then named_struct('v', `_mv_v`, 'n', `_mv_n`) end) as `_mv_dr_high`") in delta
    assert ") where `_mv_rk0` <= 4 or `_mv_rk1` <= 4 group by `product_id`" in delta
    assert "select `_mv_g`.*, `_mv_r0`.`_mv_dr_low`, `_mv_r0`.`_mv_dr_high` from (" in delta


def test_a_group_key_named_like_an_occurrence_alias_is_not_captured_by_the_recompute_restriction():
    # an output `l` over `shop.lines l`: inside the flagged groups' EXISTS, `l.product_id` must be
    # the master's column, not a field of the flagged key `l` (found by the generated views, g0029)
    sql = "select l.product_id + 0 as l, max(l.qty) as m from shop.lines l group by l.product_id + 0 having count(*) > 1"
    view = analyze_view(sql, MASTERS)
    statement = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 2, 1)}, {})
    recompute = statement.writes[1].sql.split("`_mv_recompute` as (", 1)[1]
    restriction = recompute.split("EXISTS(", 1)[1]
    assert restriction.startswith(
        "SELECT 1 FROM `_mv_flagged` AS `_mv_f` WHERE `_mv_f`.`_mv_g0` IS NOT DISTINCT FROM (`l`.`product_id` + 0))"
    )
    ctes = {cte.alias: cte.this for cte in sqlglot.parse_one(statement.writes[1].sql, read="spark").find_all(sqlglot.exp.CTE)}
    assert ctes["_mv_flagged"].named_selects == ["_mv_g0"]


def test_a_constant_label_of_a_global_aggregate_is_a_plain_column_of_its_one_row():
    # Spark needs no GROUP BY for a constant (issue 62: it was refused as "neither aggregated nor in GROUP BY")
    labelled = "select 'all lines' as scope, 1 as version, count(*) as n, sum(qty) as qty from shop.lines"
    view = analyze_view(labelled, MASTERS)
    assert view.group_by == () and view.group_key_columns == ()
    assert render_select(view).startswith("SELECT 'all lines' AS `scope`, 1 AS `version`, COUNT(*) AS `n`")
    insert = statement(labelled, **{"shop.lines": (2, 1)}).writes[1].sql
    assert "select 'all lines' as `scope`, 1 as `version`, " in insert.lower()
    assert "group by" not in insert.split("insert into", 1)[1].split("`_mv_source` as", 1)[1].lower()
    assert aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 1)}, {}, view_rows=1) is not None


def test_a_decimal_avg_divides_as_spark_does_where_that_rounds_as_avg_does():
    # a decimal(20,2) sum over a count: Spark's quotient has scale 20, 14 digits beyond the AVG's 6, so
    # rounding it again equals AVG's one rounding below 10^14 values (exact_decimals.py)
    view = analyze_view(BY_PRODUCT, MASTERS)
    types = {"avg_price": "decimal(14,6)", "_mv_sum_avg_price": "decimal(20,2)"}
    statement = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 2)}, types)
    insert = statement.writes[1].sql
    count, total = "`_mv_s`.`_mv_n__mv_cnt_avg_price`", "`_mv_s`.`_mv_n__mv_sum_avg_price`"
    # (the group's new count and sum, computed once into the cached delta's row)
    new_count = "(coalesce(`_mv_d`.`_mv_t`.`_mv_cnt_avg_price`, 0) + coalesce(`_mv_d`.`_mv_d__mv_cnt_avg_price`, 0))"
    assert (
        f"case when {new_count} = 0 then null else coalesce(`_mv_d`.`_mv_t`.`_mv_sum_avg_price`, 0) + "
        "coalesce(`_mv_d`.`_mv_d__mv_sum_avg_price`, 0) end as `_mv_n__mv_sum_avg_price`"
    ) in statement.cached[-1].sql
    assert (f"cast(case when {count} = 0 then null else cast(({total}) as decimal(20,2)) / ({count}) end "
            "as decimal(14,6)) as `avg_price`") in insert
    assert "`_mv_flagged`" not in insert and "try_cast" not in insert and "`_mv_flag`" not in statement.cached[-1].sql


def test_a_decimal_avg_divides_in_types_that_drop_no_digit_and_rounds_once_to_the_avg_s_type():
    # a decimal(24,4) sum: Spark's quotient has scale 18, only 10 digits beyond the AVG's 8
    view = analyze_view(BY_PRODUCT, MASTERS)
    types = {"avg_price": "decimal(18,8)", "_mv_sum_avg_price": "decimal(24,4)"}
    statement = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 2)}, types)
    insert = statement.writes[1].sql
    count, total = "`_mv_s`.`_mv_n__mv_cnt_avg_price`", "`_mv_s`.`_mv_n__mv_sum_avg_price`"
    # the first rung: a sum of 31 digits over a count of 6, 38 digits with nothing dropped (scale 11),
    # rounded once to decimal(18,8); exact below 1,000 values (exact_decimals.py); then counts of 9 digits
    first = (
        f"when {count} < 1000 and try_cast({total} as decimal(31,4)) is not null then "
        f"cast(try_cast({total} as decimal(31,4)) / cast({count} as decimal(6,0)) as decimal(18,8))"
    )
    assert f"case when {count} = 0 then null {first} when {count} < 1000000 and " in insert
    # a group that no rung computes is recomputed from the masters
    recomputing = statement.writes[1].fallback.sql
    assert "`_mv_flagged`" in recomputing and "`_mv_recompute`" in recomputing
    assert f"(coalesce({count.replace('`_mv_s`', '`_mv_d`')}, 0) > 0 and not coalesce(" in statement.cached[-1].sql


def test_a_decimal_38_sum_adds_in_types_that_drop_no_digit_or_is_recomputed():
    # Spark adds two decimal(38, 8) as a decimal(38, 7) (dropping the last digit: found by the generated
    # definitions, sum(c.credit * o.amount)); ANSI off, a SUM that overflows is NULL, and NULL plus a later
    # delta is not the sum: such groups (stored NULL beside values, a delta overflowing itself, an operand
    # beyond 37 digits) are recomputed from the masters; a sum that cannot reach 38 digits needs none of it
    sql = "select product_id, sum(price) as revenue from shop.lines group by product_id"
    view = analyze_view(sql, MASTERS)
    logs = {"shop.lines": marked(LINES, 2, 1)}
    plain = aggregate_view.refresh_statement(view, "shop.v", logs, {"revenue": "decimal(20,2)"})
    assert "_mv_flagged" not in plain.writes[1].sql and "try_cast" not in plain.writes[1].sql
    wide = aggregate_view.refresh_statement(view, "shop.v", logs, {"revenue": "decimal(38, 8)"})
    insert = wide.cached[-1].sql  # (the new sums and the guards, computed into the cached delta)
    assert ("try_cast(coalesce(`_mv_d`.`_mv_t`.`revenue`, 0) as decimal(37,8)) + "
            "try_cast(coalesce(`_mv_d`.`_mv_d_revenue`, 0) as decimal(37,8)) end as `_mv_n_revenue`") in insert
    assert "(`_mv_d`.`_mv_t`.`revenue` is null and coalesce(`_mv_d`.`_mv_t`.`_mv_cnt_revenue`, 0) > 0)" in insert
    assert "(`_mv_d`.`_mv_d_revenue` is null and coalesce(`_mv_d`.`_mv_dv_revenue`, 0) > 0)" in insert
    assert "(try_cast(`_mv_d`.`_mv_t`.`revenue` as decimal(37,8)) is null and `_mv_d`.`_mv_t`.`revenue` is not null)" in insert
    assert "count(`_mv_x0`) as `_mv_dv_revenue`" in wide.cached[-1].sql
    rewritten = aggregate_view.refresh_statement(view, "shop.v", logs, {"revenue": "decimal(38,8)"}, view_rows=1)
    # a small view is rewritten whole all the same: a guarded group stops the statement (raise_error),
    # and its fallback rewrites the view with the recompute of the guarded groups from the masters
    (rewrite,) = rewritten.writes
    assert rewrite.kind is WriteKind.OVERWRITE
    assert "case when `_mv_guarded` then raise_error('dbt-incremental-mv: a group needs its masters" in rewrite.sql
    assert "(`_mv_s`.`_mv_d_revenue` is null and coalesce(`_mv_s`.`_mv_dv_revenue`, 0) > 0)" in rewrite.sql
    assert rewrite.fallback is not None and rewrite.fallback.sql.startswith("insert overwrite `shop`.`v`")
    assert "`_mv_recompute` as (" in rewrite.fallback.sql and "where `_mv_d`.`_mv_flag`" in rewrite.fallback.sql
    # the groups the delta does not change, as they are
    assert ("left anti join (select `product_id` from `_mv_delta`) as `_mv_k` on `_mv_k`.`product_id` <=> "
            "`_mv_v`.`product_id`") in rewrite.fallback.sql
    # a sum that cannot overflow: no guard, no fallback
    assert aggregate_view.refresh_statement(view, "shop.v", logs, {"revenue": "decimal(20,2)"}, view_rows=1).writes[
        0
    ].fallback is None


def test_an_expression_over_aggregates_is_recomputed_from_their_new_values_in_their_stored_types():
    view = analyze_view(
        "select product_id, round(sum(price), 1) as total, sum(price) / count(*) as mean from shop.lines "
        "group by product_id",
        MASTERS,
    )
    logs = {"shop.lines": marked(LINES, 2, 1)}
    types = {"product_id": "bigint", "total": "decimal(21,1)", "mean": "decimal(38,22)", "_mv_a1_total": "decimal(20,2)"}
    insert = aggregate_view.refresh_statement(view, "shop.v", logs, types).writes[-1].sql
    count = "`_mv_s`.`_mv_n__mv_count`"
    # the hidden sum's new value, cast to decimal(20,2) before ROUND and the division read it (a
    # decimal(21,2) sum would divide at another scale); not evaluated for a group that goes
    assert "as `_mv_a1_total`" in insert
    assert f"cast(case when {count} > 0 then ROUND((cast(`_mv_s`.`_mv_n__mv_a1_total` as decimal(20,2))), 1)" in insert
    assert "as decimal(20,2))), 1) end as decimal(21,1)) as `total`" in insert
    assert f"as decimal(20,2))) / ({count}) end as decimal(38,22)) as `mean`" in insert


def test_an_aggregate_no_delta_maintains_recomputes_every_group_the_changes_touch_and_only_those():
    sql = (
        "select product_id, count(distinct order_id) as orders, percentile(qty, 0.5) as median_qty, "
        "max(price) as max_price, count(*) as n from shop.lines group by product_id having count(distinct qty) > 1"
    )
    view = analyze_view(sql, MASTERS)
    for inserts, deletes in ((3, 0), (0, 2), (1, 1)):
        refresh = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, inserts, deletes)}, {})
        delete, insert = refresh.writes
        for statement_sql in (delete.sql, insert.sql, refresh.stats_sql):
            sqlglot.parse_one(statement_sql, read="spark")
        # every group of the delta, whatever the logs hold: no MIN/MAX or HAVING condition on it
        flagged = insert.sql.split("`_mv_flagged` as (\n", 1)[1].split("\n)", 1)[0]
        assert flagged == "select `_mv_d`.`product_id` as `_mv_g0` from `_mv_delta` as `_mv_d`"
        # recomputed from the master's rows of those groups only (a semi join below the aggregation)
        recompute = insert.sql.split("`_mv_recompute` as (", 1)[1]
        assert "COUNT(DISTINCT `_mv_w`.`_mv_c0`) AS `orders`" in recompute
        assert "PERCENTILE(`_mv_w`.`_mv_c3`, 0.5) AS `median_qty`" in recompute
        assert "FROM `shop`.`lines` VERSION AS OF 123 AS `lines` WHERE EXISTS(SELECT 1 FROM `_mv_flagged` AS `_mv_f`" in recompute
        # the delta aggregates nothing for them (it cannot): only the counts, sums and extremes
        assert "distinct" not in delta_of(refresh.cached[0].sql).lower()
        assert refresh.steps_run == ("DELTA lines", "recompute of every changed group (an aggregate no delta maintains)")
    # never the one-statement rewrite of a small view: it reads no master
    small = aggregate_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, 3, 0)}, {}, view_rows=5)
    assert [w.kind for w in small.writes] == ["delete", "insert"]
