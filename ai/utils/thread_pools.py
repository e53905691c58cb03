"""Thread pools of the contrib's own, outside Twisted's shared one.

Twisted's reactor pool (``deferToThread``) is shared with Evennia and holds ten threads:
fifty assistants waiting on a slow provider would queue behind each other there. Model
calls and long-term memory each get a pool of their own instead.
"""

import threading
from functools import partial

from twisted.internet import reactor, threads
from twisted.python.threadpool import ThreadPool


class LazyPool:
    """A thread pool started on its first call and stopped when the reactor shuts down.

    Args:
        name (str): The threads' name prefix.
        size (callable): Returns how many threads the pool may run, read when it starts.
    """

    def __init__(self, name, size):
        self.name = name
        self.size = size
        self._pool = None
        self._lock = threading.Lock()

    def run(self, function, *args, **kwargs):
        """Run ``function(*args, **kwargs)`` on the pool; return a Deferred."""
        return threads.deferToThreadPool(reactor, self.started(), function, *args, **kwargs)

    def started(self):
        """Return the pool, started."""
        with self._lock:
            if self._pool is None:
                pool = ThreadPool(minthreads=1, maxthreads=self.size(), name=self.name)
                # Daemon threads: a test run or a crashed server must still exit.
                pool.threadFactory = partial(threading.Thread, daemon=True)
                pool.start()
                reactor.addSystemEventTrigger("during", "shutdown", pool.stop)
                self._pool = pool
            return self._pool
