"""The Spark engine's shared vocabulary, at the bottom floor of its packages: the setup
errors (``errors``), the micro-batch's time as columns (``batch_time``), the state key as
columns (``keys``) and the endpoints a job reads and writes (``endpoints``). Every other
package of the engine may import these; they import none of them."""
