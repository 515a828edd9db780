"""Generated view definitions (issue 37), a fixed seed: each is refused before anything is
created, naming the construct, or built and then maintained exactly through rounds of random
DML (batched and single-statement, NULLs, key updates, a master emptied and refilled), every
view compared with its query recomputed on the masters after every fast refresh.

By hand, more definitions and any seed: ``scripts/fuzz.sh --definitions 2000 --seed S``."""

import os

import pytest

from tests.fuzz.check import GeneratedCheck, fails_alone, model_files
from tests.fuzz.generator import Generator
from tests.fuzz.shrink import keep_regression, regressions, shrink

SEED = int(os.environ.get("DBT_MV_FUZZ_SEED", "37"))
DEFINITIONS = int(os.environ.get("DBT_MV_FUZZ_DEFINITIONS", "20"))
ROUNDS = int(os.environ.get("DBT_MV_FUZZ_ROUNDS", "3"))
THREADS = int(os.environ.get("DBT_MV_FUZZ_THREADS", "1"))


class TestGeneratedViews:
    # the seed's definitions, and the shrunk failures of earlier runs (tests/fuzz/regressions.json)
    DEFINITIONS = Generator(SEED).definitions(DEFINITIONS) + regressions()

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        # DBT_MV_FUZZ_THREADS=N refreshes N views at once (each its own Spark session); 1 by
        # default: on 2 cores 4 threads saved a fifth of the time (20 definitions: 223 s, 269 s)
        return {**dbt_profile_target, "threads": THREADS}

    @pytest.fixture(scope="class")
    def models(self):
        return model_files(self.DEFINITIONS)

    def test_each_is_refused_or_maintained_exactly(self, project):
        # the default run's 20 (and the regression cases) are far fewer than issue 37's 150: a
        # generated view's fast refresh takes 1-10 s of Spark planning here, and the whole CI must
        # finish within its time limit; the 2,000-definition run is by hand (scripts/fuzz.sh, in a
        # JVM of its own; docs/correctness.md)
        if "DBT_MV_FUZZ_DEFINITIONS" not in os.environ:
            assert len([d for d in self.DEFINITIONS if d.refused is None]) >= 15
        outcome = GeneratedCheck(project, self.DEFINITIONS, SEED).run(ROUNDS)
        table = f"seed {SEED}, {len(self.DEFINITIONS)} definitions, {ROUNDS} rounds\n\n{outcome.table()}\n"
        print(table)
        if os.environ.get("DBT_MV_FUZZ_SUMMARY"):
            with open(os.environ["DBT_MV_FUZZ_SUMMARY"], "w") as summary:
                summary.write(table + "".join(f"\n- {failure}" for failure in outcome.failures) + "\n")
        if outcome.failures and os.environ.get("DBT_MV_FUZZ_SHRINK"):  # by hand: keep each failure, shrunk
            failed = [d for d in self.DEFINITIONS if any(f.startswith(f"{d.name}:") for f in outcome.failures)]
            for definition in failed:
                small = shrink(definition, lambda c: fails_alone(project, c, SEED, ROUNDS), budget=60)
                keep_regression(small, f"seed {SEED}: " + next(f for f in outcome.failures
                                                               if f.startswith(f"{definition.name}:")).splitlines()[0])
        assert not outcome.failures, "\n".join(outcome.failures)
