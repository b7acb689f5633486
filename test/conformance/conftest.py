"""The zoo cells' models, planned once the selection is known (see ``helpers.zoo_plan``)."""

from helpers import zoo_close, zoo_plan


def pytest_collection_modifyitems(session, config, items):
    zoo_plan([item.callspec.params['name'] for item in items
              if getattr(item, 'originalname', '') in ('test_zoo', 'test_urdf_zoo')])


def pytest_sessionfinish(session, exitstatus):
    zoo_close()
