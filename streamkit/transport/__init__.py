"""Kafka drivers behind one interface (see base.py); pick one with ``Settings.driver``."""
from __future__ import annotations

from ..settings import Settings
from .base import TP, Admin, Consumer, Driver, Message, Producer, TopicInfo, TopicSpec


def create_driver(settings: Settings) -> Driver:
    """The driver named by ``settings.driver``; imports only the client it needs."""
    if settings.driver == "aiokafka":
        from .aiokafka_driver import AiokafkaDriver

        return AiokafkaDriver(settings)
    if settings.driver == "confluent":
        from .confluent_driver import ConfluentDriver

        return ConfluentDriver(settings)
    from .memory import MemoryDriver

    return MemoryDriver(settings)


__all__ = ["TP", "Admin", "Consumer", "Driver", "Message", "Producer", "TopicInfo", "TopicSpec", "create_driver"]
