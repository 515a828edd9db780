"""TPC-H-shaped masters, views and change workload (``bench.py --dataset tpch``), as SQL text.

The same interface as ``shop.py`` (``bench.py`` and ``spark_steps.py`` take either); nothing
here talks to Spark.

Masters (schema ``tpch``), shaped like TPC-H's where it matters to a refresh, generated with
Spark SQL from ``range(n)`` and deterministic hashes (not ``dbgen``'s data, no ``dbgen`` needed):

- ``orders`` (``--scale`` rows; scale factor 1 = 1,500,000): dense keys from 1, order dates
  growing with the key over TPC-H's seven years (dbgen draws them at random: growing dates make
  "the recent orders" a key range, which clustered changes need), ~2% of comments matching
  Q13's ``%special%requests%``;
- ``customer`` (scale / 10: 150,000 at SF 1): as in TPC-H, a customer whose key is a multiple of
  3 has no orders (a third of the customers: the outer join's null-extended rows);
- ``lineitem`` (1 to 7 lines per order, 4 on average: ~6,000,000 at SF 1): parts over 200,000 x
  SF keys, suppliers over 10,000 x SF, extended price = quantity x the part's retail price,
  ship dates 1 to 121 days after the order, return flag and line status from the ship date;
- ``nation`` (25 rows, TPC-H's names).

The change workload of one point, after TPC-H's refresh functions: of ``changed`` orders, 20%
are new orders with their lines (RF1), 20% old orders deleted with their lines (RF2), 40%
updated (status, total price, comment: some move in or out of Q13's outer join) and 20% moved
to another customer; as many line items as orders x 3 updated (quantity, discount, return flag),
a third of them moved to another part (the MIN/MAX view's group key); 20 customers updated
(nation, market segment), 5 deleted, 5 inserted (with no orders). One statement per kind and
master, each one master commit. ``--spread clustered`` changes the ends of the key space, as
TPC-H's refresh functions do: the new orders get the next keys, the deleted orders (and their
lines) are the oldest, the updated ones the newest.
"""

from __future__ import annotations

from dataclasses import dataclass

import shop
from shop import (  # noqa: F401 - log_name: part of the dataset interface
    INSERT_FILES, Change, Current, Master, Picker, View, _pick, _share, cdc_log_insert_for, log_name, named_views,
)

SCHEMA = "tpch"
FACT = "orders"  # what --scale and --changed count
WARM_UP = f"cache table bench_warm_up as select c_nationkey, count(*) as n from {SCHEMA}.customer group by c_nationkey"

NATIONS = ("ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY", "INDIA",
           "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO", "MOZAMBIQUE", "PERU", "CHINA",
           "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA", "UNITED KINGDOM", "UNITED STATES")
NATION_REGIONS = (0, 1, 1, 1, 4, 0, 3, 3, 2, 2, 4, 4, 2, 4, 0, 0, 0, 1, 2, 3, 4, 2, 3, 3, 1)
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
DAYS = 2405  # 1992-01-01 .. 1998-08-02, TPC-H's order dates
CURRENT_DATE = "1995-06-17"  # TPC-H's: lines shipped after it are open ('O'), and not returned ('N')

SHARES = {"updates": 0.4, "key_updates": 0.2, "deletes": 0.2, "inserts": 0.2}
LINE_UPDATES_PER_ORDER = 3  # line items updated per changed order (a third of them change part)
CUSTOMER_UPDATES, CUSTOMER_DELETES, CUSTOMER_INSERTS = 20, 5, 5
# what a customer's update changes: "moves" (its nation and market segment reassigned: it leaves or
# joins a segment's views) or "attributes" (its name and balance: it stays where it is)
CUSTOMER_UPDATE = "moves"

