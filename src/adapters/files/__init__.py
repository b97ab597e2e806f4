"""JSONL files, stdin and stdout as sources and sinks."""
