"""What the tests share: the service fixtures, Kafka I/O, the reference streams, the golden scenarios, the hostile records, the fault harness and the import checker."""
