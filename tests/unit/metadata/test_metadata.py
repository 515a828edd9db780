"""The metadata seam's reading of Iceberg's table metadata JSON, without Spark."""

import pytest

from dbt_incremental_mv.metadata import from_metadata_json, spark_type

DOCUMENT = {
    "format-version": 3,
    "current-schema-id": 1,
    "schemas": [
        {"schema-id": 0, "fields": [{"id": 1, "name": "old", "type": "int"}]},
        {"schema-id": 1, "fields": [
            {"id": 1, "name": "Order_ID", "type": "long"},
            {"id": 2, "name": "amount", "type": "decimal(10, 2)"},
            {"id": 3, "name": "at", "type": "timestamptz"},
            {"id": 4, "name": "local", "type": "timestamp"},
            {"id": 5, "name": "tags", "type": {"type": "list", "element-id": 6, "element": "string"}},
            {"id": 7, "name": "attrs", "type": {"type": "map", "key": "string", "value": "int"}},
            {"id": 8, "name": "address", "type": {"type": "struct", "fields": [
                {"id": 9, "name": "city", "type": "string"}, {"id": 10, "name": "zip", "type": "fixed[5]"}]}},
        ]},
    ],
    "properties": {"write.wap.enabled": "true"},
    "current-snapshot-id": 12,
    "refs": {"main": {"snapshot-id": 12, "type": "branch"}, "b": {"snapshot-id": 11, "type": "branch"}},
    "snapshots": [
        {"snapshot-id": 11, "sequence-number": 1, "summary": {"operation": "append", "added-records": "3"}},
        {"snapshot-id": 12, "parent-snapshot-id": 11, "sequence-number": 2,
         "summary": {"operation": "overwrite", "wap.id": "x"}},
    ],
}


def test_a_tables_metadata_json_reads_as_describe_and_the_snapshots_table_would():
    table = from_metadata_json("shop.t", DOCUMENT)
    assert table.columns == (
        ("order_id", "bigint"), ("amount", "decimal(10,2)"), ("at", "timestamp"), ("local", "timestamp_ntz"),
        ("tags", "array<string>"), ("attrs", "map<string,int>"), ("address", "struct<city:string,zip:binary>"),
    )
    assert table.format_version == 3 and table.properties["write.wap.enabled"] == "true"
    assert table.main == 12 and table.current.summary["wap.id"] == "x" and table.current.operation == "overwrite"
    assert [s.snapshot_id for s in table.ancestry()] == [12, 11]
    assert table.snapshots[11].count("added-records") == 3 and table.snapshots[11].sequence_number == 1
    assert [s.snapshot_id for s in table.commits_since(11)] == [12]
    assert table.commits_since(99) is None


def test_a_table_without_snapshots_has_no_main():
    table = from_metadata_json("shop.t", {**DOCUMENT, "snapshots": [], "refs": {}, "current-snapshot-id": -1})
    assert table.main is None and table.ancestry() == []


def test_primitive_types_match_spark():
    assert [spark_type(t) for t in ("boolean", "int", "long", "float", "double", "date", "string", "uuid", "binary")] == [
        "boolean", "int", "bigint", "float", "double", "date", "string", "string", "binary"]


def test_over_sql_snapshot_ids_of_several_tables_are_one_statement_and_nothing_is_read_twice():
    from dbt_incremental_mv.metadata import Metadata, SqlCatalog

    asked = []

    def query(sql):
        asked.append(sql)
        if sql.startswith("describe table"):
            return [("a", "int", None)]
        if "`refs` where name = 'main'" in sql and "union all" in sql:
            return [("shop.a", 1), ("shop.b", 2)]
        raise AssertionError(sql)

    metadata = Metadata(SqlCatalog(query, asked.append))
    assert metadata.mains(["shop.a", "shop.b"]) == {"shop.a": 1, "shop.b": 2}
    assert metadata.main("shop.a") == 1 and metadata.columns("shop.a") == [("a", "int")]
    assert metadata.columns("shop.a") == [("a", "int")]
    assert len(asked) == 2  # one refs statement for both tables, one describe
    metadata.forget("shop.a")
    metadata.columns("shop.a")
    assert len(asked) == 3  # a table the refresh wrote is read again


class _Refusing:
    """An ``execute`` whose first ``refusals`` statements Iceberg refuses with ``error``."""

    def __init__(self, refusals, error):
        self.refusals, self.error, self.run = refusals, error, []

    def __call__(self, sql):
        self.run.append(sql)
        if len(self.run) <= self.refusals:
            raise RuntimeError(self.error)


CONTENTION = ("another commit to the same table committed while this one ran ... Iceberg: "
              "org.apache.iceberg.exceptions.CommitFailedException: Table metadata refresh is required")


