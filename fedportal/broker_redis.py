"""kombu's Redis transport, with a worker that survives a broker restart while it holds messages.

When Redis goes away while the worker holds messages it has not acknowledged yet, Celery closes the
broken connection and kombu's channel tries to put those messages back in the queue. With kombu
5.7.0 that attempt can find the connection already closed (``client`` is None). kombu then raises
``AttributeError`` in ``Channel._connparams`` instead of a connection error. Celery treats that as
"Unrecoverable error" and the worker exits. Seen in CI, and reproduced by restarting Redis with
0.3 s between shutdown and start while tasks ran.

Here a closed connection raises redis-py's ``ConnectionError``. That is what the same restore raises
when Redis is merely down, and Celery handles it: the message stays in Redis's unacked set (restored
after ``visibility_timeout``), and the consumer reconnects as after any broker loss.
"""

from kombu.transport import redis as kombu_redis
from redis import exceptions as redis_exceptions


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous=False):
        if self.connection.client is None:
            raise redis_exceptions.ConnectionError("the broker connection is already closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
