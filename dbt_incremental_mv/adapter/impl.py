"""The ``spark_mv`` adapter: dbt-spark's adapter plus the bridge from Jinja to the Python core.

The materialization calls the ``@available`` methods here; they decide (validate configs,
plan the refresh) and the macros render and run the SQL they are given.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.base import AdapterTrackingRelationInfo, available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv import __version__
from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager
from dbt_incremental_mv.config import ConfigError, FastRefreshConfig
from dbt_incremental_mv.refresh_plan import FastRefreshUnavailable, RefreshDecision, decide_refresh

# Until the view-class modules land, no view can be fast refreshed.
_FAST_REFRESH_BLOCKER = f"incremental refresh is not available yet in dbt-incremental-mv {__version__}"


class SparkMVAdapter(SparkAdapter):
    ConnectionManager = SparkMVConnectionManager

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> AdapterTrackingRelationInfo:
        # The base class derives the module name from the class name (dbt.adapters.sparkmv).
        from dbt.adapters.__about__ import version as base_version

        return AdapterTrackingRelationInfo(
            adapter_name="spark_mv",
            base_adapter_version=base_version,
            adapter_version=__version__,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    def drop_schema(self, relation: BaseRelation) -> None:
        # Iceberg's Hadoop catalog refuses DROP SCHEMA ... CASCADE while the schema holds tables.
        for existing in self.list_relations_without_caching(relation.without_identifier()):
            self.drop_relation(existing)
        super().drop_schema(relation)

    @available
    def fast_refresh_plan(self, model: dict, existing_type: str | None, full_refresh: bool) -> RefreshDecision:
        """Validate the model's config and decide how this run refreshes it.

        Raises a dbt error, before anything is changed, for a bad config or for
        refresh_method='fast' on a view that cannot be fast refreshed.
        """
        name = model.get("name", "?")
        try:
            config = FastRefreshConfig.from_model_config(name, model.get("config") or {})
            return decide_refresh(
                name,
                config,
                existing_type=existing_type,
                full_refresh=full_refresh,
                fast_refresh_blocker=_FAST_REFRESH_BLOCKER,
            )
        except (ConfigError, FastRefreshUnavailable) as exc:
            raise DbtRuntimeError(str(exc)) from exc
