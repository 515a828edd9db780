"""refresh_on_commit's commit ids are integers, never text pasted into SQL."""

import pytest

from dbt_incremental_mv.logs.contract import LogContractError
from dbt_incremental_mv.refresh.operations.on_commit import commit_ids


def test_integers_and_integer_strings():
    assert commit_ids([1, "42", 7.0]) == (1, 42, 7)
    assert commit_ids("5") == (5,)


@pytest.mark.parametrize("bad", ["1) or (1=1", "1; drop table t", 1.5, True, None, "0x10"])
def test_anything_else_is_refused_naming_it(bad):
    with pytest.raises(LogContractError, match="is not a commit id"):
        commit_ids([bad])
