"""The request queues of every service and action server the nodes offer.

rclpy's default keeps the last 10 requests per service: a burst from 30 clients at once
lost 20 of them with no reply and no log (a lost ``hold`` is a safety fault). Requests are
small and each is answered, so a deep queue costs little; a burst beyond it is the
client's to retry.
"""

from rclpy.qos import QoSProfile

REQUEST_DEPTH = 100

REQUEST_QOS = QoSProfile(depth=REQUEST_DEPTH)


def action_queues() -> dict[str, QoSProfile]:
    """Keyword arguments for ``ActionServer``: the same deep queue on its three services."""
    return {'goal_service_qos_profile': REQUEST_QOS,
            'result_service_qos_profile': REQUEST_QOS,
            'cancel_service_qos_profile': REQUEST_QOS}
