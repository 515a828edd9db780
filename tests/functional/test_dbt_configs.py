"""dbt configs on fast_refresh models (issue 9): each takes effect on the first build and
survives a fast refresh, a complete refresh and --full-refresh."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import assert_view_matches_query, capture_sources, rows

SOURCES = capture_sources({"orders": "order_id", "customers": "customer_id"})
ORDERS = "select o.order_id, o.region, o.amount from {{ source('shop', 'orders') }} o"


def create_masters(project):
    schema = project.test_schema
    project.run_sql(f"create table {schema}.orders (order_id bigint, region string, amount decimal(10,2), "
                    "customer_id bigint) using iceberg")
    project.run_sql(f"insert into {schema}.orders values (1, 'eu', 5.00, 10), (2, 'us', 50.00, 11)")
    project.run_sql(f"create table {schema}.customers (customer_id bigint, name string) using iceberg")
    project.run_sql(f"insert into {schema}.customers values (10, 'ada'), (11, 'alan')")
    return schema


def describe(project, table):
    return {(str(r[0]).strip(), str(r[1]).strip()) for r in rows(project, f"describe table extended {table}")}


def comments(project, table):
    return {r[0]: r[2] for r in rows(project, f"describe table {table}") if r[0] and not r[0].startswith("#")}


TABLE_MODEL = """
{{ config(
    materialized='fast_refresh',
    refresh_method=var('method', 'fast'),
    partition_by=['region'],
    clustered_by=['order_id'],
    buckets=4,
    tblproperties={'owner_team': "sales 'emea'"},
    persist_docs={'relation': true, 'columns': true},
    pre_hook="insert into {{ this.schema }}.audit select 'pre', '{{ var('method', 'fast') }}'",
    post_hook="insert into {{ this.schema }}.audit select 'post', '{{ var('method', 'fast') }}'",
) }}
""" + ORDERS

TABLE_DOCS = """
version: 2
models:
  - name: v
    description: "Orders by region, it's a view"
    columns:
      - name: order_id
        description: "The order's id"
"""


class TestTableConfigs:
    @pytest.fixture(scope="class")
    def models(self):
        return {"v.sql": TABLE_MODEL, "schema.yml": TABLE_DOCS, "sources.yml": SOURCES}

    def check(self, project, expected_audit):
        schema = project.test_schema
        view = f"{schema}.v"
        info = describe(project, view)
        assert ("Part 0", "region") in info and ("Part 1", "bucket(4, order_id)") in info, info
        properties = dict(rows(project, f"show tblproperties {view}"))
        assert properties["owner_team"] == "sales 'emea'"
        assert ("Comment", "Orders by region, it's a view") in info, info
        assert comments(project, view)["order_id"] == "The order's id"
        assert rows(project, f"select hook, method from {schema}.audit order by 1, 2") == sorted(expected_audit)
        assert_view_matches_query(project, view, f"select order_id, region, amount from {schema}.orders",
                                  columns="order_id, region, amount")

    def test_settings_survive_every_kind_of_refresh(self, project):
        schema = create_masters(project)
        project.run_sql(f"create table {schema}.audit (hook string, method string) using iceberg")
        audit = [("pre", "fast"), ("post", "fast")]
        _, log = run_dbt_and_capture(["run"])
        assert "v: build (first run" in log, log
        self.check(project, audit)

        project.run_sql(f"insert into {schema}.orders values (3, 'eu', 7.00, 10)")
        _, log = run_dbt_and_capture(["run"])
        assert "v: fast refresh:" in log, log
        self.check(project, audit * 2)

        project.run_sql(f"update {schema}.orders set region = 'us' where order_id = 1")
        _, log = run_dbt_and_capture(["run", "--vars", "{method: complete}"])
        assert "v: complete (refresh_method='complete')" in log, log
        self.check(project, audit * 2 + [("pre", "complete"), ("post", "complete")])

        project.run_sql(f"delete from {schema}.orders where order_id = 2")
        _, log = run_dbt_and_capture(["run", "--full-refresh"])
        assert "v: build (--full-refresh" in log, log
        self.check(project, audit * 3 + [("pre", "complete"), ("post", "complete")])


CONTRACT = """
version: 2
models:
  - name: {name}
    config:
      contract: {{enforced: true}}
    columns:
      - name: order_id
        data_type: bigint
      - name: amount
        data_type: {amount_type}
      - name: name
        data_type: string
