import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.fixtures import (  # noqa: E402,F401
    hdfs,
    hdfs_uri,
    kafka_bootstrap,
    kafka_broker,
    own_broker,
    own_redis,
    prometheus,
    redis_server,
    redis_url,
)
