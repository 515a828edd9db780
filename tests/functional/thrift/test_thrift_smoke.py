"""Every view class built, changed, refreshed and checked through a real Spark Thrift Server
(``method: thrift``: the metadata read over SQL, the statements run by the server): the CI's
Thrift test: a batched change (a MERGE per master, inserts, updates, key updates and deletes in
one commit each). The rest of this directory runs in scripts/test_matrix.sh."""

from tests.functional import test_smoke


class TestEveryViewClassOverThrift(test_smoke.TestEveryViewClass):
    ROUNDS = ("batched",)
