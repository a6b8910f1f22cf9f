"""The embedded broker: kombu's filesystem transport with atomic message files.

kombu's ``filesystem`` transport writes a message file in place (open, write, close) while another
process may already be moving it out of the queue folder: a consumer that wins that race reads an
empty file, fails with ``JSONDecodeError`` and the worker stops ("Unrecoverable error"); seen with
two workers under a 1,000-cluster poll. Here a message is written under a name no consumer matches
and renamed into place, which is atomic on one filesystem.

Limits of the embedded broker (by design of the transport, not fixed here): a message is removed
from the queue when a worker takes it, so ``acks_late`` cannot bring back the tasks a killed worker
held. FedPortal recovers those with sweeps instead (``federation.tasks.resume_stale_targets_task``;
probes are simply repeated by the next poll). Use Redis or RabbitMQ beyond one machine.
"""

import os
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue):
        # The folder briefly gone (a restore, a remount, a "broker restart"): an empty queue for now,
        # not a worker that stops with FileNotFoundError.
        try:
            return super()._get(queue)
        except FileNotFoundError:
            raise Empty() from None

    def _size(self, queue):
        try:
            return super()._size(queue)
        except FileNotFoundError:
            return 0


class Transport(filesystem.Transport):
    Channel = Channel
    # kombu polls a virtual transport's queues every polling_interval (1 s by default) whenever a
    # fetch finds nothing; with acks_late and prefetch 1 a worker thread waited up to a second
    # between two tasks. Listing a local folder 20 times a second costs nothing.
    polling_interval = 0.05


def folder_options(directory: Path) -> dict:
    """``CELERY_BROKER_TRANSPORT_OPTIONS`` for the embedded broker under ``directory`` (its queue,
    processed and control folders, made here; processed messages are not kept)."""
    for sub in ("queue", "processed", "control"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(directory / "queue"),
        "data_folder_out": str(directory / "queue"),
        "processed_folder": str(directory / "processed"),
        "control_folder": str(directory / "control"),
        "store_processed": False,
    }
