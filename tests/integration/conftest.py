"""Integration tests run against a real Kafka broker and a real redis-server (see ``fixtures``)."""

from tests.integration.fixtures import (kafka_bootstrap, kafka_broker, own_redis,  # noqa: F401
                                        redis_server, redis_url)
