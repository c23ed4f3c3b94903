"""Real servers no one here wrote, started for a test or a benchmark and
always taken down again.

postgres(): Debian's PostgreSQL 15 in a data directory of its own, on a
unix socket only, with the environment asked for (LD_PRELOAD, PULLPROF_*)
given to the postmaster alone: every backend is a fork of it, so whatever
the agent costs a fork, each connection pays.

    with servers.postgres(env=pptest.preload_env(PULLPROF_LISTEN=...)) as pg:
        pg.psql("select 1")
        subprocess.run(["pgbench", *pg.conn_args(), ...])

On leaving the block, even through an exception: pg_ctl stop -m fast, then
SIGKILL to whatever is left of the server's process group, and the temporary
directory removed. PostgreSQL refuses to run as root: as root, the server
and its tools run as the `postgres` user (Debian's package creates it).
"""
import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
PG_PACKAGE = "postgresql-15"


class PostgresUnavailable(RuntimeError):
    pass


def pg_missing():
    """Why postgres() cannot run here, or None."""
    if not os.path.exists(os.path.join(PG_BIN, "postgres")):
        return f"{PG_BIN}/postgres is missing (apt-get install {PG_PACKAGE})"
    if os.getuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user"
    return None


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Postgres:
    """A running server: its port, socket directory, postmaster pid, the
    agent's port when the environment started one, and its log."""

    def __init__(self, base, settings):
        self.base = base
        self.data = os.path.join(base, "data")
        self.sockdir = os.path.join(base, "sock")
        self.log = os.path.join(base, "postgres.log")
        self.port = _free_port()
        self.agent_port = None
        self.proc = None
        self._user = None
        if os.getuid() == 0:
            pw = pwd.getpwnam("postgres")
            self._user = (pw.pw_uid, pw.pw_gid)
            os.chown(base, pw.pw_uid, pw.pw_gid)
        os.mkdir(self.sockdir)
        if self._user:
            os.chown(self.sockdir, *self._user)
        self._run([os.path.join(PG_BIN, "initdb"), "-D", self.data,
                   "-A", "trust", "-U", "postgres", "-E", "UTF8",
                   "--locale=C", "--no-sync"])
        conf = {"listen_addresses": "''",
                "unix_socket_directories": f"'{self.sockdir}'",
                "port": str(self.port), "fsync": "off",
                "max_connections": "100", "logging_collector": "off"}
        conf.update(settings or {})
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")

    def _child_setup(self, cpus):
        def setup():
            if cpus is not None:
                os.sched_setaffinity(0, cpus)
            if self._user:
                os.setgroups([])
                os.setgid(self._user[1])
                os.setuid(self._user[0])
        return setup

    def _env(self, extra=None):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
        e.update(LC_ALL="C", LANG="C")
        e.update(extra or {})
        return e

    def _run(self, argv, env=None, timeout=120, check=True):
        r = subprocess.run(argv, env=self._env(env), capture_output=True,
                           text=True, timeout=timeout, cwd=self.base,
                           preexec_fn=self._child_setup(None))
        if check and r.returncode != 0:
            raise RuntimeError(f"{os.path.basename(argv[0])} exited "
                               f"{r.returncode}: {r.stderr[-1000:]}")
        return r

    def start(self, env, cpus):
        with open(self.log, "ab") as log:
            # A session of its own: everything the server forks can be
            # found and killed by its process group if a stop fails.
            self.proc = subprocess.Popen(
                [os.path.join(PG_BIN, "postgres"), "-D", self.data],
                env=self._env(env), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, cwd=self.base, start_new_session=True,
                preexec_fn=self._child_setup(cpus))
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited {self.proc.returncode}"
                                   f": {self.log_text()[-2000:]}")
            r = self._run([os.path.join(PG_BIN, "pg_isready"), "-q",
                           *self.conn_args()], check=False)
            if r.returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("postgres does not accept connections: "
                               + self.log_text()[-2000:])
        if env and env.get("PULLPROF_LISTEN"):
            m = re.search(r"serving http://[^:]+:(\d+)/", self.log_text())
            if not m:
                raise RuntimeError("the agent in the postmaster did not "
                                   "start: " + self.log_text()[-2000:])
            self.agent_port = int(m.group(1))

    @property
    def pid(self):
        return self.proc.pid

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def conn_args(self):
        """Connection options for psql, pgbench, pg_isready."""
        return ["-h", self.sockdir, "-p", str(self.port), "-U", "postgres"]

    def psql(self, sql, db="postgres"):
        r = self._run([os.path.join(PG_BIN, "psql"), *self.conn_args(),
                       "-d", db, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        return r.stdout

    def stop(self):
        """pg_ctl stop -m fast; whatever is left of the process group is
        killed. Never raises."""
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self._run([os.path.join(PG_BIN, "pg_ctl"), "-D", self.data,
                           "stop", "-m", "fast", "-w", "-t", "60"],
                          check=False, timeout=90)
            self.proc.wait(timeout=30)
        except (subprocess.TimeoutExpired, OSError):
            pass
        # Backends outlive a postmaster killed by a crash; none may stay.
        for _ in range(50):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextlib.contextmanager
def postgres(env=None, settings=None, cpus=None):
    """A PostgreSQL 15 server for the block: env is given to the
    postmaster (and so to every backend), settings are postgresql.conf
    lines ({name: value as written}), cpus an affinity set. Raises
    PostgresUnavailable when it cannot run here."""
    why = pg_missing()
    if why:
        raise PostgresUnavailable(why)
    base = tempfile.mkdtemp(prefix="pullprof-pg-")
    pg = None
    try:
        pg = Postgres(base, settings)
        pg.start(env, cpus)
        yield pg
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(base, ignore_errors=True)
