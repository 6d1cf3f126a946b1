"""``prunewarden audit collect --from kafka://HOST:PORT/TOPIC --out DIR``: the files of the
HTTP collector, read from the topic ``serve --ship kafka://...`` produces to.

Runs until SIGTERM or SIGINT (exit 0). A URL that cannot work, or the ``kafka`` extra missing,
is a usage error (exit 2); a file that cannot be written (a full disk) stops it (exit 1) before
the offsets of what it read are committed. A message skipped (not a record of a replica's
chain) is one line on standard error naming its partition and offset.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path
from typing import IO

from prunewarden.cli._common import UsageError
from prunewarden.errors import ExitCode
from prunewarden.shipping import ShipError


def collect_from_kafka(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Consume ``args.source`` into ``args.out`` until a signal asks to stop."""
    try:
        # The extra, imported on use (not to dodge a cycle: that module imports no CLI).
        from prunewarden.shipping._kafka_collect import KafkaCollector  # noqa: PLC0415
    except ImportError:
        msg = "prunewarden audit collect --from kafka://...: needs the kafka extra: "
        raise UsageError(msg + "pip install 'prunewarden[kafka]'") from None
    if args.token_file is not None:
        raise UsageError("prunewarden audit collect: --token-file goes with --listen, not --from")

    def refused(line: str) -> None:
        stderr.write(f"prunewarden audit collect: {line}\n")
        stderr.flush()

    key_text = os.environ.get(args.key_env, "")
    try:
        collector = KafkaCollector(
            args.source,
            Path(args.out),
            key=key_text.encode("utf-8") if key_text else None,
            on_refused=refused,
        )
    except ShipError as exc:
        raise UsageError(f"prunewarden audit collect: {exc}") from None
    except OSError as exc:
        raise UsageError(f"prunewarden audit collect: {exc.strerror or exc}") from None
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        stdout.write(
            f"prunewarden audit collect: reading {collector.name} (group {collector.group})"
            f", writing to {args.out}\n"
        )
        stdout.flush()
        collector.run(stop)
    except OSError as exc:  # a full disk: nothing read since the last commit is committed
        stderr.write(
            f"prunewarden audit collect: {exc.filename or args.out}: {exc.strerror or exc}: "
            "stopped; what was read "
            "since the last commit is read again at the next start\n"
        )
        return ExitCode.REFUSED
    finally:
        collector.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stdout.write("prunewarden audit collect: stopped\n")
    return ExitCode.OK
