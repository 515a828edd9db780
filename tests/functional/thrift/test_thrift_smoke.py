"""View classes built, changed, refreshed and checked through a real Spark Thrift Server
(``method: thrift``: the metadata read over SQL, the statements run by the server): the CI's
Thrift test. The connection changes how statements and metadata reads travel, not which
statements a view class runs (every class runs in the Spark 3.5 suite and the Spark 4 smoke): at
the CI's depth a join view writing its own change log, an aggregate with every function and a
view over the join view refreshed from that log, through a batched change (a MERGE per master:
inserts, updates, key updates and deletes in one commit each); at full depth
(scripts/test_matrix.sh) every view class, and the rest of this directory."""

from tests.depth import full
from tests.functional import test_smoke

CLASSES = ("smoke_join", "smoke_aggregate", "smoke_over_view")


class TestEveryViewClassOverThrift(test_smoke.TestEveryViewClass):
    VIEWS = test_smoke.VIEWS if full() else {name: test_smoke.VIEWS[name] for name in CLASSES}
    ROUNDS = ("batched",)
