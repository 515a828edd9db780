"""``python -m tests.dbt_with_faults <dbt arguments>``: the dbt command line with the tests'
fault injection installed (tests/faults.py), for a refresh a test kills or pauses in another
process."""

import sys

from dbt.cli.main import cli

from tests.faults import install

if __name__ == "__main__":
    install()
    sys.exit(cli())
