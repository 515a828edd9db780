from dbt_incremental_mv import __version__ as version  # noqa: F401
