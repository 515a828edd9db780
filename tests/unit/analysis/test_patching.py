"""Which masters' updates a join view patches in place (analysis/patching.py): a dimension whose
partners are scattered in another master, read once, whose columns the view reads alone, filtered
by conditions its change log's images are tested by; no Spark."""

from __future__ import annotations

from dbt_incremental_mv.analysis import analyze_view
from dbt_incremental_mv.analysis.patching import patching
from tests.unit.analysis.conftest import MASTERS

C, O, L, P, K = "shop.customers", "shop.orders", "shop.order_lines", "shop.products", "shop.countries"

CHAIN = (
    "select c.name, c.country, o.order_id, o.amount, l.line_no, l.quantity "
    "from shop.customers c join shop.orders o on o.customer_id = c.customer_id "
    "join shop.order_lines l on l.order_id = o.order_id"
)


def patched(sql: str, master: str) -> str | None:
    found = patching(analyze_view(sql, MASTERS), master)
    return found.alias if found is not None else None


def join_columns(view, master: str) -> tuple[str, ...] | None:
    found = patching(view, master)
    return found.join_columns if found is not None else None


def test_a_dimension_scattered_in_its_fact_is_patched_and_the_fact_is_not():
    assert patched(CHAIN, C) == "c"  # a customer's orders are scattered among the orders
    # an order's lines begin with its key: found by their ranges, its INS step reads no master whole
    assert patched(CHAIN, O) is None
    assert patched(CHAIN, L) is None  # no master holds a line's key
    assert join_columns(analyze_view(CHAIN, MASTERS), C) == ()  # joined by its key alone


def test_columns_of_a_dimension_joined_further_must_agree_between_its_images():
    sql = (
        "select o.order_id, c.name, k.region from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
        "join shop.countries k on k.country = c.country"
    )
    view = analyze_view(sql, MASTERS)
    assert patching(view, C).alias == "c" and join_columns(view, C) == ("country",)
    assert patching(view, K).alias == "k" and join_columns(view, K) == ()


def test_an_own_filter_its_images_are_tested_by_is_allowed():
    assert patched(CHAIN + " where c.segment = 'BUILDING' and upper(c.name) like 'A%'", C) is None  # not testable
    assert patched(CHAIN + " where c.segment = 'BUILDING' and o.status <> 'x'", C) == "c"


def test_what_needs_the_other_masters_values_is_not_patched():
    mixed_output = CHAIN.replace("c.country,", "concat(c.name, o.status) as label,")
    assert patched(mixed_output, C) is None
    cross_condition = CHAIN + " where o.order_date > c.name"
    assert patched(cross_condition, C) is None


def test_other_shapes_are_not_patched():
    outer = "select c.name, o.order_id from shop.customers c left join shop.orders o on o.customer_id = c.customer_id"
    assert patched(outer, C) is None  # an outer join (its own view class)
    aggregate = (
        "select c.name, count(*) as n from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
        "group by c.name"
    )
    assert patched(aggregate, C) is None  # the view holds no fact rows to patch
    assert patched("select c.name from shop.customers c", C) is None  # one master: its log's images suffice
