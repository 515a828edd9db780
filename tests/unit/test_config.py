import pytest

from dbt_incremental_mv.config import REFRESH_METHODS, ConfigError, FastRefreshConfig


def test_default_refresh_method_is_force():
    assert FastRefreshConfig.from_model_config("m", {}).refresh_method == "force"
    assert FastRefreshConfig.from_model_config("m", {"refresh_method": None}).refresh_method == "force"


@pytest.mark.parametrize("value", REFRESH_METHODS)
def test_allowed_refresh_methods(value):
    assert FastRefreshConfig.from_model_config("m", {"refresh_method": value}).refresh_method == value


def test_refresh_method_is_case_and_space_insensitive():
    assert FastRefreshConfig.from_model_config("m", {"refresh_method": " FAST "}).refresh_method == "fast"


@pytest.mark.parametrize("value", ["sometimes", "", "incremental", 1, ["fast"]])
def test_bad_refresh_method_names_value_and_allowed_ones(value):
    with pytest.raises(ConfigError) as err:
        FastRefreshConfig.from_model_config("my_view", {"refresh_method": value})
    message = str(err.value)
    assert "my_view" in message
    assert repr(value) in message
    for allowed in REFRESH_METHODS:
        assert f"'{allowed}'" in message


@pytest.mark.parametrize("value", ["iceberg", "ICEBERG", None])
def test_iceberg_file_format_accepted(value):
    FastRefreshConfig.from_model_config("m", {"file_format": value})


@pytest.mark.parametrize("value", ["delta", "parquet", "hudi"])
def test_other_file_formats_refused(value):
    with pytest.raises(ConfigError, match=f"file_format='{value}'.*Iceberg"):
        FastRefreshConfig.from_model_config("m", {"file_format": value})


def test_grants_on_a_spark_without_grant_are_refused_naming_the_model():
    from dbt_incremental_mv.config import grants_unsupported_error

    error = grants_unsupported_error("v", "[PARSE_SYNTAX_ERROR] Syntax error at or near 'on': missing 'FUNCTIONS'")
    assert error is not None and "Model 'v': grants are configured" in str(error)
    assert grants_unsupported_error("v", "Operation not allowed: grant") is not None
    # another failure (a Spark with grants, the view not built yet): not judged here
    assert grants_unsupported_error("v", "[TABLE_OR_VIEW_NOT_FOUND] The table `s`.`v` cannot be found") is None


def test_indexed_state_is_auto_by_default_and_a_boolean_forces_it():
    from dbt_incremental_mv.config import IndexedState

    def parsed(value):
        return FastRefreshConfig.from_model_config("m", {"indexed_state": value}).indexed_state

    assert FastRefreshConfig.from_model_config("m", {}).indexed_state is IndexedState.AUTO
    assert parsed(True) is IndexedState.ON and parsed(False) is IndexedState.OFF
    assert parsed(" Auto ") is IndexedState.AUTO and parsed("false") is IndexedState.OFF
    assert parsed(None) is IndexedState.AUTO
    for wrong in ("yes", 1):
        with pytest.raises(ConfigError, match="Model 'm': indexed_state=.* must be 'auto', true or false"):
            parsed(wrong)
