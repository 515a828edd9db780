"""Writes the generated pages of the docs site from the code's own definitions.

    .venv/bin/python scripts/gen_docs.py          # rewrite docs/reference.md and docs/supported-sql.md
    .venv/bin/python scripts/gen_docs.py --check  # exit 1 when a page differs (the unit suite does this)

docs/reference.md lists every model config (config.MODEL_CONFIGS), change-log key
(logs.contract.LOG_KEYS), profile key (adapter.connections.PROFILE_KEYS), environment variable
(environment.USER_FACING), run-operation and test (their macros' signatures in macros/) and
command-line command (cli.build_parser): a key added to the code without its entry fails the check.
docs/supported-sql.md shows examples of what is maintained and what is refused, each analysed by
the product when the page is generated (the class and the refusal messages are its own output).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's package, not an installed copy
REFERENCE = REPO / "docs" / "reference.md"

# What each run-operation and generic test does; their arguments are read from the macros. A public
# macro under macros/operations or macros/tests without an entry here fails the check.
OPERATIONS = {
    "explain_fast_refresh": (
        "What the next `dbt run` of a model does and why: its view class, the masters and their logs, fast "
        "or complete and the cost estimate `force` decides by, each phase's statements, layout advice. "
        "Reads only; works for a model not built yet.",
        "dbt run-operation explain_fast_refresh --args '{model: customer_orders}'",
    ),
    "mv_status": (
        "Each fast_refresh view's state: fresh, stale (changes pending, by master), needs rebuild (why), "
        "unusable (why) or not built, and `compaction recommended` when its refreshes left many delete files or "
        "small data files. Reads only. `fail_on` (states, e.g. `[stale, unusable]`): the command "
        "fails when a view is in one, a gate for CI.",
        "dbt run-operation mv_status --args '{fail_on: [stale, needs_rebuild, unusable]}'",
    ),
    "create_mv_log": (
        "Create every declared change log that does not exist yet (or the logs of the named masters).",
        "dbt run-operation create_mv_log --args '{master: orders}'",
    ),
    "capture_mv_log": (
        "Append the master commits made since the last capture to capture-managed logs (every refresh "
        "captures first, so this is rarely needed by hand).",
        "dbt run-operation capture_mv_log",
    ),
    "refresh_on_commit": (
        "On-commit refresh: in a post-hook of a model that writes a master, refresh every view reading that "
        "master from just the commit(s) it made.",
        '{{ config(post_hook="{{ refresh_on_commit() }}") }}',
    ),
    "mv_layout_advice": (
        "The Iceberg sort orders that let each view's refresh skip data files. Printed, never run.",
        "dbt run-operation mv_layout_advice --args '{models: [customer_orders]}'",
    ),
    "mv_compact": (
        "Compact the views `mv_status` recommends it for (or the named ones; `every: true`: due or not), what a "
        "fast refresh does by itself unless `auto_compact=false`: its small data files rewritten where they are "
        "what makes it due, its delete files merged where those are, else Iceberg's `rewrite_data_files` of the files "
        "with deletes and the small ones (every view, with `every: true`), sorted as the view was built, and on format 2 the delete files left "
        "pointing at rewritten files dropped (a view with ARRAY or MAP columns has every data file rewritten "
        "instead: Iceberg 1.10 cannot rewrite its position deletes). Run it between refreshes.",
        "dbt run-operation mv_compact --args '{models: [customer_orders]}'",
    ),
    "matches_defining_query": (
        "Generic test: the view equals its defining query recomputed now (as multisets, hidden `_mv_*` "
        "columns left out); each failing row says whether it is missing from the view or extra in it.",
        "data_tests: [matches_defining_query]",
    ),
}

SUPPORTED_SQL = REPO / "docs" / "supported-sql.md"

# The tables the examples read (schema shop), as the analysis sees them: (column, Spark type), key.
EXAMPLE_MASTERS = {
    "orders": (
        (
            ("order_id", "bigint"),
            ("customer_id", "bigint"),
            ("product_id", "bigint"),
            ("amount", "decimal(12,2)"),
            ("status", "string"),
            ("ordered_at", "timestamp"),
        ),
        ("order_id",),
    ),
    "customers": ((("customer_id", "bigint"), ("name", "string"), ("country", "string")), ("customer_id",)),
    "products": ((("product_id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")), ("product_id",)),
    "payments": ((("payment_id", "bigint"), ("order_id", "bigint"), ("amount", "decimal(12,2)")), ("payment_id",)),
    "prices": (
        (
            ("product_id", "bigint"),
            ("valid_from", "timestamp"),
            ("valid_to", "timestamp"),
            ("price", "decimal(10,2)"),
        ),
        ("product_id", "valid_from"),
    ),
}

# (what, the example's SQL); each is analysed as the materialization does when the page is generated.
MAINTAINED = [
    (
        "Filter and project one table",
        "select order_id, amount * 2 as doubled from shop.orders where status <> 'cancelled'",
    ),
    (
        "Inner joins (`JOIN ... ON`, comma joins, self-joins)",
        "select o.order_id, c.name, p.name as product from shop.orders o join shop.customers c on o.customer_id = "
        "c.customer_id join shop.products p on o.product_id = p.product_id",
    ),
    (
        "JOIN ... USING (inner and LEFT joins)",
        "select order_id, customer_id, c.country from shop.orders o left join shop.customers c using (customer_id)",
    ),
    (
        "LEFT / RIGHT outer joins, chains of them",
        "select c.customer_id, c.name, o.order_id from shop.customers c left join shop.orders o on o.customer_id = "
        "c.customer_id",
    ),
    (
        "An outer join whose null-extended rows a condition no NULL satisfies discards (in WHERE, or in the ON of "
        "an inner join after it): maintained as the inner join it is",
        "select o.order_id, c.name from shop.orders o left join shop.customers c on o.customer_id = c.customer_id "
        "where c.country = 'NL'",
    ),
    (
        "Range or OR conditions in an outer join's ON, beside an equality (validity intervals)",
        "select o.order_id, p.price from shop.orders o left join shop.prices p on p.product_id = o.product_id and "
        "o.ordered_at >= p.valid_from and (o.ordered_at < p.valid_to or p.valid_to is null)",
    ),
    (
        "Aggregates: COUNT, SUM, AVG, MIN, MAX with GROUP BY",
        "select status, count(*) as n, sum(amount) as total, avg(amount) as mean, max(amount) as biggest from shop.orders "
        "group by status",
    ),
    (
        "COUNT_IF, BOOL_OR / ANY / SOME, BOOL_AND / EVERY (as the COUNT, MAX, MIN they equal)",
        "select status, count_if(amount > 100) as big, bool_or(amount > 1000) as any_huge from shop.orders "
        "group by status",
    ),
    (
        "COUNT/SUM/AVG(DISTINCT), PERCENTILE, MEDIAN, STDDEV, VARIANCE, APPROX_COUNT_DISTINCT, CORR, BIT_OR, "
        "sorted COLLECT_SET / COLLECT_LIST (each group a change touches recomputed from the masters)",
        "select status, count(distinct customer_id) as buyers, percentile(amount, 0.9) as p90, "
        "array_sort(collect_set(customer_id)) as who from shop.orders group by status",
    ),
    (
        "LISTAGG / STRING_AGG ... WITHIN GROUP (ORDER BY ...) (Spark 4; values the order leaves tied are joined in "
        "their own order), and FILTER (WHERE ...) on any aggregate above (as the aggregate of CASE WHEN ... END)",
        "select customer_id, listagg(status, ', ') within group (order by ordered_at) as statuses, "
        "count(*) filter (where amount > 100) as big from shop.orders group by customer_id",
    ),
    (
        "... and LISTAGG without WITHIN GROUP, COLLECT_LIST / COLLECT_SET unsorted (over a window too: COLLECT_SET, "
        "or COLLECT_LIST without ORDER BY): their order is the order Spark reads the rows in, so any order is the "
        "query's answer; the view orders them by value (WITHIN GROUP (ORDER BY the value), ARRAY_SORT), the same way "
        "by every build and refresh, and explain says so",
        "select customer_id, listagg(status, ', ') as statuses, collect_set(product_id) as products from shop.orders "
        "group by customer_id",
    ),
    (
        "Aggregates over inner or outer joins, HAVING",
        "select c.country, count(o.order_id) as orders from shop.customers c left join shop.orders o on o.customer_id = "
        "c.customer_id group by c.country having count(o.order_id) > 10",
    ),
    (
        "Expressions over aggregates and group keys (recomputed from stored aggregates), HAVING on any aggregate",
        "select status, round(sum(amount), 2) as total, sum(amount) / count(*) as mean, coalesce(max(amount), 0) as "
        "biggest from shop.orders group by status having min(amount) > 0",
    ),
    (
        "A global aggregate, constant columns",
        "select 'all orders' as scope, count(*) as n, sum(amount) as total from shop.orders",
    ),
    (
        "SELECT DISTINCT, also in a CTE or derived table the query reads whole",
        "with buyers as (select distinct customer_id, status from shop.orders) select * from buyers",
    ),
    (
        "UNION ALL of maintainable branches",
        "select order_id as id, 'order' as kind from shop.orders union all select customer_id, 'customer' from "
        "shop.customers",
    ),
    (
        "CTEs and derived tables that filter or project one table (dbt's import CTEs)",
        "with paid as (select * from shop.orders where status = 'paid') select p.order_id, c.country from paid p join "
        "shop.customers c on p.customer_id = c.customer_id",
    ),
    (
        "UNION ALL in a CTE or derived table that the query reads alone, selecting and filtering its rows "
        "(`dbt_utils.union_relations`)",
        "with unioned as (select cast(order_id as bigint) as id, cast(status as string) as label from shop.orders "
        "union all select cast(customer_id as bigint), cast(country as string) from shop.customers) "
        "select id, upper(label) as label from unioned where id > 0",
    ),
    (
        "A CTE or derived table that joins, joined to more tables with an inner join (or as the first FROM item)",
        "with order_customers as (select o.order_id, o.product_id, c.country from shop.orders o join shop.customers c "
        "on o.customer_id = c.customer_id) select oc.order_id, oc.country, p.name from order_customers oc join "
        "shop.products p on p.product_id = oc.product_id",
    ),
    (
        "A CTE or derived table that aggregates (or a SELECT DISTINCT), inner or LEFT joined on its group keys to "
        "tables whose keys the query selects (orders per customer)",
        "with totals as (select customer_id, count(*) as orders, sum(amount) as spent from shop.orders group by "
        "customer_id) select c.customer_id, c.name, t.orders, t.spent from shop.customers c left join totals t on "
        "t.customer_id = c.customer_id",
    ),
    (
        "The latest row per key, the top rows of each partition (ROW_NUMBER, RANK, DENSE_RANK <= n; QUALIFY)",
        "select * from (select o.*, row_number() over (partition by customer_id order by ordered_at desc) as rn from "
        "shop.orders o) as latest where rn = 1",
    ),
    (
        "Window functions partitioned by a common PARTITION BY expression (LEAD/LAG validity ranges, running and "
        "partition-wide aggregates, ROW_NUMBER as a column, FIRST_VALUE), over one table, in the query or in a CTE "
        "the query selects and filters (QUALIFY too): each partition a change touches is recomputed",
        "with versions as (select order_id, customer_id, status, ordered_at, lead(ordered_at) over (partition by "
        "customer_id order by ordered_at) as valid_to from shop.orders) select * from versions where status <> 'void'",
    ),
    (
        "Queries stacked in CTEs or derived tables (a latest row per key then aggregated, a window over another "
        "window's result, over groups or over a join, an aggregate of an aggregating CTE, DISTINCT in a CTE, "
        "UNION / UNION ALL aggregated) whose every window, GROUP BY, DISTINCT and set operation partitions by the "
        "same column, every table joined (inner or LEFT) on it or matched by a column to a table that is (a lookup, "
        "read whole): the query is kept as written and each partition a change touches is recomputed from the tables' "
        "rows of it (their logs must carry that column)",
        "with latest as (select *, row_number() over (partition by customer_id, product_id order by ordered_at desc) "
        "as rn from shop.orders) select customer_id, count(*) as products, sum(amount) as spent from latest "
        "where rn = 1 group by customer_id",
    ),
    (
        "... the partition column selected by no query above the one that reads it (stored hidden, selected up "
        "through the CTEs and derived tables between, a grouped one by its group key)",
        "with ranked as (select o.order_id, c.country, row_number() over (partition by o.customer_id order by "
        "o.amount desc, o.order_id) as position from shop.orders o left join shop.customers c on c.customer_id = "
        "o.customer_id) select * from ranked",
    ),
    (
        "... over several tables joined on the partition column (an aggregating CTE joined back to its key's table, "
        "its key not selected)",
        "with totals as (select customer_id, sum(amount) as spent from shop.orders group by customer_id) select c.name, "
        "t.spent from shop.customers c join totals t on t.customer_id = c.customer_id",
    ),
    (
        "... grouped by several columns, some of which a table joined on the others lacks (partitioned by those every "
        "table has), and GROUP BY ALL",
        "with activity as (select customer_id, amount from shop.orders union all select customer_id, 0 from "
        "shop.customers) select c.customer_id, c.name, count(a.customer_id) as events, sum(a.amount) as spent "
        "from shop.customers c left join activity a on a.customer_id = c.customer_id group by all",
    ),
    (
        "... UNION, INTERSECT, EXCEPT (partitioned by the columns they select), FULL OUTER JOIN grouped by "
        "COALESCE of its key's sides or joined USING it (chains of them)",
        "select coalesce(o.customer_id, c.customer_id) as customer_id, count(o.order_id) as orders from shop.orders o "
        "full outer join shop.customers c on o.customer_id = c.customer_id group by coalesce(o.customer_id, "
        "c.customer_id)",
    ),
    (
        "... and outer joins the join classes refuse (a filter on the null-supplying side, a CTE that joins on "
        "either side): nothing partitions the rows, so a table's key does, every other table joined on it or by "
        "its own key",
        "select o.order_id, c.name from shop.orders o left join shop.customers c on o.customer_id = c.customer_id "
        "where c.country = 'NL' or c.country is null",
    ),
    (
        "... grouped or windowed by a column of a LEFT JOIN's null-supplying side whose NULL rows the query "
        "discards (a condition no NULL satisfies reads it, here or in the query reading it): read as the inner "
        "join it is (dbt's jaffle shop `customers`: payments per customer joined to the customers)",
        "with customer_payments as (select o.customer_id, sum(p.amount) as paid from shop.payments p "
        "left join shop.orders o on p.order_id = o.order_id group by o.customer_id) "
        "select c.customer_id, c.name, cp.paid from shop.customers c "
        "left join customer_payments cp on c.customer_id = cp.customer_id",
    ),
    (
        "... with semi and anti joins: `EXISTS`, `NOT EXISTS`, `x IN (SELECT ...)`, `x NOT IN (SELECT ...)` "
        "in WHERE or selected (their tables partitioned by the column they are matched on, or lookups matched by "
        "it)",
        "select o.order_id, o.customer_id, count(*) over (partition by o.customer_id) as orders from shop.orders o "
        "where exists (select 1 from shop.products p where p.product_id = o.product_id and p.name like 'A%')",
    ),
    (
        "... with lookups (orders ranked per customer, each with its product's name)",
        "select o.order_id, o.customer_id, p.name, row_number() over (partition by o.customer_id order by o.amount desc, "
        "o.order_id) as position from shop.orders o join shop.products p on p.product_id = o.product_id",
    ),
    (
        "... with lookups windowed or grouped in a CTE by the column matching them (customers ranked per country, "
        "with their spend)",
        "with spend as (select customer_id, sum(amount) as spent from shop.orders group by customer_id) select "
        "c.customer_id, s.spent, rank() over (partition by c.country order by s.spent desc, c.customer_id) as place "
        "from shop.customers c join spend s on s.customer_id = c.customer_id",
    ),
    (
        "... with scalar subqueries correlated by equalities (an aggregate per row's key, a value looked up)",
        "select c.customer_id, (select sum(o.amount) from shop.orders o where o.customer_id = c.customer_id) as spent "
        "from shop.customers c",
    ),
    (
        "`LATERAL VIEW` of a generator (`explode`, `posexplode`, `inline`, `stack`, `json_tuple`, their `OUTER` "
        "forms), or one as a SELECT column named with `AS`: the rows generated from each row recomputed with it",
        "select o.order_id, t.tag from shop.orders o lateral view explode(split(o.status, ',')) t as tag",
    ),
    (
        "Filters of one table by the current date or time (`current_date()`, `current_timestamp()`, `now()`; fixed "
        "once per run; in WHERE, or in an outer join's ON as a filter of its null-supplying table; a HAVING comparing a MAX or MIN of one "
        "table's values with it): every view class applies the rows the time moved across as changes; a query that reads the time "
        "elsewhere (selected, in a condition on two tables, another HAVING, a window) is recomputed by a run after it moved",
        "select order_id, amount from shop.orders where ordered_at > current_date() - interval 30 days",
    ),
    (
        "ORDER BY inside a CTE or subquery without LIMIT (ignored: it orders nothing the view keeps)",
        "with recent as (select * from shop.orders order by ordered_at desc) select order_id, amount from recent",
    ),
    (
        "ORDER BY of the outermost query without LIMIT (ignored, as Oracle ignores a materialized view's ORDER BY "
        "when it refreshes: a table keeps no order; explain says so; sort when reading the view)",
        "select customer_id, count(*) as orders from shop.orders group by customer_id order by orders desc",
    ),
    (
        "Queries no one view maintains, whose CTEs that aggregate, rank or window can each be one (keyed by their "
        "group keys, their PARTITION BY, the key of the table they read), with the query over them: maintained "
        "in steps, each CTE an internal state refreshed first ([in steps](views/in-steps.md))",
        "with country_totals as (select c.country, sum(o.amount) as spent from shop.orders o join shop.customers c "
        "on c.customer_id = o.customer_id group by c.country) select o.order_id, t.country from shop.orders o "
        "join country_totals t on t.spent > o.amount",
    ),
    (
        "The same with the latest row per key of a join, or a UNION ALL (each branch keyed by its own key), in a "
        "CTE or a subquery in FROM",
        "select l.amount, count(*) as customers from (select customer_id, name, amount from (select o.customer_id, "
        "c.name, o.amount, row_number() over (partition by o.customer_id order by o.ordered_at desc, o.order_id desc) "
        "as rn from shop.orders o left join shop.customers c on o.customer_id = c.customer_id) numbered where rn = 1) l "
        "group by l.amount",
    ),
    (
        "Grouping, windows or DISTINCT over a join no one view maintains (a FULL OUTER JOIN grouped by something "
        "else than its key, in the query or a CTE): the join an internal state of the columns read, keyed by its "
        "tables' keys, and the query over it",
        "select o.status, c.country, count(*) as n, sum(o.amount) as amount from shop.orders o full outer join "
        "shop.customers c on o.customer_id = c.customer_id group by o.status, c.country",
    ),
]
REFUSED = [
    (
        "Window functions without PARTITION BY (or without one column every window, GROUP BY and DISTINCT of the "
        "query partitions by), or over a join",
        "select order_id, lag(amount) over (order by ordered_at) as previous_amount from shop.orders",
    ),
    ("Non-deterministic functions", "select order_id, rand() as r from shop.orders"),
    (
        "UNION, INTERSECT, EXCEPT of computed columns only (of columns of the tables, they are partitioned by them)",
        "select upper(status) as s from shop.orders union select upper(name) from shop.customers",
    ),
    (
        "Scalar subqueries not correlated by an equality; IN and EXISTS where no column partitions the query",
        "select order_id, amount - (select avg(amount) from shop.orders) as above_average from shop.orders",
    ),
    (
        "Aggregates whose answer depends on the order Spark reads the rows in",
        "select customer_id, max_by(order_id, amount) as biggest_order from shop.orders group by customer_id",
    ),
    (
        "COLLECT_LIST / COLLECT_SET of MAP values left unsorted (Spark cannot order maps: the collection's order is "
        "the order Spark reads the rows in)",
        "select customer_id, collect_list(map(status, amount)) as by_status from shop.orders group by customer_id",
    ),
    (
        "A CTE that aggregates without GROUP BY (one row, and no key a table of its own could be kept by), "
        "joined to more tables",
        "with totals as (select sum(o.amount) as spent from shop.orders o) select o.order_id, t.spent "
        "from shop.orders o join totals t on t.spent > o.amount",
    ),
    (
        "A CTE that joins, on either side of an outer join after the first FROM item (unless every table is matched "
        "by a column to one table's key, directly or through the others)",
        "with order_customers as (select o.order_id, o.product_id, c.country from shop.orders o join shop.customers c "
        "on o.customer_id = c.customer_id) select p.product_id, oc.order_id from shop.products p left join "
        "order_customers oc on oc.country like p.name",
    ),
    (
        "UNION ALL under an aggregate or a join, unless they partition its rows by a column of every branch",
        "with unioned as (select customer_id, amount from shop.orders union all select customer_id, 0 from "
        "shop.customers) select amount, count(*) as n from unioned group by amount",
    ),
    ("LIMIT", "select order_id from shop.orders limit 10"),
]

MACRO = re.compile(r"\{%-?\s*(macro|test)\s+([a-z][a-z0-9_]*)\s*\(([^)]*)\)")


def public_macros() -> dict[str, str]:
    """Each public operation or test macro, by name, with its arguments as written."""
    found = {}
    for path in sorted((REPO / "macros").glob("*/*.sql")):
        if path.parent.name not in ("operations", "tests"):
            continue
        for _, name, arguments in MACRO.findall(path.read_text(encoding="utf-8")):
            if not name.startswith("_"):
                found[name] = ", ".join(a.strip() for a in arguments.split(",") if a.strip())
    return found


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def keys_table(keys) -> list[str]:
    return table(
        ("key", "values", "default", "meaning"), [(f"`{k.name}`", k.values, k.default, k.meaning) for k in keys]
    )


def cli_lines() -> list[str]:
    from dbt_incremental_mv.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    helps = {choice.dest: choice.help for choice in commands._choices_actions}  # noqa: SLF001
    lines = []
    for name, sub in commands.choices.items():
        lines += ["", f"**`dbt-incremental-mv {name}`**: {helps.get(name, '')}."]
        options = [a for a in sub._actions if a.option_strings and a.dest != "help"]  # noqa: SLF001
        lines += [""] if options else []
        for option in options:
            lines.append(f"- `{', '.join(option.option_strings)}`: {option.help}")
    return lines


def reference() -> str:
    from dbt_incremental_mv import environment
    from dbt_incremental_mv.adapter.connections import PROFILE_KEYS
    from dbt_incremental_mv.config import MODEL_CONFIGS
    from dbt_incremental_mv.logs.contract import LOG_KEYS

    macros = public_macros()
    undocumented = sorted(set(macros) - set(OPERATIONS))
    stale = sorted(set(OPERATIONS) - set(macros))
    if undocumented or stale:
        raise SystemExit(f"scripts/gen_docs.py OPERATIONS: undocumented {undocumented}, no longer a macro {stale}")
    lines = [
        "# Reference",
        "",
        "<!-- Generated by scripts/gen_docs.py from the code's definitions; edit those, then run it. -->",
        "",
        "Every key the plugin reads, with its values and default. A bad value fails the model (or the run)",
        "before anything is created, with a message naming the key, the value and the values allowed.",
        "",
        "## Model configs",
        "",
        "Set in a model's `{{ config(...) }}`, its YAML `config:` block, or project-wide under `models:` in",
        "`dbt_project.yml` (`+refresh_method: fast`). The materialization is `materialized='fast_refresh'`.",
        "",
        *keys_table(MODEL_CONFIGS),
        "",
        "## Change logs: `meta.mv_log`",
        "",
        "A change log is a dbt source table whose `meta` has an `mv_log` block (see [Change logs](change-logs.md)):",
        "",
        "```yaml",
        "sources:",
        "  - name: change_logs",
        "    schema: shop",
        "    tables:",
        "      - name: mlog_orders",
        "        meta:",
        "          mv_log: {master: orders, key: [order_id], capture: true}",
        "```",
        "",
        *table(("key", "meaning"), [(f"`{name}`", meaning) for name, meaning in LOG_KEYS.items()]),
        "",
        "An incremental model that is a master can write its own log: `incremental_strategy='logged_merge'`",
        "with `unique_key` (dbt's `merge`, plus the log rows, committed with it).",
        "",
        "## Profile",
        "",
        "The keys this plugin adds or gives a meaning; dbt-spark's others (`host`, `port`, `schema`,",
        "`threads`, ...) keep their meaning (see [Profiles](profiles.md)).",
        "",
        *keys_table(PROFILE_KEYS),
        "",
        "## Environment variables",
        "",
        *table(
            ("variable", "default", "meaning"),
            [(f"`{v.name}`", v.default, v.meaning) for v in environment.USER_FACING],
        ),
        "",
        "## Run-operations and tests",
        "",
        *table(
            ("macro", "arguments", "what it does", "example"),
            [
                (f"`{name}`", f"`{macros[name]}`" if macros[name] else "none", text, f"`{example}`")
                for name, (text, example) in OPERATIONS.items()
            ],
        ),
        "",
        "## Command line",
        "",
        "Helpers around the plugin, installed with it (not needed for `dbt` commands).",
        *cli_lines(),
        "",
    ]
    return "\n".join(lines)


def analysed(sql: str) -> tuple[str, str]:
    """(the view class, or "refused"; the class's name or the refusal message) of one example."""
    from dbt_incremental_mv.analysis.analyze import analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, sql_reads_clock
    from dbt_incremental_mv.analysis.errors import UnsupportedViewError
    from dbt_incremental_mv.analysis.model import MasterTable
    from dbt_incremental_mv.analysis.states import split_into_states

    masters = {
        f"shop.{name}": MasterTable(f"shop.{name}", columns, key) for name, (columns, key) in EXAMPLE_MASTERS.items()
    }
    clock = Clock.of("2026-12-01 09:00:00")  # a run's time, as a refresh reads it
    try:
        definition = analyze_view(sql, masters, clock)
        return "maintained", definition.view_class.value.replace("_", " ")
    except UnsupportedViewError as refusal:
        # maintained in steps when it splits into states (refresh/units.py; not when it reads the clock)
        split = split_into_states(sql, masters) if not sql_reads_clock(sql) else None
        if split is not None:
            states = ", ".join(f"{s.name}: {s.view_class.value.replace('_', ' ')}" for s in split.states)
            return "maintained", f"in steps ({states}; then {split.view_class.value.replace('_', ' ')})"
        return "refused", str(refusal)


def supported_sql() -> str:
    lines = [
        "# Supported SQL",
        "",
        "<!-- Generated by scripts/gen_docs.py: each example is analysed as the materialization analyses a",
        "model; the class and the messages below are the analysis's own output. -->",
        "",
        "A `fast_refresh` model's compiled SQL is analysed before anything runs. A maintainable query is",
        "refreshed incrementally by its view class ([join](views/join.md), [outer join](views/outer-join.md),",
        "[aggregate](views/aggregate.md), [UNION ALL](views/union-all.md)), or in steps when its CTEs can be",
        "views of their own ([in steps](views/in-steps.md)); any other is refused with the",
        "construct quoted and what to change. With `refresh_method='force'` (the default) a refused model is",
        "rebuilt in full on every run; with `fast` it fails. `dbt run-operation explain_fast_refresh` shows",
        "the analysis of any model without running it.",
        "",
        "Models a view `ref()`s are its masters (each with a change log), except ephemeral models: dbt",
        "inlines them as CTEs, so the tables they read are the masters.",
        "",
        "The examples read `shop.orders` (order_id, customer_id, product_id, amount, status, ordered_at),",
        "`shop.customers` (customer_id, name, country), `shop.products` (product_id, name, price) and",
        "`shop.prices` (product_id, valid_from, valid_to, price).",
        "",
        "## Maintained",
        "",
    ]
    rows = []
    for what, sql in MAINTAINED:
        outcome, detail = analysed(sql)
        if outcome != "maintained":
            raise SystemExit(f"scripts/gen_docs.py: the maintained example {what!r} is refused: {detail}")
        rows.append((what, f"`{sql}`", detail))
    lines += table(("construct", "example", "view class"), rows)
    lines += ["", "## Refused, with the message you see", ""]
    for what, sql in REFUSED:
        outcome, detail = analysed(sql)
        if outcome != "refused":
            raise SystemExit(f"scripts/gen_docs.py: the refused example {what!r} is maintained ({detail})")
        lines += [f"**{what}**", "", "```sql", sql, "```", "", "```", detail, "```", ""]
    return "\n".join(lines)


PAGES = {REFERENCE: reference, SUPPORTED_SQL: supported_sql}


def main(argv: list[str]) -> int:
    stale = []
    for path, render in PAGES.items():
        text = render()
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.relative_to(REPO))
            continue
        path.write_text(text, encoding="utf-8")
        print(path)
    if stale:
        print(f"out of date: {', '.join(map(str, stale))}: run .venv/bin/python scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
