"""The embedded sessions' pool (adapter/session.py), with stand-in sessions: dbt closes a
connection after every model, and each new connection got a new session that Spark's thread
pools then kept alive; now a closed connection's session, restored, serves the next one."""

from types import SimpleNamespace

from dbt_incremental_mv.adapter.session import SessionPool


class FakeSession:
    def __init__(self, context):
        self.sparkContext = context
        self.statements = []
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