def test_a_branch_commit_that_only_lost_to_another_metadata_commit_is_made_again(monkeypatch):
    import dbt_incremental_mv.metadata as metadata_module
    from dbt_incremental_mv.metadata import METADATA_COMMIT_ATTEMPTS, SqlCatalog

    monkeypatch.setattr(metadata_module.types.time, "sleep", lambda seconds: None)
    execute = _Refusing(2, CONTENTION)  # Iceberg's ManageSnapshots does not retry this itself
    SqlCatalog(lambda sql: [], execute).create_branch("shop.v", "b1", 7)
    assert execute.run == ["alter table `shop`.`v` create branch `b1` as of version 7"] * 3

    execute = _Refusing(METADATA_COMMIT_ATTEMPTS, CONTENTION)  # always refused: the last refusal is raised
    with pytest.raises(RuntimeError, match="Table metadata refresh is required"):
        SqlCatalog(lambda sql: [], execute).create_branch("shop.v", "b1", 7)
    assert len(execute.run) == METADATA_COMMIT_ATTEMPTS


def test_a_fast_forward_is_made_again_after_contention_but_not_after_main_moved(monkeypatch):
    import dbt_incremental_mv.metadata as metadata_module
    from dbt_incremental_mv.conflicts import lost_race
    from dbt_incremental_mv.metadata import SqlCatalog

    monkeypatch.setattr(metadata_module.types.time, "sleep", lambda seconds: None)
    execute = _Refusing(1, CONTENTION)
    SqlCatalog(lambda sql: [], execute).fast_forward("shop.v", 5, branch="w1")
    moves = [sql for sql in execute.run if "fast_forward" in sql]
    assert len(moves) == 2 and execute.run[-1] == "alter table `shop`.`v` drop branch if exists `w1`"

    # main moved to another refresh's commit: Iceberg's check that main is an ancestor of the
    # target fails, which no attempt changes: lost at once
    execute = _Refusing(1, "IllegalArgumentException: Cannot fast-forward: main is not an ancestor of w1")
    with pytest.raises(Exception) as lost:
        SqlCatalog(lambda sql: [], execute).fast_forward("shop.v", 5, branch="w1")
    assert lost_race(lost.value)
    assert len([sql for sql in execute.run if "fast_forward" in sql]) == 1


def test_the_jvm_fast_forward_is_made_again_while_main_is_where_expected(monkeypatch):
    import dbt_incremental_mv.metadata as metadata_module
    from dbt_incremental_mv.metadata import JvmCatalog, LostRace, MetadataContention

    monkeypatch.setattr(metadata_module.types.time, "sleep", lambda seconds: None)
    committed, attempts = [], []
    catalog = JvmCatalog(session=None, on_change=committed.append)

    def contended_once(*args):
        attempts.append(args)
        if len(attempts) == 1:  # a branch of another refresh was made meanwhile: main did not move
            raise MetadataContention("another commit to shop.v came first")

    monkeypatch.setattr(catalog, "_fast_forward", contended_once)
    catalog.fast_forward("shop.v", 5, to_snapshot=9)
    assert len(attempts) == 2 and len(committed) == 1

    def main_moved(*args):
        attempts.append(args)
        raise LostRace("main of shop.v is at 7, not at 5")

    attempts.clear()
    monkeypatch.setattr(catalog, "_fast_forward", main_moved)
    with pytest.raises(LostRace):
        catalog.fast_forward("shop.v", 5, to_snapshot=9)
    assert len(attempts) == 1 and len(committed) == 1  # lost at once, nothing recorded


class _Option:
    def __init__(self, value):
        self.value = value

    def isDefined(self):  # noqa: N802 - Scala's name
        return self.value is not None

    def get(self):
        return self.value


class _Session:
    """A Spark session's SQL configuration over the Spark configuration it started from."""

    def __init__(self, started_with):
        self.values, self.started_with, self.statements = dict(started_with), dict(started_with), []
        session = self

        class Conf:
            def set(self, key, value):
                session.values[key] = value

            def unset(self, key):
                session.values.pop(key, None)

        class SharedConf:
            def getOption(self, key):  # noqa: N802 - Scala's name
                return _Option(session.started_with.get(key))

        self.conf = Conf()
        self._jsparkSession = type("J", (), {"sharedState": lambda _: type("S", (), {"conf": lambda _: SharedConf()})()})()

    def sql(self, statement):
        self.statements.append(statement)


def test_settings_change_the_session_without_a_statement_and_a_reset_gives_back_what_it_started_with():
    from dbt_incremental_mv.metadata import JvmCatalog, Metadata, SqlCatalog

    session, told = _Session({"spark.sql.shuffle.partitions": "8"}), []
    metadata = Metadata(JvmCatalog(session, on_change=told.append))
    metadata.apply_settings((("spark.sql.shuffle.partitions", "3"), ("spark.wap.id", "w1")))
    assert session.values == {"spark.sql.shuffle.partitions": "3", "spark.wap.id": "w1"} and session.statements == []
    metadata.apply_settings((("spark.sql.shuffle.partitions", None), ("spark.wap.id", None)))
    assert session.values == {"spark.sql.shuffle.partitions": "8"}  # as RESET: the started value, or none
    assert told == ["set spark.sql.shuffle.partitions=3", "set spark.wap.id=w1",
                    "reset spark.sql.shuffle.partitions", "reset spark.wap.id"]  # the statements they stand for
    ran = []
    Metadata(SqlCatalog(lambda sql: [], ran.append)).apply_settings((("spark.wap.id", "w1"), ("spark.wap.id", None)))
    assert ran == ["set spark.wap.id=w1", "reset spark.wap.id"]  # over SQL: the statements
