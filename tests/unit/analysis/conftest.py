"""Shared masters and helpers for the view-analysis tests (pure Python, no Spark)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlglot

from dbt_incremental_mv.analysis import MasterTable, ViewDefinition, analyze_view
from dbt_incremental_mv.analysis.render import render_select


def _master(name: str, columns: str, key: tuple[str, ...]) -> MasterTable:
    pairs = tuple(tuple(part.split(":", 1)) for part in columns.split())
    return MasterTable(name, pairs, key)  # type: ignore[arg-type]


MASTERS: dict[str, MasterTable] = {
    m.name: m
    for m in (
        _master(
            "shop.orders",
            "order_id:bigint customer_id:bigint order_date:date status:string amount:decimal(10,2)",
            ("order_id",),
        ),
        _master("shop.customers", "customer_id:bigint name:string country:string segment:string", ("customer_id",)),
        _master(
            "shop.order_lines",
            "order_id:bigint line_no:int product_id:bigint quantity:int unit_price:double",
            ("order_id", "line_no"),
        ),
        _master("shop.products", "product_id:bigint name:string category:string", ("product_id",)),
        _master("shop.countries", "country:string region:string", ("country",)),
        _master(
            "shop.employees",
            "emp_id:bigint manager_id:bigint name:string address:struct<city:string,zip:string>",
            ("emp_id",),
        ),
        _master("shop.events", "event_id:bigint payload:string", ()),
    )
}


@pytest.fixture
def masters() -> dict[str, MasterTable]:
    return dict(MASTERS)


@pytest.fixture
def view() -> Callable[[str], ViewDefinition]:
    """Analyse SQL against the shop masters."""
    return lambda sql: analyze_view(sql, MASTERS)


@pytest.fixture
def rendered() -> Callable[..., str]:
    """Render a definition twice, check the text is identical and re-parses as one Spark
    SELECT, and return it."""

    def render(definition: ViewDefinition, **kwargs: object) -> str:
        first = render_select(definition, **kwargs)  # type: ignore[arg-type]
        second = render_select(definition, **kwargs)  # type: ignore[arg-type]
        assert first == second
        parsed = sqlglot.parse(first, read="spark")
        assert len(parsed) == 1 and isinstance(parsed[0], sqlglot.exp.Select)
        return first

    return render
