"""Kafka adapters (confluent-kafka) and the ``kafka`` engine.

``config`` (URIs, client settings, redaction), ``topics`` (start-up checks), ``source``,
``producer`` (the shared producer), ``sink``, ``dead_letters``, ``notifications``,
``transactions`` (exactly-once batches), ``errors`` (what it raises) and ``engine`` (the
wiring). Imported only when the kafka engine is chosen.
"""
