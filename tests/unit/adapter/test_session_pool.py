"""The embedded sessions' pool (adapter/session.py), with stand-in sessions: dbt closes a
connection after every model, and each new connection got a new session that Spark's thread
pools then kept alive; now a closed connection's session, restored, serves the next one."""

from types import SimpleNamespace

from dbt_incremental_mv.adapter.session import SessionPool


class FakeSession:
    def __init__(self, context):
        self.sparkContext = context
        self.statements = []
        self.settings = {}
        self.conf = SimpleNamespace(isModifiable=lambda key: key != "spark.sql.extensions",
                                    set=self.settings.__setitem__)
        self.cleared = 0
        self.current = ["spark_catalog", "default"]
        self.catalog = SimpleNamespace(
            currentCatalog=lambda: self.current[0], currentDatabase=lambda: self.current[1],
            setCurrentCatalog=lambda c: self.current.__setitem__(0, c),
            setCurrentDatabase=lambda d: self.current.__setitem__(1, d),
        )
        temp = SimpleNamespace(clearTempTables=lambda: setattr(self, "cleared", self.cleared + 1))
        self._jsparkSession = SimpleNamespace(sessionState=lambda: SimpleNamespace(catalog=lambda: temp))

    def sql(self, statement):
        self.statements.append(statement)
        return SimpleNamespace(collect=lambda: [])


class FakeRoot:
    def __init__(self):
        self.sparkContext = object()

    def newSession(self):  # noqa: N802 - PySpark's name
        return FakeSession(self.sparkContext)


def test_a_closed_connections_session_serves_the_next_connection_restored():
    pool, root = SessionPool(), FakeRoot()
    first = pool.acquire(root)
    session = first.session
    session.current[:] = ["other_catalog", "shop"]  # a model's USE
    pool.give_back(first)
    assert first.session is None and session.statements == ["RESET"] and session.cleared == 1
    assert session.current == ["spark_catalog", "default"]
    second = pool.acquire(root)
    assert second.session is session and pool.created == 1
    pool.give_back(second)
    pool.give_back(second)  # closed twice: given back once
    assert pool.acquire(root).session is session and pool.acquire(root).session is not session
    assert pool.created == 2  # one per connection open at once, not one per connection ever opened


def test_a_session_of_another_context_or_that_cannot_be_restored_is_not_reused():
    pool, root = SessionPool(), FakeRoot()
    broken = pool.acquire(root)
    broken.session.sql = lambda statement: (_ for _ in ()).throw(RuntimeError("context stopped"))
    pool.give_back(broken)
    assert pool.acquire(root).session is not None and pool.created == 2
    stale = pool.acquire(root)
    pool.give_back(stale)
    restarted = FakeRoot()  # a new SparkContext: the old sessions are of no use
    assert pool.acquire(restarted).session.sparkContext is restarted.sparkContext


def test_each_connection_gets_the_profiles_runtime_settings():
    # the JVM keeps the settings it started with: a later profile's ANSI mode applies per session
    pool, root = SessionPool(), FakeRoot()
    profile = {"spark.sql.ansi.enabled": "true", "spark.sql.extensions": "x", "spark.master": "local[2]"}
    first = pool.acquire(root, profile)
    assert first.session.settings == {"spark.sql.ansi.enabled": "true"}  # static and non-SQL keys left alone
    session = first.session
    pool.give_back(first)
    assert pool.acquire(root, {"spark.sql.ansi.enabled": "false"}).session is session
    assert session.settings == {"spark.sql.ansi.enabled": "false"}


def test_a_session_given_back_gets_only_its_changed_settings_put_back(monkeypatch):
    # settings read in one JVM call: those a model changed are set back or unset, as RESET would
    # leave them, without running a RESET statement; unreadable settings: RESET
    from dbt_incremental_mv.adapter import session as session_module

    readings = [{"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"}]
    monkeypatch.setattr(session_module, "settings_of", lambda session: readings.pop(0))
    pool, root = SessionPool(), FakeRoot()
    first = pool.acquire(root, {"spark.sql.ansi.enabled": "true"})
    session = first.session
    unset = []
    session.conf.unset = unset.append
    readings.append({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "3",
                     "spark.sql.ansi.enabled": "true", "spark.wap.id": "w1"})
    pool.give_back(first)
    assert session.statements == [] and session.cleared == 1
    assert session.settings == {"spark.sql.ansi.enabled": "true", "spark.sql.shuffle.partitions": "4"}
    assert unset == ["spark.sql.ansi.enabled", "spark.wap.id"]
    second = pool.acquire(root)
    assert second.session is session and second.initial_settings == {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"}
    readings.append(None)  # cannot be read now
    pool.give_back(second)
    assert session.statements == ["RESET"]


def test_seed_values_are_bound_as_spark_literals():
    # dbt-spark 1.11 binds NULL as 'None' (ANSI on: the cast fails), numbers through a float and
    # strings unescaped
    import datetime
    import decimal

    from dbt_incremental_mv.adapter.session import BoundSessionConnectionWrapper

    bind = BoundSessionConnectionWrapper._fix_binding
    assert [bind(v) for v in (None, True, 2**62 + 1, decimal.Decimal("1.50"), decimal.Decimal("1E+2"), -1.25)] == [
        "null", "true", "4611686018427387905", "1.50", "100", "-1.25"]
    assert bind(float("nan")) == "'nan'" and bind("it's \\ %s") == "'it\\'s \\\\ %s'"
    assert bind(datetime.date(2024, 1, 2)) == "'2024-01-02'"
    assert bind(datetime.datetime(2024, 1, 2, 3, 4, 5, 600000)) == "'2024-01-02 03:04:05.600000'"
