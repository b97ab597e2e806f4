"""File lines keep their file's order whichever partitions the file's splits land in."""

import pyarrow as pa

from adapters.spark.stream import number_lines


def partition(*splits, rows_per_batch=7, first_line=None):
    """Arrow batches of one partition holding ``splits`` ((file, block start, lines), ...) in turn."""
    rows, seen = [], dict(first_line or {})
    for file, start, lines in splits:
        first = seen.get(file, 0)
        rows += [(f"{file}:{line}".encode(), file, start) for line in range(first, first + lines)]
        seen[file] = first + lines
    for at in range(0, len(rows), rows_per_batch):
        chunk = rows[at : at + rows_per_batch]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([r[0] for r in chunk], pa.binary()),
                pa.array([r[1] for r in chunk]),
                pa.array([r[2] for r in chunk], pa.int64()),
                pa.array([0] * len(chunk), pa.int64()),
            ],
            names=["value", "source", "block_start", "file_time"],
        )


def orders(*partitions):
    found = {}
    for batches in partitions:
        for batch in number_lines(batches):
            for value, ord_ in zip(batch.column("value").to_pylist(), batch.column("ord").to_pylist()):
                found[value.decode()] = ord_
    return found


def file_order(found, file):
    lines = sorted((key for key in found if key.startswith(f"{file}:")), key=lambda k: int(k.split(":")[1]))
    return [found[line] for line in lines]


def test_a_file_split_across_partitions_keeps_its_line_order_after_other_files():
    # part-3 (whole, 200 lines) packed before part-4's first split; part-4's second split
    # (from byte 150) alone in another partition: its first lines must still come after
    # every line of the first split.
    found = orders(
        partition(("part-3", 0, 200), ("part-4", 0, 40)), partition(("part-4", 150, 30), first_line={"part-4": 40})
    )
    part4 = found["part-4:0"], found["part-4:39"]
    assert part4 == (0, 39)
    assert found["part-3:199"] == 199
    first_split_last = found["part-4:39"]
    assert all(found[f"part-4:{line}"] > first_split_last for line in range(40, 70))


def test_splits_in_one_partition_each_count_from_their_own_start():
    found = orders(partition(("a", 0, 5), ("b", 0, 3), ("a", 100, 4), rows_per_batch=2))
    assert [found[f"a:{line}"] for line in range(5)] == [0, 1, 2, 3, 4]
    assert [found[f"b:{line}"] for line in range(3)] == [0, 1, 2]
    assert [found[f"a:{line}"] for line in range(5, 9)] == [100, 101, 102, 103]


def test_one_split_over_many_batches_counts_on():
    found = orders(partition(("a", 0, 50), rows_per_batch=3))
    assert file_order(found, "a") == list(range(50))
