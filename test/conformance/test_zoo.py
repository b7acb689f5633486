"""The conformance tier: one battery, the same for every model of the zoo.

Every model of ``mujoco_hal_ros.conformance.zoo`` (Menagerie copies, dm_control's suite,
gymnasium, gymnasium-robotics and metaworld assets, a passive box, and torque- and
velocity-driven variants of the arms) runs the checks of ``conformance.battery`` once; each
(model, check) is a test case. A check that does not apply is skipped with its reason; a
model whose package is missing is skipped saying which. A cell listed in
``zoo.KNOWN_FAILURES`` that fails is an expected failure with its reason; any other failure
fails the tier.
``bench/conformance.py`` prints the same table.
"""

from helpers import zoo_cell
import pytest

from mujoco_hal_ros.conformance import battery, zoo

MODELS = zoo.models()


@pytest.mark.parametrize('check', battery.CHECKS)
@pytest.mark.parametrize('name', [z.name for z in MODELS])
def test_zoo(name, check):
    zoo_cell(name, check)