"""
JOINED = ("select o.order_id, o.amount, c.name from {{ source('shop', 'orders') }} o "
          "join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id")


class TestContracts:
    @pytest.fixture(scope="class")
    def models(self):
        config = "{{ config(materialized='fast_refresh', refresh_method=var('method', 'fast')) }}\n"
        return {
            "kept.sql": config + JOINED,
            "kept.yml": CONTRACT.format(name="kept", amount_type="decimal(10,2)"),
            "broken.sql": config + JOINED,
            "broken.yml": CONTRACT.format(name="broken", amount_type="int"),
            "sources.yml": SOURCES,
        }

    def test_contract_enforced_with_hidden_columns(self, project):
        schema = create_masters(project)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        # a mismatch fails before anything is created
        assert "broken" in log and "int" in log and "decimal(10,2)" in log, log
        assert not rows(project, f"show tables in {schema} like 'broken'")
        expected = [("order_id", "bigint"), ("amount", "decimal(10,2)"), ("name", "string")]

        def columns():
            return [(c, t) for c, t, *_ in rows(project, f"describe table {schema}.kept")
                    if c and not c.startswith("#") and not c.startswith("_mv_")]

        assert columns() == expected
        query = (f"select o.order_id, o.amount, c.name from {schema}.orders o "
                 f"join {schema}.customers c on o.customer_id = c.customer_id")
        project.run_sql(f"insert into {schema}.orders values (3, 'eu', 7.00, 11)")
        _, log = run_dbt_and_capture(["run", "--select", "kept"])
        assert "kept: fast refresh:" in log, log
        assert columns() == expected
        assert_view_matches_query(project, f"{schema}.kept", query, columns="order_id, amount, name")
        project.run_sql(f"update {schema}.customers set name = 'grace' where customer_id = 11")
        _, log = run_dbt_and_capture(["run", "--select", "kept", "--vars", "{method: complete}"])
        assert "kept: complete (" in log, log
        assert columns() == expected
        assert_view_matches_query(project, f"{schema}.kept", query, columns="order_id, amount, name")


class TestGrantsWithoutAccessControl:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "granted.sql": "{{ config(materialized='fast_refresh', refresh_method='fast', grants={'select': ['analyst']}) }}\n" + ORDERS,
            "sources.yml": SOURCES,
        }

    def test_refused_before_anything_is_created(self, project):
        schema = create_masters(project)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "Model 'granted': grants are configured, but this Spark has no GRANT statement" in log, log
        assert not rows(project, f"show tables in {schema} like 'granted'")
        assert not rows(project, f"show tables in {schema} like 'mlog_orders'")


class EmulatedAccessControl:
    """Table access control as a Spark with GRANT (Databricks) answers it, emulated in the
    session cursor: ``show grants on`` lists what was granted, ``grant``/``revoke`` change it.
    Open-source Spark has no GRANT statement; everything else runs on the real session."""

    COLUMNS = "Principal string, ActionType string, ObjectType string, ObjectKey string"

    def __init__(self):
        self.granted: dict[str, set[tuple[str, str]]] = {}
        self.statements: list[str] = []

    @staticmethod
    def _table(text):
        return text.replace("`", "").strip().lower()

    def answer(self, spark, sql):
        """A DataFrame for a grant statement; None for any other statement."""
        text = " ".join(sql.split())
        while text.startswith("/*"):
            text = text.split("*/", 1)[1].strip()
        words = text.lower().split()
        if words[:3] == ["show", "grants", "on"]:
            table = self._table(text.split(None, 3)[3])
            rows = [(grantee, privilege.upper(), "TABLE", table) for privilege, grantee in sorted(self.granted.get(table, ()))]
            return spark.createDataFrame(rows, self.COLUMNS)
        if words and words[0] in ("grant", "revoke"):
            self.statements.append(text.replace("`", "").lower())
            privilege, rest = text.split(None, 1)[1].split(" on ", 1)
            table, grantee = rest.split(" to " if words[0] == "grant" else " from ", 1)
            change = (privilege.strip().lower(), grantee.replace("`", "").strip())
            acl = self.granted.setdefault(self._table(table), set())
            acl.add(change) if words[0] == "grant" else acl.discard(change)
            return spark.sql("select 1 as done where false")
        return None


@pytest.fixture
def access_control(monkeypatch):
    from dbt_incremental_mv.adapter.session import IsolatedCursor

    emulated = EmulatedAccessControl()
    execute = IsolatedCursor.execute

    def execute_with_grants(cursor, sql, *parameters):
        answer = emulated.answer(cursor._session, sql)
        if answer is None:
            return execute(cursor, sql, *parameters)
        cursor._df, cursor._rows = answer, None

    monkeypatch.setattr(IsolatedCursor, "execute", execute_with_grants)
    return emulated


GRANTED = "{{ config(materialized='fast_refresh', refresh_method='fast', grants={'select': var('readers', ['analyst'])}) }}\n" + ORDERS


class TestGrantsWithAccessControl:
    @pytest.fixture(scope="class")
    def models(self):
        return {"granted.sql": GRANTED, "sources.yml": SOURCES}

    def test_granted_on_build_kept_on_fast_refresh_changed_with_the_config(self, project, access_control):
        schema = create_masters(project)
        view = f"{schema}.granted".lower()
        run_dbt(["run"])
        assert access_control.granted[view] == {("select", "analyst")}
        assert access_control.statements == [f"grant select on {view} to analyst"]

        project.run_sql(f"insert into {schema}.orders values (9, 'north', 90.00, 1)")
        _, log = run_dbt_and_capture(["run"])
        assert "granted: fast refresh:" in log, log
        assert len(access_control.statements) == 1  # already granted: nothing to do

        _, log = run_dbt_and_capture(["run", "--vars", "{readers: [auditor]}"])
        assert access_control.granted[view] == {("select", "auditor")}
        assert access_control.statements[1:] == [
            f"revoke select on {view} from analyst", f"grant select on {view} to auditor",
        ]
        run_dbt(["run", "--full-refresh", "--vars", "{readers: [auditor]}"])  # a rebuild keeps them
        assert access_control.granted[view] == {("select", "auditor")}
