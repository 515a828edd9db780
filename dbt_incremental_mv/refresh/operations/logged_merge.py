"""The ``logged_merge`` incremental strategy: dbt's merge of an incremental model's new rows, which
also appends the rows it changed to the model's change log, so that the ``fast_refresh`` models
built on it read their changes from the log without capturing the model's history.

One run of the strategy (the commits ordered as own_log.py explains):

1. the model's new rows (dbt's temporary view) are computed once into a cached view, so every
   later read sees the same rows (none: nothing else runs, no commit);
2. ``MERGE`` of them into a write branch of the model's table made at its current snapshot;
3. the rows of the keys merged, as they were and as they are on the branch, compared into a
   branch of the log (only the rows that changed are logged);
4. the table's ``main`` moves to the merge (a compare-and-swap: a commit to the table by anyone
   else meanwhile fails the run, nothing applied), then the log's ``main`` to its rows.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases import own_log
from dbt_incremental_mv.refresh.phases.publish import cache_planning, write_branch
from dbt_incremental_mv.refresh.views.statement import Cached, branch_target
from dbt_incremental_mv.sql_text import broadcast, ident, idents, relation

SOURCE, DEST = "DBT_INTERNAL_SOURCE", "DBT_INTERNAL_DEST"  # dbt's aliases (incremental_predicates name them)
# From Spark 4.1 a cached view that keeps its analysed plan cannot be the source of a MERGE into a
# table it reads (the model's new rows read the model: "No plan for TableReference", SPARK-57539,
# fixed in 4.2): there the new rows are cached with their SQL text. Nothing is lost: the merge
# goes to a branch made at the snapshot they were computed on, and main moving meanwhile fails
# the run at its compare-and-swap.
ANALYSED_MERGE_SOURCE_FAILS = (4, 1)


class LoggedMergeError(RuntimeError):
    """The logged merge cannot run (configuration) or lost a race; nothing was changed."""


@dataclass(frozen=True)
class MergeConfig:
    model_name: str
    unique_key: tuple[str, ...]
    predicates: tuple[str, ...] = ()  # dbt's incremental_predicates
    update_columns: tuple[str, ...] | None = None  # merge_update_columns (None: every column)
    exclude_columns: tuple[str, ...] = ()  # merge_exclude_columns

    @classmethod
    def from_model_config(cls, model_name: str, config: dict, spec: LogSpec | None) -> MergeConfig:
        where = f"Model '{model_name}' (incremental_strategy='logged_merge')"
        if spec is None:
            raise LoggedMergeError(
                f"{where}: no change log of {model_name} is declared. Declare one as a dbt source whose "
                f"meta.mv_log names this model as its master and its unique key, e.g. "
                f"meta: {{mv_log: {{master: {model_name}, key: [<unique_key columns>]}}}}."
            )
        unique_key = config.get("unique_key")
        keys = [unique_key] if isinstance(unique_key, str) else list(unique_key or [])
        keys = [k.strip().lower() for k in keys if isinstance(k, str) and k.strip()]
        if not keys:
            raise LoggedMergeError(
                f"{where}: set unique_key (the model's key, the same as its change log's: {list(spec.key)})."
            )
        if set(keys) != set(spec.key):
            raise LoggedMergeError(
                f"{where}: unique_key {keys} differs from the key of its {spec.describe()}: {list(spec.key)}. "
                "Make them the same columns."
            )
        predicates = config.get("incremental_predicates") or config.get("predicates") or ()
        predicates = (predicates,) if isinstance(predicates, str) else tuple(predicates)
        update = config.get("merge_update_columns")
        exclude = config.get("merge_exclude_columns") or ()
        return cls(
            model_name,
            tuple(spec.key),
            tuple(str(p) for p in predicates),
            tuple(c.lower() for c in update) if update else None,
            tuple(c.lower() for c in exclude),
        )


def merge_sql(config: MergeConfig, target: str, source_view: str, columns: Sequence[str]) -> str:
    """dbt's merge (update the matched rows, insert the others), of the cached new rows into
    ``target`` (the write branch)."""
    on = [f"{DEST}.{ident(k)} = {SOURCE}.{ident(k)}" for k in config.unique_key] + [f"({p})" for p in config.predicates]
    if config.update_columns is None and not config.exclude_columns:
        update = "*"
    else:
        chosen = config.update_columns if config.update_columns is not None else columns
        update = ", ".join(
            f"{DEST}.{ident(c)} = {SOURCE}.{ident(c)}" for c in chosen if c not in config.exclude_columns
        )
    return (
        f"merge into {target} as {DEST}\nusing {ident(source_view)} as {SOURCE}\non {' and '.join(on)}\n"
        f"when matched then update set {update}\nwhen not matched then insert *"
    )


def keys_merged(config: MergeConfig, source_view: str) -> str:
    """The rows of the keys the merge read: every row it updated or inserted is one (alias ``_mv_v``)."""
    return f"({idents(config.unique_key)}) in ({broadcast(f'select {idents(config.unique_key)} from {ident(source_view)}')})"


def run(ctx: RefreshContext, config: MergeConfig, spec: LogSpec, table: str, new_rows: str) -> str:
    """Merge ``new_rows`` (dbt's temporary view of the model's new rows, or ``schema.table`` of a
    Python model's) into ``table`` and log
    the change; returns what was done (for the log)."""
    meta = ctx.metadata
    note = own_log.ensure_exists(ctx, spec)  # first merge since the log was declared: logged from here on
    meta.forget(table)
    base = meta.main(table)
    if base is None:
        raise LoggedMergeError(f"Model '{config.model_name}': its table {table} has no snapshot to merge into.")
    cached = f"mv_merge_{secrets.token_hex(6)}"
    branch = write_branch()
    source = relation(new_rows) if "." in new_rows else ident(new_rows)
    before, after = cache_planning(analysed_plans=meta.spark() < ANALYSED_MERGE_SOURCE_FAILS)
    try:
        meta.apply_settings(before)
        ctx.execute(Cached(cached, f"select * from {source}").statement)
    finally:
        meta.apply_settings(after)
    pending = None
    try:
        if not ctx.query(f"select 1 from {ident(cached)} limit 1"):  # (read from the cache)
            return "no new rows: nothing merged or logged"
        meta.create_branch(table, branch, base)
        columns = [c for c, _ in meta.columns(table)]
        ctx.execute(merge_sql(config, branch_target(table, branch), cached, columns))
        meta.forget(table)
        merged = meta.branch_head(table, branch)
        assert merged is not None
        written = own_log.write(ctx, spec, table, base, merged, own_log.ChangedRows(keys_merged(config, cached)))
        if isinstance(written, str):
            note = f"{spec.log_relation} not written ({written})"
        else:
            pending = written
        try:
            meta.fast_forward(table, base, branch=branch)
        except Exception as exc:
            if not lost_race(exc):
                raise
            raise LoggedMergeError(
                f"another commit to {table} came first while model '{config.model_name}' merged: nothing was applied; "
                "rerun it"
            ) from exc
        if pending is not None:
            note = own_log.publish(ctx, pending)
            pending = None
        return f"merged into {table}; {note}" if note else f"merged into {table}"
    finally:
        if pending is not None:
            own_log.abandon(ctx, [pending])
        meta.drop_branch(table, branch)
        meta.drop_temp_view(cached)
        meta.forget(table)
