"""The ``spark_mv`` adapter: dbt-spark's adapter plus the bridge from Jinja to the Python core.

The materialization and the operations call the ``@available`` methods here; they decide
(validate, analyse, mark) and hand back SQL for the macros to run, or run the bookkeeping
reads and log maintenance themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.base import AdapterTrackingRelationInfo, available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv import __version__
from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager
from dbt_incremental_mv.adapter.listing import ListingCatalog, list_relations


def _relation_name(relation: BaseRelation) -> str:
    return f"{relation.schema}.{relation.identifier}".lower()


class SparkMVAdapter(SparkAdapter):
    ConnectionManager = SparkMVConnectionManager

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._history: dict[str, list] = {}  # history table -> rows kept until the command ends
        self._history_lock = threading.Lock()
        self.listing_catalog = ListingCatalog(self._query)  # read at the first listing (listing.py)

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> AdapterTrackingRelationInfo:
        # The base class derives the module name from the class name (dbt.adapters.sparkmv).
        from dbt.adapters.__about__ import version as base_version

        return AdapterTrackingRelationInfo(  # type: ignore[abstract]  # dbt's dataclass: not abstract at run time
            adapter_name="spark_mv",
            base_adapter_version=base_version,
            adapter_version=__version__,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    def list_relations_without_caching(self, schema_relation: BaseRelation) -> list[BaseRelation]:
        # One `show tables` per schema on an Iceberg SparkCatalog instead of one describe per table.
        return list_relations(self, schema_relation, super().list_relations_without_caching)

    def drop_schema(self, relation: BaseRelation) -> None:
        # Iceberg's Hadoop catalog refuses DROP SCHEMA ... CASCADE while the schema holds tables.
        for existing in self.list_relations_without_caching(relation.without_identifier()):
            self.drop_relation(existing)
        super().drop_schema(relation)

    # ------------------------------------------------------------ the Python core's I/O
    def _query(self, sql: str) -> list[tuple]:
        """Rows as plain Python values (no agate conversion: snapshot ids stay ints)."""
        _, cursor = self.connections.add_query(sql, auto_begin=False)
        return [tuple(row) for row in (cursor.fetchall() or [])]

    def _run(self, sql: str) -> None:
        self.connections.add_query(sql, auto_begin=False)

    def _metadata(self):
        """The metadata seam for this connection: Iceberg's Java API in the embedded session's
        JVM (no SQL statement, no Spark job), SQL otherwise (thrift, http, odbc).
        ``DBT_INCREMENTAL_MV_METADATA=sql`` forces SQL (to compare, or to work around a catalog
        the Java API cannot load)."""
        from dbt_incremental_mv import environment
        from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager
        from dbt_incremental_mv.metadata import JvmCatalog, Metadata, SqlCatalog, java_api_usable

        if (environment.METADATA.value() or "").lower() != "sql":
            handle = self.connections.get_thread_connection().handle
            session = getattr(getattr(handle, "handle", None), "session", None)
            if session is not None and java_api_usable(session):
                return Metadata(JvmCatalog(session, on_change=SparkMVConnectionManager.statement_ran))
        return Metadata(SqlCatalog(self._query, self._run))

    def _session_connection(self):
        """The embedded session's connection of this thread (it records reads), or None."""
        from dbt_incremental_mv.adapter.session import IsolatedSessionConnection

        handle = getattr(self.connections.get_thread_connection().handle, "handle", None)
        return handle if isinstance(handle, IsolatedSessionConnection) else None

    def _engine(self):
        from dbt_incremental_mv.refresh.engine import FastRefreshEngine

        return FastRefreshEngine(self._query, self._run, self._metadata())

    def _relation_exists(self, name: str) -> bool:
        schema, _, identifier = name.partition(".")
        return self.get_relation(None, schema, identifier) is not None  # type: ignore[arg-type]  # Spark has no database

    @staticmethod
    def _people_error(exc: Exception) -> DbtRuntimeError:
        return DbtRuntimeError(str(exc))

    # ------------------------------------------------------------ materialization
    @available
    def fast_refresh_plan(
        self,
        model: Mapping[str, Any],
        compiled_code: str,
        target: BaseRelation,
        existing: BaseRelation | None,
        full_refresh: bool,
        graph: Mapping[str, Any],
    ):
        """Validate the model, its logs and its view definition, and plan the refresh: the engine
        over this connection with the record of its run (engine.Refresh), which the later calls take.

        Reads only. A bad config, a broken log or refresh_method='fast' on a view that
        cannot be fast refreshed fails here, before anything is changed.
        """
        from dbt_incremental_mv.config import ConfigError
        from dbt_incremental_mv.logs.contract import LogContractError
        from dbt_incremental_mv.refresh.engine import Refresh
        from dbt_incremental_mv.refresh.phases.decide import DefinitionChanged, FastRefreshUnavailable

        existing_type = str(existing.type) if existing is not None and existing.type is not None else None
        session = self._session_connection()
        if session is not None:  # what every statement of the refresh reads, until it finishes
            session.start_recording()
        try:
            engine = self._engine()
            run = engine.plan(model, compiled_code, _relation_name(target), existing_type, bool(full_refresh), graph)
            if (model.get("config") or {}).get("grants"):
                self._check_grants_supported(model["name"], target)
            return Refresh(engine, run)
        except (ConfigError, LogContractError, FastRefreshUnavailable, DefinitionChanged) as exc:
            raise self._people_error(exc) from exc

    def _check_grants_supported(self, model_name: str, target: BaseRelation) -> None:
        """Fail before anything changes when grants are configured on a Spark without GRANT
        (otherwise the view would be refreshed and the model would fail afterwards)."""
        from dbt_incremental_mv.config import grants_unsupported_error
        from dbt_incremental_mv.sql_text import relation

        try:
            self._query(f"show grants on {relation(_relation_name(target))}")
        except Exception as exc:  # noqa: BLE001 - judged by its message
            error = grants_unsupported_error(model_name, str(exc))
            if error is not None:
                raise error from exc

    @available
    def fast_refresh_mark(self, refresh):
        """Capture, mark and decide; returns the steps of the propagate phase."""
        from dbt_incremental_mv.refresh.phases.decide import FastRefreshUnavailable

        try:
            return refresh.prepare()
        except FastRefreshUnavailable as exc:
            raise self._people_error(exc) from exc

    @available
    def fast_refresh_execute(self, refresh, propagation, create_sql, target: BaseRelation) -> None:
        """Run the propagate steps (execute.py): each statement through this connection (dbt logs
        it), the view's table made by the ``fast_refresh_create_sql`` macro (the DDL around the
        query, in the model's context), the staged commit published as a compare-and-swap."""
        from dbt_incremental_mv.refresh.engine import ConcurrentRefreshError

        engine, run, plan = refresh.engine, refresh.run, refresh.plan

        def create(query: str) -> str:
            return str(create_sql(target, query, plan.tblproperties, plan.partition_spec))

        try:
            engine.execute(run, propagation, engine.runner(run, self._run, create))
        except ConcurrentRefreshError as exc:
            raise self._people_error(exc) from exc

    @available
    def fast_refresh_finish(self, refresh, propagation, graph: Mapping[str, Any]) -> str:
        """Purge what every view has consumed; returns the model's one log line. Keeps the
        refresh's history row, written with the others when the dbt command ends."""
        engine, run = refresh.engine, refresh.run
        line = engine.finish(run, propagation, graph, self._relation_exists)
        session = self._session_connection()
        if session is not None and session.recording is not None:
            from dbt_incremental_mv.reads import Reads

            run.reads = Reads.of(session.stop_recording())
            if propagation.steps:
                line += f"; {run.reads.describe()}"
        plan = run.plan
        if plan.config.refresh_history:
            from dbt_common.invocation import get_invocation_id

            from dbt_incremental_mv.refresh.operations.history import history_relation

            schema = plan.config.history_schema or plan.view_relation.split(".")[0]
            row = engine.history_row(run, propagation, line, get_invocation_id())
            with self._history_lock:
                self._history.setdefault(history_relation(schema), []).append(row)
        if run.decision.blocker is not None:  # after the history row: the refresh was made
            self._warn(
                f"Model '{run.plan.model_name}' was recomputed in full: it cannot be fast refreshed "
                f"({run.decision.blocker})"
            )
        if run.compaction_failure is not None:
            self._warn(f"Model '{run.plan.model_name}': {run.compaction_failure}")
        if run.expiry_failure is not None:
            self._warn(f"Model '{run.plan.model_name}': {run.expiry_failure}")
        return line

    @staticmethod
    def _warn(message: str) -> None:
        """A warning dbt prints (``--warn-error`` makes it fail the command)."""
        from dbt.adapters.events.types import AdapterEventWarning
        from dbt_common.events.functions import warn_or_error

        warn_or_error(AdapterEventWarning(base_msg=message))

    # ------------------------------------------------------------ the refresh history
    def cleanup_connections(self) -> None:
        """At the end of a dbt command: write the refresh history kept meanwhile (one statement
        per history table, so that no refresh pays a Spark job for it), then close."""
        try:
            self._write_history()
        finally:
            super().cleanup_connections()

    def _write_history(self) -> None:
        from dbt.adapters.events.logging import AdapterLogger

        from dbt_incremental_mv.refresh.operations.history import create_sql, insert_sql, missing_columns_sql
        from dbt_incremental_mv.sql_text import ident

        with self._history_lock:
            pending, self._history = self._history, {}
        if not pending:
            return
        with self.connection_named("mv_refresh_history"):
            metadata = self._metadata()
            for table, rows in sorted(pending.items()):
                try:
                    existing = [name for name, _ in metadata.columns(table)]
                    if not existing:
                        self._run(f"create namespace if not exists {ident(table.split('.')[0])}")
                        self._run(create_sql(table))
                    for statement in missing_columns_sql(table, existing) if existing else ():
                        self._run(statement)  # a history table made by an earlier version
                    self._run(insert_sql(table, rows))
                except Exception as exc:  # noqa: BLE001 - the refreshes are done: say so, do not fail them
                    AdapterLogger("spark_mv").warning(
                        f"The refresh history ({len(rows)} row(s)) could not be written to {table}: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. Set refresh_history=false "
                        "to stop keeping it, or history_schema to write it elsewhere."
                    )

    # ------------------------------------------------------------ operations
    def _log_specs(self, graph: Mapping[str, Any], masters: Sequence[str] | None):
        from dbt_incremental_mv.logs.contract import LogContractError, log_specs_from_graph

        try:
            specs = log_specs_from_graph(graph)
        except LogContractError as exc:
            raise self._people_error(exc) from exc
        if masters:
            wanted = {m.lower() for m in masters}
            unknown = wanted - {s.master_ref.lower() for s in specs}
            if unknown:
                raise DbtRuntimeError(
                    f"No change log is declared for master(s) {', '.join(sorted(unknown))}: declare a dbt source "
                    "table with meta.mv_log.master naming it."
                )
            specs = [s for s in specs if s.master_ref.lower() in wanted]
        return specs

    @available
    def mv_logged_merge(
        self, model: Mapping[str, Any], new_rows: BaseRelation, target: BaseRelation, graph: Mapping[str, Any]
    ) -> str:
        """The ``logged_merge`` incremental strategy (refresh/operations/logged_merge.py): merge the model's new
        rows and append what changed to its change log. Returns what was done, for the log."""
        from dbt_incremental_mv.logs.contract import LogContractError, log_specs_from_graph, logs_by_master
        from dbt_incremental_mv.refresh.operations import logged_merge

        table = _relation_name(target)
        name = model.get("name", table)
        try:
            spec = logs_by_master(log_specs_from_graph(graph)).get(table)
            config = logged_merge.MergeConfig.from_model_config(name, dict(model.get("config") or {}), spec)
            assert spec is not None
            # a SQL model's new rows are a temporary view, a Python model's a table
            # (a SQL model's relation keeps its schema but does not render it: include_policy)
            source = _relation_name(new_rows) if new_rows.include_policy.schema else new_rows.identifier
            assert source is not None  # the model's relation names its temporary view
            line = logged_merge.run(self._engine().ctx, config, spec, table, source)
        except (LogContractError, logged_merge.LoggedMergeError) as exc:
            raise self._people_error(exc) from exc
        return line

    @available
    def mv_log_create(self, graph: Mapping[str, Any], masters: Sequence[str] | None = None) -> list[str]:
        """Create the declared logs that do not exist yet (``create materialized view log``)."""
        from dbt_incremental_mv.logs import sql as log_sql

        done = []
        metadata = self._metadata()
        for spec in self._log_specs(graph, masters):
            if metadata.columns(spec.log_relation):
                done.append(f"{spec.log_relation}: exists")
                continue
            master_columns = metadata.columns(spec.master_relation)
            if not master_columns:
                raise DbtRuntimeError(f"Cannot create the {spec.describe()}: the master does not exist.")
            if spec.capture:
                done.append(self._engine().capture(spec, None, graph))
            else:
                self._run(log_sql.create_log(spec, master_columns))
                done.append(f"created {spec.log_relation}")
        return done

    @available
    def mv_refresh_on_commit(
        self, master: BaseRelation, graph: Mapping[str, Any], commits: Sequence[int] | None = None
    ) -> list[str]:
        """Propagate a master's latest commit(s) to the views that read it (on-commit refresh)."""
        from dbt_incremental_mv.logs.contract import LogContractError

        try:
            return self._engine().on_commit(_relation_name(master), graph, self._relation_exists, commits)
        except LogContractError as exc:
            raise self._people_error(exc) from exc

    @available
    def mv_layout_advice(self, graph: Mapping[str, Any], models: Sequence[str] | None = None) -> list[str]:
        """Sort orders that let Iceberg prune files in each view's refresh (advice, not run)."""
        from dbt_incremental_mv.layout import layout_advice

        lines = []
        for node, name in self._fast_refresh_models(graph, models):
            if not self._relation_exists(name):
                lines.append(f"-- {node['name']}: not built yet")
                continue
            definition = self._engine().stored_definition(name, graph)
            if isinstance(definition, str):
                lines.append(f"-- {node['name']}: no advice ({definition})")
                continue
            lines.append(f"-- {node['name']} ({definition.view_class.value} view)")
            lines += [f"{statement};" for statement in layout_advice(definition, name)]
        return lines

    @available
    def mv_compact(
        self, graph: Mapping[str, Any], models: Sequence[str] | None = None, every: bool = False
    ) -> list[str]:
        """Compact the views whose files are due (layout.ViewFiles: the delete files and small
        files refreshes leave), or ``every`` selected view: what a fast refresh runs when due
        (refresh/phases/compact.py), for views with auto_compact=false or compacted by hand. Run
        it between refreshes (a refresh publishing meanwhile fails cleanly
        and the next run redoes it)."""
        import time

        from dbt_incremental_mv.layout import ViewFiles
        from dbt_incremental_mv.refresh.phases.compact import compaction
        from dbt_incremental_mv.refresh.state.view_state import view_state
        from dbt_incremental_mv.view_table import partitioned

        lines = []
        for node, name in self._fast_refresh_models(graph, models):
            built = self._relation_exists(name)
            state = view_state(self._metadata(), name) if built else None
            # a view maintained in steps: its internal states' tables too (refresh/units.py)
            for label, relation in [(node["name"], name), *((s, s) for s in (state.states if state else ()))]:
                table = self._metadata().table(relation) if built else None
                before = ViewFiles.of(table, partitioned(node.get("config") or {}))
                if table is None or before is None:
                    lines.append(f"{label}: not built yet")
                elif not (before.compaction_due or every):
                    lines.append(f"{label}: not due ({before.describe()})")
                else:
                    began = time.time()
                    planned = compaction(relation, before, table)
                    for statement in planned.statements:
                        self._run(statement)
                    self._metadata().forget(relation)
                    after = ViewFiles.of(self._metadata().table(relation))
                    if planned.still_due(after):
                        for statement in planned.if_still_due:  # (its small files rewritten were not enough)
                            self._run(statement)
                        self._metadata().forget(relation)
                        after = ViewFiles.of(self._metadata().table(relation))
                    lines.append(
                        f"{label}: compacted in {time.time() - began:.1f} s: {before.describe()} -> "
                        + (after.describe() if after is not None else "?")
                    )
        return lines

    @staticmethod
    def _fast_refresh_models(graph: Mapping[str, Any], models: Sequence[str] | None):
        """(node, relation name) of the project's fast_refresh models, by name; ``models`` selects."""
        if models:
            known = {n["name"] for n in graph.get("nodes", {}).values() if n.get("resource_type") == "model"}
            unknown = sorted(set(models) - known)
            if unknown:
                raise DbtRuntimeError(f"No model named {', '.join(unknown)} in this project: name fast_refresh models.")
        for node in sorted(graph.get("nodes", {}).values(), key=lambda n: n["name"]):
            if node.get("resource_type") != "model" or (node.get("config") or {}).get("materialized") != "fast_refresh":
                continue
            if models and node["name"] not in models:
                continue
            yield node, f"{node['schema']}.{node.get('alias') or node['name']}".lower()

    @available
    def mv_in_steps(self, graph: Mapping[str, Any], models: Sequence[str] | None = None) -> list[str]:
        """The built fast_refresh models maintained in steps (refresh/units.py): their last commit
        lists internal states. mv_status renders their SQL (the view stores only the query over
        its states)."""
        from dbt_incremental_mv.refresh.state.view_state import view_state

        metadata = self._metadata()
        found = []
        for node, name in self._fast_refresh_models(graph, models):
            state = view_state(metadata, name) if self._relation_exists(name) else None
            if state is not None and state.states:
                found.append(node["name"])
        return found

    @available
    def mv_status(
        self,
        graph: Mapping[str, Any],
        models: Sequence[str] | None = None,
        fail_on: Sequence[str] | None = None,
        rendered: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One line per fast_refresh view: fresh, stale, needs rebuild or unusable, and why.
        Reads only (Oracle's USER_MVIEWS.STALENESS): nothing is captured, refreshed or purged.
        ``fail_on`` names states (e.g. stale, unusable) that make the command fail, so that CI can
        gate on it: the result's ``failure`` then says which views are in them (None: none).
        ``rendered``: models' SQL rendered by the operation, by model name (those in steps)."""
        from dbt_incremental_mv.refresh.state.staleness import Staleness, view_status

        try:
            failing_states = {Staleness.named(state) for state in fail_on or ()}
        except ValueError as exc:
            raise self._people_error(exc) from exc
        engine = self._engine()
        found = [
            (
                name,
                engine.status(
                    {**node, "compiled_code": (rendered or {})[node["name"]]}
                    if node["name"] in (rendered or {})
                    else node,
                    name,
                    graph,
                )
                if self._relation_exists(name)
                else view_status(node["name"], built=False),
            )
            for node, name in self._fast_refresh_models(graph, models)
        ]
        last = self._last_refreshes(graph, [name for name, _ in found], models)
        lines = [f"{status.line()}; {last[name]}" if name in last else status.line() for name, status in found]
        failing = [status for _, status in found if status.status in failing_states]
        failure = None
        if failing:
            failure = f"mv_status: {len(failing)} view(s) in a state named by fail_on: " + ", ".join(
                f"{status.model} ({status.status.value})" for status in failing
            )
        return {"lines": lines, "failure": failure}

    def _last_refreshes(
        self, graph: Mapping[str, Any], views: Sequence[str], models: Sequence[str] | None
    ) -> dict[str, str]:
        """The newest refresh history row of each view, as a few words (one query per history table)."""
        from dbt_incremental_mv.config import ConfigError, FastRefreshConfig
        from dbt_incremental_mv.refresh.operations.history import history_relation, last_refresh_line, last_refresh_sql

        tables: dict[str, list[str]] = {}
        for node, name in self._fast_refresh_models(graph, models):
            try:
                config = FastRefreshConfig.from_model_config(node["name"], node.get("config") or {})
            except ConfigError:
                continue
            if config.refresh_history:
                tables.setdefault(history_relation(config.history_schema or node["schema"]), []).append(name)
        metadata = self._metadata()
        last = {}
        for table, names in sorted(tables.items()):
            if not metadata.columns(table):
                continue
            for view, method, reason, at, total, inserted, deleted in self._query(last_refresh_sql(table, names)):
                last[view] = last_refresh_line(method, reason, at, total, inserted, deleted)
        return last

    @available
    def mv_renderable(self, graph: Mapping[str, Any], model_name: str) -> bool:
        """Whether an operation can render the model's SQL: it has SQL and refs no ephemeral model
        (dbt refuses ``ref()`` of an ephemeral model outside a model's compilation)."""
        from dbt_incremental_mv.refresh.graph import is_ephemeral

        nodes = graph.get("nodes", {})
        for node in nodes.values():
            if node.get("resource_type") == "model" and node.get("name") == model_name:
                refs = (node.get("depends_on") or {}).get("nodes", ())
                return bool(node.get("raw_code")) and not any(is_ephemeral(nodes.get(ref, {})) for ref in refs)
        return False

    @available
    def mv_explain(self, graph: Mapping[str, Any], model_name: str, compiled_sql: str | None = None) -> list[str]:
        """What the next refresh of one fast_refresh model would do, without doing it (reads only;
        see refresh/operations/explain.py). ``compiled_sql``: the model's SQL as rendered by the operation
        (else the definition the built view stores)."""
        from dbt_incremental_mv.definition import defining_query

        if not isinstance(model_name, str) or not model_name:
            raise DbtRuntimeError("explain_fast_refresh needs a model: --args '{model: <model name>}'")
        found = list(self._fast_refresh_models(graph, [model_name]))
        if not found:
            raise DbtRuntimeError(
                f"Model '{model_name}' is not a fast_refresh model: set materialized='fast_refresh' in its config."
            )
        node, name = found[0]
        built = self._relation_exists(name)
        sql = compiled_sql or node.get("compiled_code")
        if not sql and built:
            view = self._metadata().table(name)
            sql = defining_query(view.properties) if view is not None else None
        if not sql:
            raise DbtRuntimeError(
                f"Cannot explain '{model_name}' before it is built: it refs an ephemeral model, which "
                "dbt's run-operation cannot render. Build it (dbt run -s " + model_name + "), then explain it "
                "from the definition its build stores."
                if not self.mv_renderable(graph, model_name)
                else f"Cannot explain '{model_name}': its SQL could not be rendered."
            )
        lines = self._engine().explain(node, sql, name, built, graph)
        if not compiled_sql and not node.get("compiled_code"):
            lines.insert(1, "-- from the definition stored at its last build (it refs an ephemeral model)")
        return lines

    @available
    def mv_log_capture(self, graph: Mapping[str, Any], masters: Sequence[str] | None = None) -> list[str]:
        """Append the masters' committed changes to their capture-managed logs."""
        done = []
        metadata = self._metadata()
        for spec in self._log_specs(graph, masters):
            if not spec.capture:
                continue
            if not metadata.columns(spec.master_relation):
                raise DbtRuntimeError(f"Cannot capture into the {spec.describe()}: the master does not exist.")
            done.append(self._engine().capture(spec, None, graph))
        return done

    @available
    def mv_mismatch_sql(self, relation: BaseRelation) -> str:
        """The generic test ``matches_defining_query``: the rows where the stored view and its
        defining query (the SQL it was built from) recomputed now differ."""
        from dbt_incremental_mv.consistency import NotAFastRefreshView, mismatch_sql
        from dbt_incremental_mv.definition import defining_query

        name = _relation_name(relation)
        table = self._metadata().table(name)
        if table is None:
            raise DbtRuntimeError(f"matches_defining_query: {name} does not exist (run dbt run first).")
        try:
            return mismatch_sql(name, list(table.columns), defining_query(table.properties))
        except NotAFastRefreshView as exc:
            raise self._people_error(exc) from exc
