"""Node tier: nodes spun in-process on executor threads, sharing a 2-core machine with
whatever else runs there; a test that fails once is run once more (``helpers.rerun_once``).
"""

from helpers import rerun_once


def pytest_collection_modifyitems(config, items):
    rerun_once(items)
