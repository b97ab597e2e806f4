"""The spark-submit entrypoint: the same settings as the CLI, the Spark engine.

    spark-submit --master local[2] --jars "$(ls .cache/jars/spark-kafka/*.jar | paste -sd,)" \\
        src/app/spark_submit.py --config dedup.yaml

Settings come from ``DEDUP_*`` variables and the config file exactly as for ``dedup run``;
the engine is always ``spark``. ``--master`` given to spark-submit wins over
``spark.master`` (``local[*]`` by default).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cli import main


def submit(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return main(["run", "--engine", "spark", *args])


if __name__ == "__main__":
    sys.exit(submit())