# The masters a change touches a few rows of, each row joining many of the facts' (--no-dimension-changes).
DIMENSIONS = ("customer",)
MASTERS = {
    "lineitem": Master("lineitem", ("l_orderkey", "l_linenumber"),
                       "l_orderkey bigint, l_linenumber int, l_partkey bigint, l_suppkey bigint, "
                       "l_quantity decimal(15,2), l_extendedprice decimal(15,2), l_discount decimal(15,2), "
                       "l_tax decimal(15,2), l_returnflag string, l_linestatus string, l_shipdate date"),
    "orders": Master("orders", ("o_orderkey",),
                     "o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice decimal(15,2), "
                     "o_orderdate date, o_orderpriority string, o_shippriority int, o_comment string"),
    "customer": Master("customer", ("c_custkey",),
                       "c_custkey bigint, c_name string, c_nationkey bigint, c_acctbal decimal(15,2), "
                       "c_mktsegment string"),
    "nation": Master("nation", ("n_nationkey",), "n_nationkey bigint, n_name string, n_regionkey bigint"),
}


@dataclass(frozen=True)
class Sizes:
    """Row counts of a generated TPC-H-shaped database: ``scale`` orders."""

    scale: int
    files: int = 8  # data files per master (``range``'s partitions)

    @property
    def customers(self) -> int:
        return max(self.scale // 10, 30)

    @property
    def parts(self) -> int:
        return max(self.scale * 2 // 15, 10)

    @property
    def suppliers(self) -> int:
        return max(self.scale // 150, 1)

    @property
    def masters(self) -> tuple[str, ...]:
        return tuple(MASTERS)


def size_options(args) -> dict:
    """The ``Sizes`` fields that come from the command line besides the scale."""
    return {"files": args.files}


def create_master(name: str, master_mode: str, master_format: int = 2) -> str:
    return shop.create_master(name, master_mode, master_format, SCHEMA, MASTERS)


def _ordering_customer(s: Sizes, hashed: str) -> str:
    """A customer key that is not a multiple of 3 (TPC-H: those customers never order)."""
    choices = (s.customers // 3) * 2
    return f"(pmod({hashed}, {choices}) div 2) * 3 + pmod(pmod({hashed}, {choices}), 2) + 1"


def customer_select(s: Sizes, first: int, count: int, files: int | None = None) -> str:
    return (
        f"select id as c_custkey, concat('Customer#', lpad(cast(id as string), 9, '0')) as c_name,\n"
        "  pmod(hash(id, 3), 25) as c_nationkey,\n"
        "  cast(pmod(hash(id, 5), 1099999) / 100 - 999.99 as decimal(15,2)) as c_acctbal,\n"
        f"  {_pick(SEGMENTS, 'hash(id, 7)')} as c_mktsegment\n"
        f"from range({first}, {first + count}, 1, {files or s.files})"
    )


def nation_select() -> str:
    rows = ", ".join(f"({key}, '{name}', {region})"
                     for key, (name, region) in enumerate(zip(NATIONS, NATION_REGIONS)))
    return f"select * from values {rows} as t(n_nationkey, n_name, n_regionkey)"


def _order_date(s: Sizes, key: str) -> str:
    return f"date_add(date '1992-01-01', cast({key} * {DAYS} div {s.scale} as int))"


def orders_select(s: Sizes, first: int, count: int, files: int | None = None) -> str:
    return (
        "select id as o_orderkey,\n"
        f"  {_ordering_customer(s, 'hash(id, 17)')} as o_custkey,\n"
        f"  {_pick(('F', 'O', 'P'), 'hash(id, 19)')} as o_orderstatus,\n"
        "  cast(pmod(hash(id, 23), 50000000) / 100 + 850 as decimal(15,2)) as o_totalprice,\n"
        f"  {_order_date(s, 'id')} as o_orderdate,\n"
        f"  {_pick(PRIORITIES, 'hash(id, 29)')} as o_orderpriority,\n"
        "  0 as o_shippriority,\n"
        "  case when pmod(hash(id, 31), 100) < 2 then concat('special requests of order ', id)"
        " else concat('regular order ', id) end as o_comment\n"
        f"from range({first}, {first + count}, 1, {files or s.files})"
    )


def lineitem_select(s: Sizes, first_order: int, orders: int, files: int | None = None) -> str:
    """1 to 7 lines (4 on average) for each of the orders ``first_order`` .. ``+ orders``."""
    return (
        "select l_orderkey, l_linenumber, l_partkey, l_suppkey, l_quantity,\n"
        "  cast(l_quantity * (90000 + pmod(l_partkey div 10, 20001) + 100 * pmod(l_partkey, 1000)) / 100"
        " as decimal(15,2)) as l_extendedprice,\n"
        "  l_discount, l_tax,\n"
        f"  case when l_shipdate > date '{CURRENT_DATE}' then 'N' else {_pick(('R', 'A'), 'hash(id, 59)')} end"
        " as l_returnflag,\n"
        f"  case when l_shipdate > date '{CURRENT_DATE}' then 'O' else 'F' end as l_linestatus,\n"
        "  l_shipdate\n"
        "from (\n"
        "  select id, id div 8 as l_orderkey, cast(pmod(id, 8) as int) as l_linenumber,\n"
        f"    1 + pmod(hash(id, 37), {s.parts}) as l_partkey,\n"
        f"    1 + pmod(hash(id, 39), {s.suppliers}) as l_suppkey,\n"
        "    cast(1 + pmod(hash(id, 41), 50) as decimal(15,2)) as l_quantity,\n"
        "    cast(pmod(hash(id, 43), 11) / 100 as decimal(15,2)) as l_discount,\n"
        "    cast(pmod(hash(id, 47), 9) / 100 as decimal(15,2)) as l_tax,\n"
        f"    date_add({_order_date(s, 'id div 8')}, cast(1 + pmod(hash(id, 53), 121) as int)) as l_shipdate\n"
        f"  from range({8 * first_order}, {8 * (first_order + orders)}, 1, {files or s.files})\n"
        "  where pmod(id, 8) between 1 and 1 + pmod(hash(id div 8, 31), 7)\n"
        ")"
    )


def generate_statements(s: Sizes, master_mode: str, master_format: int = 2) -> list[tuple[str, str]]:
    """(master, SQL) to create and fill every master."""
    fills = {
        "lineitem": lineitem_select(s, 1, s.scale),
        "orders": orders_select(s, 1, s.scale),
        "customer": customer_select(s, 1, s.customers),
        "nation": nation_select(),
    }
    out = [("tpch", f"create namespace if not exists {SCHEMA}")]
    for name in s.masters:
        out.append((name, create_master(name, master_mode, master_format)))
        out.append((name, f"insert into {SCHEMA}.{name}\n{fills[name]}"))
    return out


def current_state(first, s: Sizes) -> Current:
    """What the change workload reads first; ``first(sql)`` runs a query and returns its first row."""
    orders, max_order = first(f"select count(*), max(o_orderkey) from {SCHEMA}.orders")
    customers, max_customer = first(f"select count(*), max(c_custkey) from {SCHEMA}.customer")
    (lines,) = first(f"select count(*) from {SCHEMA}.lineitem")
    return Current(orders=orders, max_order_id=max_order, customers=customers, max_customer_id=max_customer,
                   lines=lines)


# ---------------------------------------------------------------------- views
VIEWS = (
    View("open_lines", "filter", ("lineitem",),
         "select l_orderkey, l_linenumber, l_partkey, l_quantity, l_extendedprice, l_shipdate\n"
         "from {lineitem}\nwhere l_linestatus = 'O'"),
    View("building_order_lines", "join3", ("customer", "orders", "lineitem"),
         "select c.c_custkey, c.c_name, o.o_orderkey, o.o_orderdate, o.o_shippriority, l.l_linenumber,\n"
         "       l.l_extendedprice, l.l_discount\n"
         "from {customer} c\njoin {orders} o on c.c_custkey = o.o_custkey\n"
         "join {lineitem} l on l.l_orderkey = o.o_orderkey\nwhere c.c_mktsegment = 'BUILDING'"),
    # the same view keeping its facts' join sorted by the customer key (indexed_state): a changed
    # customer's orders and lines found by file pruning
    View("building_order_lines_indexed", "join3", ("customer", "orders", "lineitem"),
         "select c.c_custkey, c.c_name, o.o_orderkey, o.o_orderdate, o.o_shippriority, l.l_linenumber,\n"
         "       l.l_extendedprice, l.l_discount\n"
         "from {customer} c\njoin {orders} o on c.c_custkey = o.o_custkey\n"
         "join {lineitem} l on l.l_orderkey = o.o_orderkey\nwhere c.c_mktsegment = 'BUILDING'",
         config="indexed_state=true"),
    View("customer_orders", "outer", ("customer", "orders"),
         "select c.c_custkey, c.c_name, o.o_orderkey, o.o_orderstatus, o.o_totalprice\n"
         "from {customer} c\nleft join {orders} o on o.o_custkey = c.c_custkey"
         " and o.o_comment not like '%special%requests%'"),
    View("pricing_summary", "agg", ("lineitem",),
         "select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty, sum(l_extendedprice) as sum_base_price,\n"
         "       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,\n"
         "       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,\n"
         "       avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price, avg(l_discount) as avg_disc,\n"
         "       count(*) as count_order\n"
         "from {lineitem}\nwhere l_shipdate <= date '1998-09-02'\ngroup by l_returnflag, l_linestatus"),
    View("revenue_by_nation", "agg-join", ("lineitem", "orders", "customer", "nation"),
         "select n.n_name, count(*) as line_count, sum(l.l_extendedprice * (1 - l.l_discount)) as revenue\n"
         "from {lineitem} l\njoin {orders} o on l.l_orderkey = o.o_orderkey\n"
         "join {customer} c on o.o_custkey = c.c_custkey\njoin {nation} n on c.c_nationkey = n.n_nationkey\n"
         "group by n.n_name"),
    View("part_price_range", "minmax", ("lineitem",),
         "select l_partkey, count(*) as line_count, min(l_extendedprice) as min_price,\n"
         "       max(l_extendedprice) as max_price\n"
         "from {lineitem}\ngroup by l_partkey"),
)


def select_views(names: list[str] | None, lines: bool = True) -> list[View]:  # noqa: ARG001 - shop's signature
    return named_views(VIEWS, names) if names else list(VIEWS)


# ---------------------------------------------------------------------- change workload
def change_plan(s: Sizes, cur: Current, changed_orders: int, spread: str, salt: int) -> list[Change]:
    """The statements of one change, in TPC-H's order: new orders and their lines (RF1), updates,
    then old orders' lines and the orders deleted (RF2)."""
    kinds = {kind: _share(changed_orders, share) for kind, share in SHARES.items() if kind != "inserts"}
    orders_rows = Picker("o_orderkey", cur.max_order_id, cur.orders, spread, salt).sets(kinds)
    their_lines = Picker("l_orderkey", cur.max_order_id, cur.orders, spread, salt).sets(kinds)
    if spread == "clustered":  # RF2 deletes old orders: the oldest keys
        deleted = {"deletes": kinds["deletes"]}
        orders_rows["deletes"] = Picker("o_orderkey", cur.max_order_id, cur.orders, "oldest", salt).sets(deleted)["deletes"]
        their_lines["deletes"] = Picker("l_orderkey", cur.max_order_id, cur.orders, "oldest", salt).sets(deleted)["deletes"]
    first, count = cur.max_order_id + 1, _share(changed_orders, SHARES["inserts"])
    new_orders = f"o_orderkey >= {first} and o_orderkey < {first + count}"
    new_lines = f"l_orderkey >= {first} and l_orderkey < {first + count}"
    line_updates = _share(changed_orders * LINE_UPDATES_PER_ORDER, 1.0)
    lines_rows = Picker("(l_orderkey * 8 + l_linenumber)", 8 * cur.max_order_id + 7, cur.lines, spread,
                        salt + 1000).sets({"updates": line_updates - line_updates // 3,
                                           "key_updates": max(1, line_updates // 3)})
    o, li, c = (f"{SCHEMA}.{name}" for name in ("orders", "lineitem", "customer"))
    status = "case o_orderstatus when 'O' then 'P' when 'P' then 'F' else 'O' end"
    comment = (f"case when pmod(hash(o_orderkey, {salt}), 10) = 0 then concat('special requests, changed ', "
               f"o_orderkey) else concat('order changed ', o_orderkey) end")
    new_customer = _ordering_customer(s, f"hash(o_orderkey, {salt})")
    flag = "case l_returnflag when 'R' then 'A' when 'A' then 'R' else l_returnflag end"
    changes = [
        Change("inserts", "orders", f"insert into {o}\n{orders_select(s, first, count, INSERT_FILES)}",
               new_orders, "I"),
        Change("inserts", "lineitem", f"insert into {li}\n{lineitem_select(s, first, count, INSERT_FILES)}",
               new_lines, "I"),
        Change("updates", "orders", f"update {o} set o_orderstatus = {status}, o_totalprice = o_totalprice + 1,"
               f" o_comment = {comment}\nwhere {orders_rows['updates']}", orders_rows["updates"]),
        Change("key_updates", "orders", f"update {o} set o_custkey = {new_customer}\n"
               f"where {orders_rows['key_updates']}", orders_rows["key_updates"]),
        Change("updates", "lineitem", f"update {li} set l_quantity = l_quantity + 1, l_extendedprice = "
               f"l_extendedprice + 1, l_discount = cast(pmod(hash(l_orderkey, l_linenumber, {salt}), 11) / 100 "
               f"as decimal(15,2)), l_returnflag = {flag}\nwhere {lines_rows['updates']}", lines_rows["updates"]),
        Change("key_updates", "lineitem", f"update {li} set l_partkey = 1 + pmod(l_partkey + {salt}, {s.parts})\n"
               f"where {lines_rows['key_updates']}", lines_rows["key_updates"]),
        Change("deletes", "lineitem", f"delete from {li}\nwhere {their_lines['deletes']}", their_lines["deletes"],
               "D"),
        Change("deletes", "orders", f"delete from {o}\nwhere {orders_rows['deletes']}", orders_rows["deletes"], "D"),
    ]
    customers = Picker("c_custkey", cur.max_customer_id, cur.customers, spread, salt).sets(
        {"updates": CUSTOMER_UPDATES, "deletes": CUSTOMER_DELETES})
    first_customer = cur.max_customer_id + 1
    changes += [
        Change("updates", "customer", f"update {c} set {_customer_update(salt)}\nwhere {customers['updates']}",
               customers["updates"]),
        Change("deletes", "customer", f"delete from {c}\nwhere {customers['deletes']}", customers["deletes"], "D"),
        Change("inserts", "customer",
               f"insert into {c}\n{customer_select(s, first_customer, CUSTOMER_INSERTS, INSERT_FILES)}",
               f"c_custkey >= {first_customer} and c_custkey < {first_customer + CUSTOMER_INSERTS}", "I"),
    ]
    return changes


def _customer_update(salt: int) -> str:
    """The SET list of a customer's update (CUSTOMER_UPDATE)."""
    if CUSTOMER_UPDATE == "attributes":
        return (f"c_name = concat('Customer#', lpad(cast(c_custkey as string), 9, '0'), '-{salt}'), "
                "c_acctbal = c_acctbal + 1")
    return (f"c_nationkey = pmod(c_nationkey + {salt}, 25), "
            f"c_mktsegment = {_pick(SEGMENTS, f'hash(c_custkey, {salt})')}")


def cdc_log_statements(master: str) -> list[str]:
    return shop.cdc_log_statements(master, SCHEMA, MASTERS)


def cdc_log_insert(change: Change, columns: list[str], before: int, commit: int) -> str:
    return cdc_log_insert_for(SCHEMA, log_name(change.master), change, columns, before, commit)
