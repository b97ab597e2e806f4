"""Closing the kafka engine's clients, bounded also when librdkafka stopped answering.

After a producer got stuck (``ProducerStuck``: librdkafka stopped answering after a broker
restart) closing the other clients can block for ever too, and not only in Python. In CI on
2026-12-05 the process of such an engine stayed up 60 s after SIGTERM with its main thread
waiting for the GIL while a thread was inside ``Consumer.close``: a consumer's close serves its
group's revocation through confluent-kafka's rebalance callback, which keeps the GIL while it
asks librdkafka to drop the assignment. No Python thread runs again then, so a timeout kept in
Python never fires.

So a stuck engine's clients are closed by a daemon thread given ``STUCK_CLOSE_TIMEOUT`` s,
under a watchdog that needs no GIL (``faulthandler.dump_traceback_later``, a C thread): if the
process is still closing ``STUCK_EXIT_MARGIN`` s after that, it prints every thread's stack to
stderr and exits with status 1, so that its supervisor starts it again. The watchdog is the
process's one ``faulthandler`` timer; an embedding application's own timer is cancelled by it.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading

log = logging.getLogger(__name__)
STUCK_CLOSE_TIMEOUT = 10.0  # seconds the clients of a stuck engine are given to close
STUCK_EXIT_MARGIN = 5.0  # seconds more before a process whose close holds the GIL exits


def close_clients(resources: list, stuck_timeout: float = STUCK_CLOSE_TIMEOUT) -> None:
    """Close ``resources`` in order, emptying the list.

    When one of them is ``stuck`` the closing runs in a daemon thread: if it has not ended
    after ``stuck_timeout`` s the clients are left (logged); if the process cannot even get
    that far (the GIL held in librdkafka) it exits ``STUCK_EXIT_MARGIN`` s later, status 1.
    """
    if not any(getattr(r, "stuck", False) for r in resources):
        _close_all(resources)
        return
    exit_after = stuck_timeout + STUCK_EXIT_MARGIN
    log.error(
        "a Kafka producer is stuck: closing the clients; a process still closing them after %gs "
        "exits (status 1) with every thread's stack on stderr",
        exit_after,
    )
    faulthandler.dump_traceback_later(exit_after, exit=True, file=sys.__stderr__ or sys.stderr)
    try:
        closing = threading.Thread(target=_close_all, args=(resources,), daemon=True, name="close-stuck")
        closing.start()
        closing.join(stuck_timeout)
        if closing.is_alive():
            log.error(
                "closing the Kafka clients did not end within %gs after a producer got stuck; leaving them",
                stuck_timeout,
            )
    finally:
        faulthandler.cancel_dump_traceback_later()


def _close_all(resources: list) -> None:
    while resources:
        resources.pop(0).close()
