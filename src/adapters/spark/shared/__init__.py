"""The Spark engine's shared vocabulary, at the bottom floor of its packages: the setup
errors (``_errors``), the micro-batch's time as columns (``_batch_time``), the state key as
columns (``_keys``) and the endpoints a job reads and writes (``_endpoints``). Every other
package of the engine may import these; they import none of them."""

from adapters.spark.shared._batch_time import (
    CLOCK,
    batch_timestamp,
    clock_micros,
    clock_millis,
    clock_seconds,
    with_clock,
)
from adapters.spark.shared._endpoints import Endpoint, parse_uri
from adapters.spark.shared._errors import (
    CheckpointInUse,
    CheckpointOfAnotherJob,
    CorruptFile,
    InputMissing,
    PartlyCommitted,
    SparkSetupError,
)
from adapters.spark.shared._keys import (
    escaped,
    from_legacy_column,
    join_escaped,
    key_column,
    key_parts,
    rule_column,
    unescaped,
)

__all__ = [
    "CLOCK",
    "CheckpointInUse",
    "CheckpointOfAnotherJob",
    "CorruptFile",
    "Endpoint",
    "InputMissing",
    "PartlyCommitted",
    "SparkSetupError",
    "batch_timestamp",
    "clock_micros",
    "clock_millis",
    "clock_seconds",
    "escaped",
    "from_legacy_column",
    "join_escaped",
    "key_column",
    "key_parts",
    "parse_uri",
    "rule_column",
    "unescaped",
    "with_clock",
]
