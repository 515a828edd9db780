"""The benchmark's shop: masters, views and change workload, as plain SQL text.

Nothing here talks to Spark: ``spark_steps.py`` runs this SQL in its own process and
``bench.py`` writes the views into dbt projects.

Masters (schema ``shop``), generated from ``range(n)`` with deterministic hashes:

- ``orders`` (the fact, ``scale`` rows): ~1% without customer (NULL ``customer_id``, guest
  checkout) and ~1% referencing a customer id that does not exist (yet), so ~2% of orders have
  no matching customer; ~1% without ``amount``; dates grow with the order id;
- ``customers`` (``scale / 10``): ~0.5% without ``country``;
- ``products`` (``--products``, 10,000 by default);
- ``order_lines`` (optional, ~2 per order, 1 to 3): ~0.5% without ``product_id``.

The change workload of one point changes a fraction of the orders (40% amount and status updates,
20% join-key updates of ``customer_id`` and ``product_id``, 20% deletes, 20% inserts), a few
customers (updated, deleted, inserted: new customers take the dangling ids some orders already
reference) and products, and as many order lines as orders. One SQL statement per kind and
master, each one master commit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SCHEMA = "shop"
FACT = "orders"  # what --scale and --changed count
# Run before the models of every dbt command (an eager statement: it runs a Spark job), so that
# the first model does not pay the JVM's first-query warm-up alone.
WARM_UP = f"cache table bench_warm_up as select country, count(*) as n from {SCHEMA}.customers group by country"
COUNTRIES = ("DE", "FR", "IT", "ES", "NL", "PL", "SE", "PT", "AT", "BE")
STATUSES = ("new", "paid", "shipped", "delivered", "returned", "cancelled")
DAYS = 1500  # order dates span about four years

# Shares of the changed orders; changed order lines follow the same shares.
SHARES = {"updates": 0.4, "key_updates": 0.2, "deletes": 0.2, "inserts": 0.2}
CUSTOMER_UPDATES, CUSTOMER_DELETES, CUSTOMER_INSERTS = 20, 5, 5
PRODUCT_UPDATES = 10
INSERT_FILES = 1  # the inserts of one change: one data file, as one ingestion batch writes


# ---------------------------------------------------------------------- masters
@dataclass(frozen=True)
class Master:
    name: str
    key: tuple[str, ...]
    columns: str  # DDL column list


# The masters a change touches a few rows of, each row joining many of the facts' (--no-dimension-changes).
DIMENSIONS = ("customers", "products")
MASTERS = {
    "orders": Master("orders", ("order_id",),
                     "order_id bigint, customer_id bigint, product_id bigint, order_date date, status string, "
                     "amount decimal(12,2)"),
    "customers": Master("customers", ("customer_id",),
                        "customer_id bigint, name string, country string, segment string"),
    "products": Master("products", ("product_id",),
                       "product_id bigint, name string, category string, price decimal(10,2)"),
    "order_lines": Master("order_lines", ("order_id", "line_no"),
                          "order_id bigint, line_no int, product_id bigint, quantity int, unit_price decimal(10,2)"),
}


@dataclass(frozen=True)
class Sizes:
    """Row counts of a generated shop. ``scale`` also fixes the order dates' spread."""

    scale: int
    products: int = 10_000
    lines: bool = True
    files: int = 8  # data files per master (``range``'s partitions)

    @property
    def customers(self) -> int:
        return max(self.scale // 10, 10)

    @property
    def dangling(self) -> int:
        """Customer ids past the last customer that orders reference (no such customer yet)."""
        return max(self.customers // 100, 1)

    @property
    def product_count(self) -> int:
        return max(min(self.products, self.scale), 1)

    @property
    def masters(self) -> tuple[str, ...]:
        return ("orders", "customers", "products", "order_lines") if self.lines else ("orders", "customers", "products")


def size_options(args) -> dict:
    """The ``Sizes`` fields that come from the command line besides the scale."""
    return {"products": args.products, "lines": not args.no_lines, "files": args.files}


def current_state(first, s: Sizes) -> "Current":
    """What the change workload reads first; ``first(sql)`` runs a query and returns its first row."""
    orders, max_order = first(f"select count(*), max(order_id) from {SCHEMA}.orders")
    customers, max_customer = first(f"select count(*), max(customer_id) from {SCHEMA}.customers")
    lines = first(f"select count(*) from {SCHEMA}.order_lines")[0] if s.lines else 0
    return Current(orders=orders, max_order_id=max_order, customers=customers, max_customer_id=max_customer,
                   lines=lines)


def table_properties(master_mode: str, master_format: int = 2) -> str:
    """How row-level changes are written: copy-on-write (Iceberg's default) or merge-on-read;
    the Iceberg format version (3: row lineage, deletion vectors)."""
    mode = "copy-on-write" if master_mode == "cow" else "merge-on-read"
    props = [f"'format-version'='{master_format}'"] + [f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge")]
    return f"tblproperties ({', '.join(props)})"


def create_master(name: str, master_mode: str, master_format: int = 2, schema: str = SCHEMA,
                  masters: dict | None = None) -> str:
    columns = (masters or MASTERS)[name].columns
    return f"create table {schema}.{name} ({columns}) using iceberg {table_properties(master_mode, master_format)}"


def _pick(options: tuple[str, ...], hashed: str) -> str:
    array = ", ".join(f"'{o}'" for o in options)
    return f"element_at(array({array}), cast(pmod({hashed}, {len(options)}) as int) + 1)"


def customers_select(s: Sizes, first: int, count: int, files: int | None = None) -> str:
    return (
        f"select id as customer_id, concat('customer ', id) as name,\n"
        f"  case when pmod(hash(id, 11), 200) = 0 then null else {_pick(COUNTRIES, 'hash(id, 13)')} end as country,\n"
        f"  {_pick(('consumer', 'business', 'public'), 'id')} as segment\n"
        f"from range({first}, {first + count}, 1, {files or s.files})"
    )


def products_select(s: Sizes) -> str:
    return (
        "select id as product_id, concat('product ', id) as name,\n"
        "  concat('category ', pmod(hash(id, 19), 20)) as category,\n"
        "  cast(pmod(hash(id, 21), 50000) / 100 + 1 as decimal(10,2)) as price\n"
        f"from range(0, {s.product_count}, 1, 2)"
    )


def orders_select(s: Sizes, first: int, count: int, files: int | None = None) -> str:
    return (
        "select id as order_id,\n"
        f"  case when pmod(hash(id, 1), 100) = 0 then null else pmod(hash(id, 17), {s.customers + s.dangling}) end"
        " as customer_id,\n"
        f"  pmod(hash(id, 23), {s.product_count}) as product_id,\n"
        f"  date_add(date '2020-01-01', cast(id * {DAYS} div {s.scale} as int)) as order_date,\n"
        f"  {_pick(STATUSES, 'hash(id, 5)')} as status,\n"
        "  case when pmod(hash(id, 7), 100) = 0 then null"
        " else cast(pmod(hash(id, 3), 100000) / 100 as decimal(12,2)) end as amount\n"
        f"from range({first}, {first + count}, 1, {files or s.files})"
    )


def order_lines_select(s: Sizes, first_order: int, orders: int, files: int | None = None) -> str:
    """1 to 3 lines (2 on average) for each of the orders ``first_order`` .. ``+ orders``."""
    return (
        "select id div 3 as order_id, cast(pmod(id, 3) + 1 as int) as line_no,\n"
        f"  case when pmod(hash(id, 47), 200) = 0 then null else pmod(hash(id, 37), {s.product_count}) end"
        " as product_id,\n"
        "  cast(pmod(hash(id, 41), 5) + 1 as int) as quantity,\n"
        "  cast(pmod(hash(id, 43), 20000) / 100 + 1 as decimal(10,2)) as unit_price\n"
        f"from range({3 * first_order}, {3 * (first_order + orders)}, 1, {files or s.files})\n"
        "where pmod(id, 3) < 1 + pmod(hash(id div 3, 31), 3)"
    )


def generate_statements(s: Sizes, master_mode: str, master_format: int = 2) -> list[tuple[str, str]]:
    """(master, SQL) to create and fill every master."""
    fills = {
        "customers": customers_select(s, 0, s.customers),
        "products": products_select(s),
        "orders": orders_select(s, 0, s.scale),
        "order_lines": order_lines_select(s, 0, s.scale),
    }
    out = [("shop", f"create namespace if not exists {SCHEMA}")]
    for name in s.masters:
        out.append((name, create_master(name, master_mode, master_format)))
        out.append((name, f"insert into {SCHEMA}.{name}\n{fills[name]}"))
    return out


# ---------------------------------------------------------------------- views
@dataclass(frozen=True)
class View:
    name: str
    kind: str  # the view class
    masters: tuple[str, ...]  # tables of the dataset, or views of this list (a view over a view)
    sql: str  # the defining query; masters as {orders}, {customers}, ...
    key: tuple[str, ...] = ()  # its unique key, when another view reads it (the key of its change log)
    config: str = ""  # model configs of its own (``indexed_state=true``), after the project's

    def query(self, **tables: str) -> str:
        return self.sql.format(**tables)


RETURNED_ORDERS = (
    "select o.order_id as id, o.order_date as day, o.amount, 'returned order' as kind\n"
    "from {orders} o\nwhere o.status = 'returned'"
)
CUSTOMER_TOTALS = (
    "select c.customer_id, max(o.order_date) as last_day, sum(o.amount) as amount, 'customer total' as kind\n"
    "from {orders} o\njoin {customers} c on o.customer_id = c.customer_id\ngroup by c.customer_id"
)

VIEWS = (
    View("shipped_orders", "filter", ("orders",),
         "select order_id, customer_id, order_date, amount\nfrom {orders}\nwhere status = 'shipped'",
         key=("order_id",)),
    # a view over a view: its master is shipped_orders, whose change log is captured from its history
    View("shipped_by_month", "stacked", ("shipped_orders",),
         "select trunc(order_date, 'MM') as month, count(*) as order_count, sum(amount) as revenue\n"
         "from {shipped_orders}\ngroup by trunc(order_date, 'MM')"),
    View("order_details", "join3", ("orders", "customers", "products"),
         "select o.order_id, o.order_date, o.status, o.amount, c.customer_id, c.name as customer_name, c.country,\n"
         "       p.product_id, p.name as product_name, p.category\n"
         "from {orders} o\njoin {customers} c on o.customer_id = c.customer_id\n"
         "join {products} p on o.product_id = p.product_id"),
    View("customer_orders", "outer", ("customers", "orders"),
         "select c.customer_id, c.name, c.country, o.order_id, o.status, o.amount\n"
         "from {customers} c\nleft join {orders} o on o.customer_id = c.customer_id"),
    View("daily_sales", "agg", ("orders",),
         "select order_date, status, count(*) as order_count, count(amount) as priced_orders,\n"
         "       sum(amount) as revenue, avg(amount) as avg_amount\n"
         "from {orders}\ngroup by order_date, status"),
    View("revenue_by_country", "agg-join", ("orders", "customers"),
         "select c.country, count(*) as order_count, sum(o.amount) as revenue, avg(o.amount) as avg_amount\n"
         "from {orders} o\njoin {customers} c on o.customer_id = c.customer_id\ngroup by c.country"),
    View("orders_by_segment", "agg-outer", ("customers", "orders"),
         "select c.segment, count(*) as customer_rows, count(o.order_id) as order_count, sum(o.amount) as revenue,\n"
         "       avg(o.amount) as avg_amount\n"
         "from {customers} c\nleft join {orders} o on o.customer_id = c.customer_id\ngroup by c.segment"),
    View("frequent_customers", "having", ("orders",),
         "select customer_id, count(*) as order_count, sum(amount) as revenue\n"
         "from {orders}\ngroup by customer_id\nhaving count(*) >= 12"),
    View("amount_range_by_customer", "minmax", ("orders",),
         "select customer_id, count(*) as order_count, min(amount) as min_amount, max(amount) as max_amount\n"
         "from {orders}\ngroup by customer_id"),
    # UNION ALL: a filter branch and an aggregate branch (labelled by constants), one DELETE and one
    # INSERT; its two branches are also views of their own (what the union costs against them)
    View("order_events", "union", ("orders", "customers"), f"{RETURNED_ORDERS}\nunion all\n{CUSTOMER_TOTALS}"),
    View("returned_orders", "filter", ("orders",), RETURNED_ORDERS),
    View("customer_totals", "agg-join", ("orders", "customers"), CUSTOMER_TOTALS),
    # the latest order of each customer (a ranking window filtered on): its partitions recomputed
    View("latest_order_per_customer", "ranked", ("orders",),
         "select * from (\n  select o.*, row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) as rn\n"
         "  from {orders} o\n) as latest\nwhere rn = 1"),
    # each order with its customer's previous order and running total (windows partitioned by
    # customer): the partitions of the changed orders' customers recomputed
    View("order_history", "windowed", ("orders",),
         "select order_id, customer_id, order_date, amount,\n"
         "       lag(order_date) over (partition by customer_id order by order_date, order_id) as previous_order_date,\n"
         "       sum(amount) over (partition by customer_id order by order_date, order_id\n"
         "                         rows between unbounded preceding and current row) as customer_running_total\n"
         "from {orders}"),
    # dbt's dedup staging, then aggregated (a stack the other classes refuse): the latest order of
    # each customer and day, per customer; the customers of the changed orders recomputed
    View("customer_daily_latest", "per-partition", ("orders",),
         "with latest as (\n  select *, row_number() over (partition by customer_id, order_date order by amount desc) as rn\n"
         "  from {orders}\n)\nselect customer_id, count(*) as days, sum(amount) as latest_amount\n"
         "from latest\nwhere rn = 1\ngroup by customer_id"),
    # the same over the orders of customers with a known country (a semi join): the customers
    # partitioned by customer_id like the orders, a changed customer recomputing itself
    View("known_customer_daily_latest", "per-partition-exists", ("orders", "customers"),
         "with latest as (\n  select o.*, row_number() over (partition by o.customer_id, o.order_date order by o.amount desc) as rn\n"
         "  from {orders} o\n  where exists (select 1 from {customers} c where c.customer_id = o.customer_id "
         "and c.country is not null)\n)\nselect customer_id, count(*) as days, sum(amount) as latest_amount\n"
         "from latest\nwhere rn = 1\ngroup by customer_id"),
    # countries ranked per day by their orders: the customers a lookup (matched by customer_id to the
    # orders partitioned by day), a changed customer recomputing every day of its orders
    View("daily_country_ranks", "per-partition-lookup", ("orders", "customers"),
         "select o.order_date, c.country, count(*) as orders,\n"
         "  rank() over (partition by o.order_date order by count(*) desc, c.country) as country_rank\n"
         "from {orders} o\njoin {customers} c on c.customer_id = o.customer_id\ngroup by o.order_date, c.country"),
    # rows generated from each order (a LATERAL VIEW explode: a staging model's unnest): nothing
    # partitions them, so each order is a partition of its own, its rows replaced when it changes
    View("order_status_parts", "per-partition-lateral", ("orders",),
         "select o.order_id, o.customer_id, p.part\n"
         "from {orders} o\nlateral view explode(split(o.status, 'e')) p as part"),
    # each customer's spend by a correlated scalar subquery: customers and orders partitioned by
    # customer_id, a change recomputing the customers it touches
    View("customer_scalar_spend", "per-partition-scalar", ("orders", "customers"),
         "select c.customer_id, c.country,\n"
         "  (select sum(o.amount) from {orders} o where o.customer_id = c.customer_id) as spent\n"
         "from {customers} c"),
    # buyers per day (a COUNT(DISTINCT)): each day a change touches recomputed from the orders of that day
    View("buyers_per_day", "agg-distinct", ("orders",),
         "select o.order_date, count(distinct o.customer_id) as buyers, count(*) as orders\n"
         "from {orders} o\ngroup by o.order_date"),
    # orders per customer joined back to the customers (dbt's usual mart): the aggregate over the
    # LEFT JOIN it equals, a changed order updating its customer's row by its delta
    View("customer_order_stats", "agg-joined-back", ("customers", "orders"),
         "with per_customer as (\n  select customer_id, count(*) as order_count, sum(amount) as revenue\n"
         "  from {orders}\n  group by customer_id\n)\n"
         "select c.customer_id, c.name, c.country, p.order_count, p.revenue\n"
         "from {customers} c\nleft join per_customer p on p.customer_id = c.customer_id"),
    # rolling filters by the clock (a run's time: --clock, else the session's): orders of the last 90
    # days; orders placed up to now; each run reads which rows crossed its time boundary and applies them
    View("recent_orders", "rolling-date", ("orders",),
         "select order_id, customer_id, order_date, amount\nfrom {orders}\n"
         "where order_date >= date_add(current_date(), -90)"),
    View("placed_by_customer", "rolling-time-agg", ("orders",),
         "select customer_id, count(*) as order_count, sum(amount) as revenue\nfrom {orders}\n"
         "where cast(order_date as timestamp) <= current_timestamp()\ngroup by customer_id"),
    # each customer with its orders of the last 30 days (the filter by the date in the LEFT JOIN's ON:
    # a customer without any keeps one null-extended row), and the same counted per customer: the
    # orders the date moved across recompute their customers' slices
    View("customer_recent_orders", "rolling-date-outer", ("customers", "orders"),
         "select c.customer_id, c.name, o.order_id, o.order_date, o.amount\nfrom {customers} c\n"
         "left join {orders} o on o.customer_id = c.customer_id and o.order_date >= date_add(current_date(), -30)"),
    View("recent_spend_by_customer", "rolling-date-outer-agg", ("customers", "orders"),
         "select c.customer_id, count(o.order_id) as recent_orders, sum(o.amount) as recent_spend\nfrom {customers} c\n"
         "left join {orders} o on o.customer_id = c.customer_id and o.order_date >= date_add(current_date(), -30)\n"
         "group by c.customer_id"),
    # the customers active in the last 30 days (HAVING on their latest order's date): the customers
    # of the orders the date moved across re-evaluated
    View("active_customers", "rolling-having", ("orders",),
         "select customer_id, count(*) as order_count, max(order_date) as last_order\nfrom {orders}\n"
         "group by customer_id\nhaving max(order_date) >= date_add(current_date(), -30)"),
    View("line_items", "join3-lines", ("order_lines", "orders", "products"),
         "select l.order_id, l.line_no, l.quantity, l.unit_price, o.order_date, o.status, p.product_id, p.category\n"
         "from {order_lines} l\njoin {orders} o on l.order_id = o.order_id\n"
         "join {products} p on l.product_id = p.product_id"),
    # the jaffle shop's customers: the lines LEFT JOIN their order grouped by the order's customer
    # (lines of no order: a NULL group, which the join to the customers discards), joined to the
    # customers; per partition by customer_id, the lines a lookup through their order
    View("customer_line_totals", "per-partition-null-group", ("order_lines", "orders", "customers"),
         "with customer_lines as (\n  select o.customer_id, count(*) as line_count, sum(l.quantity * l.unit_price) as paid\n"
         "  from {order_lines} l\n  left join {orders} o on l.order_id = o.order_id\n  group by o.customer_id\n)\n"
         "select c.customer_id, c.name, p.line_count, p.paid\n"
         "from {customers} c\nleft join customer_lines p on p.customer_id = c.customer_id"),
    # the latest order of each customer, counted by country and status (a ranked CTE aggregated by
    # another table's column: no one view maintains it): maintained in steps, the latest orders a
    # state of their own (its changed customers recomputed), the counts an aggregate over it
    View("latest_status_by_country", "in-steps", ("orders", "customers"),
         "with latest as (\n  select customer_id, order_id, status, amount from (\n"
         "    select o.customer_id, o.order_id, o.status, o.amount,\n"
         "      row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) as rn\n"
         "    from {orders} o) as ranked\n  where rn = 1\n)\n"
         "select c.country, l.status, count(*) as customers, sum(l.amount) as latest_amount\n"
         "from latest l\njoin {customers} c on l.customer_id = c.customer_id\ngroup by c.country, l.status"),
    # orders and customers full outer joined (orders of no known customer, customers without orders),
    # counted by a column of each side: no one view maintains it, so the join is an internal state
    # (recomputed per customer_id its changes touch), the counts an aggregate over that state's log
    View("status_by_segment_full", "in-steps-full-join", ("orders", "customers"),
         "select o.status, c.segment, count(*) as row_count, count(o.order_id) as order_count,\n"
         "       sum(o.amount) as revenue\n"
         "from {orders} o\nfull outer join {customers} c on o.customer_id = c.customer_id\n"
         "group by o.status, c.segment"),
    View("sales_by_category", "agg-join-lines", ("order_lines", "products"),
         "select p.category, count(*) as line_count, sum(l.quantity) as units,\n"
         "       sum(l.quantity * l.unit_price) as revenue\n"
         "from {order_lines} l\njoin {products} p on l.product_id = p.product_id\ngroup by p.category"),
)


def select_views(names: list[str] | None, lines: bool) -> list[View]:
    """The views to benchmark: ``names`` (all by default), without those on order lines if
    there are none."""
    available = [v for v in VIEWS if lines or "order_lines" not in v.masters]
    if not names:
        return available
    chosen = named_views(VIEWS, names)
    known = {v.name for v in chosen}
    upstream = [m for v in chosen for m in v.masters if m in {w.name for w in VIEWS} and m not in known]
    if upstream:
        raise ValueError(f"view(s) {', '.join(upstream)} must be selected too: other selected views read them")
    missing = [v.name for v in chosen if v not in available]
    if missing:
        raise ValueError(f"view(s) {', '.join(missing)} read order_lines, which --no-lines does not generate")
    return chosen


def named_views(views: tuple[View, ...], names: list[str]) -> list[View]:
    """The views of ``views`` called ``names``, in that order; ValueError naming any unknown."""
    known = {v.name: v for v in views}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown view(s) {', '.join(unknown)}; views: {', '.join(known)}")
    return [known[n] for n in names]


# ---------------------------------------------------------------------- change workload
@dataclass(frozen=True)
class Change:
    """One DML statement on one master, and which of its rows it touches.

    ``rows`` selects the touched rows by key, before and after the statement (keys are never
    updated): what a CDC feed logs as before images (``D``, read at the snapshot before the
    statement) and after images (``I``).
    """

    kind: str
    master: str
    sql: str
    rows: str  # a predicate on the master's key columns
    images: str = "DI"  # which images exist: "D" for deletes, "I" for inserts


@dataclass
class Current:
    """What the change workload reads from the masters before changing them."""

    orders: int
    max_order_id: int
    customers: int
    max_customer_id: int
    lines: int = 0


@dataclass(frozen=True)
class Picker:
    """Picks disjoint sets of about ``count`` existing rows of a master, by a rank of their key.

    ``clustered``: the newest keys (rank = distance from the highest key); ``oldest``: the oldest
    keys (rank = the key); ``scattered``: a hash of the key salted per change, so the rows are
    spread over every data file (the count of a set then varies like a binomial). Keys are dense up to ``max_key`` but for deleted rows:
    each set's rank range is widened by ``(max_key + 1) / rows`` so it holds ``count`` rows.
    """

    key: str  # the key as an SQL expression
    max_key: int
    rows: int
    spread: str
    salt: int

    def rank(self) -> str:
        modulus = self.max_key + 1
        if self.spread == "clustered":
            return f"({self.max_key} - {self.key})"
        if self.spread == "oldest":
            return f"{self.key}"
        return f"pmod(xxhash64({self.key}, {self.salt}), {modulus})"

    def sets(self, counts: dict[str, int]) -> dict[str, str]:
        """Per kind, a predicate selecting about ``counts[kind]`` rows; the sets are disjoint."""
        stretch = (self.max_key + 1) / max(self.rows, 1)
        rank, low, out = self.rank(), 0, {}
        for kind, count in counts.items():
            high = low + max(1, math.ceil(count * stretch))
            out[kind] = f"{rank} >= {low} and {rank} < {high}"
            low = high
        return out


def _share(total: int, share: float) -> int:
    return max(1, round(total * share))


def change_plan(s: Sizes, cur: Current, changed_orders: int, spread: str, salt: int) -> list[Change]:
    """The statements of one change: ``changed_orders`` orders (and as many lines), a few
    customers and products."""
    changes = _order_changes(s, cur, changed_orders, spread, salt)
    changes += _customer_changes(s, cur, spread, salt)
    changes += _product_changes(s, spread, salt)
    if s.lines:
        changes += _line_changes(s, cur, changed_orders, spread, salt)
    return changes


def _order_changes(s: Sizes, cur: Current, changed: int, spread: str, salt: int) -> list[Change]:
    picker = Picker("order_id", cur.max_order_id, cur.orders, spread, salt)
    rows = picker.sets({kind: _share(changed, share) for kind, share in SHARES.items() if kind != "inserts"})
    first, count = cur.max_order_id + 1, _share(changed, SHARES["inserts"])
    t = f"{SCHEMA}.orders"
    status = ("case status when 'new' then 'paid' when 'paid' then 'shipped' when 'shipped' then 'delivered' "
              "else status end")
    customer = f"pmod(customer_id + 1 + pmod(order_id, 5), {s.customers + s.dangling})"
    return [
        Change("updates", "orders", f"update {t} set status = {status}, amount = amount + 1\nwhere {rows['updates']}",
               rows["updates"]),
        Change("key_updates", "orders", f"update {t} set customer_id = {customer}, product_id = "
               f"pmod(product_id + 1, {s.product_count})\nwhere {rows['key_updates']}", rows["key_updates"]),
        Change("deletes", "orders", f"delete from {t}\nwhere {rows['deletes']}", rows["deletes"], "D"),
        Change("inserts", "orders", f"insert into {t}\n{orders_select(s, first, count, INSERT_FILES)}",
               f"order_id >= {first} and order_id < {first + count}", "I"),
    ]


def _customer_changes(s: Sizes, cur: Current, spread: str, salt: int) -> list[Change]:
    picker = Picker("customer_id", cur.max_customer_id, cur.customers, spread, salt)
    rows = picker.sets({"updates": CUSTOMER_UPDATES, "deletes": CUSTOMER_DELETES})
    first = cur.max_customer_id + 1  # at first the dangling ids: orders that reference them start joining
    t = f"{SCHEMA}.customers"
    country = _pick(COUNTRIES, f"hash(customer_id, {salt})")
    return [
        Change("updates", "customers", f"update {t} set country = {country}, "
               f"name = concat('customer ', customer_id, ' v{salt}')\nwhere {rows['updates']}", rows["updates"]),
        Change("deletes", "customers", f"delete from {t}\nwhere {rows['deletes']}", rows["deletes"], "D"),
        Change("inserts", "customers",
               f"insert into {t}\n{customers_select(s, first, CUSTOMER_INSERTS, INSERT_FILES)}",
               f"customer_id >= {first} and customer_id < {first + CUSTOMER_INSERTS}", "I"),
    ]


def _product_changes(s: Sizes, spread: str, salt: int) -> list[Change]:
    picker = Picker("product_id", s.product_count - 1, s.product_count, spread, salt)
    where = picker.sets({"updates": PRODUCT_UPDATES})["updates"]
    return [Change("updates", "products", f"update {SCHEMA}.products set category = concat('category ', "
                   f"pmod(hash(product_id, {salt}), 20)), price = price + 1\nwhere {where}", where)]


def _line_changes(s: Sizes, cur: Current, changed_orders: int, spread: str, salt: int) -> list[Change]:
    """As many lines as orders change: quantity updates and deletes; the new orders get lines."""
    picker = Picker("(order_id * 3 + line_no)", 3 * cur.max_order_id + 3, cur.lines, spread, salt)
    rows = picker.sets({"updates": _share(changed_orders, SHARES["updates"] + SHARES["key_updates"]),
                        "deletes": _share(changed_orders, SHARES["deletes"])})
    first, count = cur.max_order_id + 1, _share(changed_orders, SHARES["inserts"])
    t = f"{SCHEMA}.order_lines"
    return [
        Change("updates", "order_lines", f"update {t} set quantity = quantity + 1\nwhere {rows['updates']}",
               rows["updates"]),
        Change("deletes", "order_lines", f"delete from {t}\nwhere {rows['deletes']}", rows["deletes"], "D"),
        Change("inserts", "order_lines", f"insert into {t}\n{order_lines_select(s, first, count, INSERT_FILES)}",
               f"order_id >= {first} and order_id < {first + count}", "I"),
    ]


def log_name(master: str) -> str:
    return f"mlog_{master}"


def cdc_log_statements(master: str, schema: str = SCHEMA, masters: dict | None = None) -> list[str]:
    """Create an ingestion-written change log (the log contract: every master column, ``_mv_op``,
    ``_mv_commit``, ``_mv_time``; Iceberg format-version 3, as ``create_mv_log`` makes it), and
    commit an empty append to it: the feed has started, nothing changed yet. (A log with no
    snapshot at all makes the views' build fail in its purge step: ``Cannot find snapshot with
    ID 0``.)"""
    log = f"{schema}.{log_name(master)}"
    return [
        f"create table {log} ({(masters or MASTERS)[master].columns}, _mv_op string, _mv_commit bigint, _mv_time timestamp) "
        "using iceberg tblproperties ('format-version'='3', 'write.delete.mode'='copy-on-write')",
        f"insert into {log} select * from {log} where false",
    ]


def cdc_log_insert(change: Change, columns: list[str], before: int, commit: int) -> str:
    return cdc_log_insert_for(SCHEMA, log_name(change.master), change, columns, before, commit)


def cdc_log_insert_for(schema: str, log: str, change: Change, columns: list[str], before: int, commit: int) -> str:
    """What a CDC feed would append to the master's log ``schema.log`` for ``change``: a ``D`` row
    (the values before, read at snapshot ``before``) and/or an ``I`` row (the values after) per
    touched row, with ``_mv_commit`` the master commit (the CDC transaction id)."""
    cols = ", ".join(columns)
    table = f"{schema}.{change.master}"
    parts = []
    if "D" in change.images:
        parts.append(f"select {cols}, 'D', {commit}, current_timestamp() from {table} version as of {before}"
                     f" where {change.rows}")
    if "I" in change.images:
        parts.append(f"select {cols}, 'I', {commit}, current_timestamp() from {table} where {change.rows}")
    union = "\nunion all\n".join(parts)
    return f"insert into {schema}.{log} ({cols}, _mv_op, _mv_commit, _mv_time)\n{union}"
