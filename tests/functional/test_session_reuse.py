"""Embedded sessions are reused across dbt's connections (adapter/session.py SessionPool): dbt
closes a connection after every model, and a new Spark session per model was kept alive by
Spark's thread pools (the inherited active session of every broadcast-exchange thread), so a
long-lived process calling dbt grew its heap with every model run."""

import pytest
from dbt.tests.util import run_dbt

from dbt_incremental_mv.adapter.session import SESSIONS


class TestSessionsAreReused:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"m{i}.sql": f"{{{{ config(materialized='table') }}}} select {i} as a" for i in range(4)}

    def test_models_and_runs_share_the_sessions_of_the_connections_open_at_once(self, project):
        run_dbt(["run"])
        created = SESSIONS.created
        for _ in range(3):
            run_dbt(["run"])  # 12 models, each on a connection opened and closed
        assert SESSIONS.created == created
        # a model's settings and temporary views do not reach the next connection's session
        project.run_sql("set spark.sql.shuffle.partitions = 3")
        project.run_sql("set spark.wap.id = left_over")  # a key the session did not start with
        project.run_sql("create or replace temporary view tmp_left_over as select 1 as a")
        project.adapter.connections.cleanup_all()
        rows = project.run_sql("set spark.sql.shuffle.partitions", fetch="one")
        assert rows[1] != "3", rows
        assert project.run_sql("set spark.wap.id", fetch="one")[1] == "<undefined>"
        assert not project.run_sql("show views like 'tmp_left_over'", fetch="all")
        assert SESSIONS.created == created  # the same sessions, restored
