"""Where the zoo's log records go: the `zoo` logger and its children (`zoo.training.trainer`,
`zoo.weights`, ...), as a library's should, so that an application routes them with `logging`.

While the application has not set up logging (the root logger has no handler), the records are
written where a command-line user expects them: INFO (a training run's progress lines) to
standard output and warnings to standard error, the message alone. Once it has
(`logging.basicConfig(...)`, a framework's handlers), they reach its handlers only. This module
imports nothing of the zoo.
"""

import logging
import sys

LOGGER = logging.getLogger("zoo")


class UnconfiguredHandler(logging.Handler):
    """Writes a record to stdout (below WARNING) or stderr while the root logger has no handler."""

    def emit(self, record):
        if logging.getLogger().handlers:  # the application's handlers receive it by propagation
            return
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001  (logging's own rule: a handler never raises)
            self.handleError(record)


def install():
    """Gives the `zoo` logger its level (INFO) and its one `UnconfiguredHandler` (once)."""
    if LOGGER.level == logging.NOTSET:
        LOGGER.setLevel(logging.INFO)
    if not any(isinstance(h, UnconfiguredHandler) for h in LOGGER.handlers):
        LOGGER.addHandler(UnconfiguredHandler())
