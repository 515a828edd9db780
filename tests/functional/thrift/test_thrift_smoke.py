"""Every view class built, changed, refreshed and checked through a real Spark Thrift Server
(``method: thrift``: the metadata read over SQL, the statements run by the server): the CI's
Thrift test. The rest of this directory runs in scripts/test_matrix.sh."""

from tests.functional.test_smoke import TestEveryViewClass


class TestEveryViewClassOverThrift(TestEveryViewClass):
    pass
